#!/usr/bin/env python3
"""CPU per request of clients that pause between requests: what a keep-alive
request costs the gateway after an idle spell (a parked connection is started
again) against one that follows at once.

    bench/wrk/spells.py --gateway A/server/geogate[,B/server/geogate]
                        [--conns 512] [--pause-ms 300] [--duration 10] [--rounds 3]

Starts gpusim (`fast`: a 16-token answer at once) and, per round and binary
(interleaved A, B, B, A, ...), a fresh one-worker gateway (bench/gatewaylib.py's
config). --conns keep-alive connections each send a chat request, read the
answer, sleep --pause-ms, and again, for --duration seconds. Reports the
gateway's CPU time (/proc/PID/stat, user + system) per request and how many of
the requests met a parked connection (geogate_connections_total{event="parked"}).
Processes are stopped by their own PID only.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from gatewaylib import free_port, gateway_config, raise_nofile, stop, wait_port, wait_ready  # noqa: E402

BODY = json.dumps({"model": "fast", "messages": [{"role": "user", "content": "hi"}]}).encode()
REQUEST = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n"
           b"Content-Length: " + str(len(BODY)).encode() + b"\r\n\r\n" + BODY)


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def parked(admin: int) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{admin}/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith('geogate_connections_total{event="parked"}'):
                return float(line.split()[-1])
    return 0.0


def client(port: int, pause: float, until: float, counts: list, i: int) -> None:
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        while time.monotonic() < until:
            s.sendall(REQUEST)
            reply = b""
            while True:
                head_end = reply.find(b"\r\n\r\n")
                if head_end >= 0:
                    head = reply[:head_end].lower()
                    length = int(head.split(b"content-length:", 1)[1].split(b"\r\n", 1)[0])
                    if len(reply) >= head_end + 4 + length:
                        break
                chunk = s.recv(65536)
                if not chunk:
                    raise ConnectionError("closed")
                reply += chunk
            if not reply.startswith(b"HTTP/1.1 200 "):
                raise ConnectionError(reply[:80])
            counts[i] += 1
            time.sleep(pause)
    finally:
        s.close()


def one_row(binary: str, args, upstream: int, run_dir: str) -> dict:
    port, admin = free_port(), free_port()
    gw_dir = tempfile.mkdtemp(prefix="gw-", dir=run_dir)
    conf = os.path.join(gw_dir, "geogate.toml")
    with open(conf, "w") as f:
        f.write(gateway_config("spells", port, admin, {"fast": upstream},
                               upstream={"drain_delay_ms": 0}))
    log = open(os.path.join(gw_dir, "geogate.log"), "wb")
    proc = subprocess.Popen([binary, "--config", conf], cwd=gw_dir, stdin=subprocess.DEVNULL,
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_ready(admin, proc, 30)
        time.sleep(0.5)
        counts = [0] * args.conns
        parked_before, cpu_before = parked(admin), cpu_seconds(proc.pid)
        until = time.monotonic() + args.duration
        threads = [threading.Thread(target=client, args=(port, args.pause_ms / 1000, until, counts, i))
                   for i in range(args.conns)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        cpu = cpu_seconds(proc.pid) - cpu_before
        parks = parked(admin) - parked_before
        n = max(1, sum(counts))
        return {"binary": binary, "requests": sum(counts), "cpu_us_per_request": cpu * 1e6 / n,
                "parked_share": parks / n}
    finally:
        stop(proc)
        log.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gateway", required=True, help="geogate binaries, comma-separated")
    ap.add_argument("--gpusim", help="geogate-gpusim binary (default build's)")
    ap.add_argument("--conns", type=int, default=512)
    ap.add_argument("--pause-ms", type=float, default=300,
                    help="between a client's requests (a connection parks after 100-200 ms)")
    ap.add_argument("--duration", type=float, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", help="also write the rows to this file")
    args = ap.parse_args()
    binaries = [os.path.abspath(b) for b in args.gateway.split(",")]
    gpusim = args.gpusim or os.path.join(ROOT, "build", "bench", "gpusim", "geogate-gpusim")
    raise_nofile(4096)
    run_dir = tempfile.mkdtemp(prefix="geogate-spells-")
    up = free_port()
    sim = subprocess.Popen([gpusim, "--listen", f"127.0.0.1:{up}", "--name", "fast", "--threads", "1",
                            "--rtt-ms", "0", "--ttft-ms", "0", "--token-interval-ms", "0",
                            "--tokens", "16", "--idle-timeout-ms", "300000", "--models", "fast"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rows = []
    try:
        wait_port(up, sim)
        for r in range(args.rounds):
            for b in (binaries if r % 2 == 0 else binaries[::-1]):
                row = one_row(b, args, up, run_dir)
                rows.append(row)
                print(f"round {r + 1} {b}: {row['requests']} requests, "
                      f"{row['cpu_us_per_request']:.1f} us CPU each, "
                      f"{100 * row['parked_share']:.0f} % after a park", flush=True)
        print(f"\nmedian CPU per request ({args.conns} connections, {args.pause_ms:g} ms pauses):")
        for b in binaries:
            v = [x["cpu_us_per_request"] for x in rows if x["binary"] == b]
            print(f"  {b}: {statistics.median(v):.1f} us ({', '.join(f'{x:.1f}' for x in v)})")
        if args.json:
            with open(args.json, "w") as f:
                json.dump(rows, f, indent=1)
    finally:
        stop(sim)
    return 0


if __name__ == "__main__":
    sys.exit(main())
