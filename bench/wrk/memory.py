#!/usr/bin/env python3
"""Resident memory per idle keep-alive connection and per open stream of one
or more geogate builds: the figures of bench/RESULTS.md, "Memory per
connection (#20)", each row in a freshly started gateway.

    bench/wrk/memory.py --gateway build-release/server/geogate[,other/geogate...]
                        [--modes idle,stream,tls-idle] [--runs 3]
                        [--idle-count 10000] [--stream-count 2000] [--tls-count 2000]

Starts two gpusim upstreams (from --gpusim, default build-release's or
build's): `fast` (16-token answers at once) and `long` (a token a second).
Then for every run, mode and gateway (interleaved: A, B, A, B, ...): a fresh
gateway (one worker, access log on, no geo database, one plain and one TLS
listener), its VmRSS once ready, bench/wrk/hold.py holding the connections
(idle: one answered request each, then idle; stream: a long stream each, its
first token arrived; tls-idle: idle over TLS 1.3), the largest of three
VmRSS samples a second later, and (after - before) / held connections.

--heaptrack DIR runs each gateway under heaptrack (its files in DIR) instead
of measuring RSS: `heaptrack_print --print-peaks` then says what holds the
bytes. Processes are stopped by their own PID only.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from gatewaylib import (free_port, gateway_config, raise_nofile, self_signed_cert, stop,  # noqa: E402
                        wait_port, wait_ready)


# mode: (hold.py --mode, model, TLS)
MODES = {"idle": ("idle", "fast", False), "stream": ("stream", "long", False),
         "tls-idle": ("idle", "fast", True)}


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def gateway_pid(proc: subprocess.Popen, binary: str, heaptrack: bool) -> int:
    """The gateway's own PID. Under heaptrack it is a child of the heaptrack
    script, beside the script's interpreter pipeline (started first): the
    child whose executable is the gateway binary."""
    if not heaptrack:
        return proc.pid
    want = os.path.realpath(binary)
    for _ in range(100):
        for tid in os.listdir(f"/proc/{proc.pid}/task"):
            with open(f"/proc/{proc.pid}/task/{tid}/children") as f:
                for kid in (int(c) for c in f.read().split()):
                    try:
                        if os.path.realpath(f"/proc/{kid}/exe") == want:
                            return kid
                    except OSError:
                        pass
        time.sleep(0.1)
    raise RuntimeError(f"no {binary} under heaptrack (PID {proc.pid})")


def stop_under_heaptrack(proc: subprocess.Popen, pid: int) -> None:
    """SIGTERM to the gateway itself (it writes heaptrack's data as it exits),
    wait until that PID is gone (SIGKILL after 120 s), then for the script."""
    try:
        os.kill(pid, signal.SIGTERM)
    except OSError:
        return
    deadline = time.monotonic() + 120
    while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
        with open(f"/proc/{pid}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                break  # exited; the script reaps it
        time.sleep(0.2)
    else:
        if os.path.exists(f"/proc/{pid}"):
            os.kill(pid, signal.SIGKILL)
    try:
        proc.wait(timeout=120)
    except subprocess.TimeoutExpired:
        pass


def one_row(args, binary: str, mode: str, count: int, ups: dict, run_dir: str, tls: tuple,
            heaptrack_out: str | None) -> dict:
    hold_mode, model, use_tls = MODES[mode]
    port, port_tls, admin = free_port(), free_port(), free_port()
    gw_dir = tempfile.mkdtemp(prefix="gw-", dir=run_dir)
    conf = os.path.join(gw_dir, "geogate.toml")
    with open(conf, "w") as f:
        f.write(gateway_config("mem", port, admin, {"fast": ups["fast"], "long": ups["long"]},
                               tls=(port_tls, tls[0], tls[1]), limits={"idle_timeout_ms": 300000},
                               upstream={"pool_max_idle": 1024, "stream_idle_timeout_ms": 300000,
                                         "drain_delay_ms": 0}))
    cmd = [binary, "--config", conf]
    if heaptrack_out:
        cmd = ["heaptrack", "-o", os.path.join(heaptrack_out, f"{mode}-{os.getpid()}-{port}")] + cmd
    log = open(os.path.join(gw_dir, "geogate.log"), "wb")
    proc = subprocess.Popen(cmd, cwd=gw_dir, stdin=subprocess.DEVNULL, stdout=log,
                            stderr=subprocess.STDOUT)
    pid = None
    try:
        wait_ready(admin, proc, 120 if heaptrack_out else 30)
        time.sleep(0.5)
        pid = gateway_pid(proc, binary, bool(heaptrack_out))
        before = rss_kib(pid)
        hold = [sys.executable, os.path.join(HERE, "hold.py"), "--port",
                str(port_tls if use_tls else port), "--count", str(count), "--mode", hold_mode,
                "--model", model, "--timeout", "300"]
        if use_tls:
            hold.append("--tls")
        h = subprocess.Popen(hold, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        line = h.stdout.readline()
        if not line.startswith("READY "):
            h.kill()
            raise RuntimeError(f"hold.py failed: {h.stderr.read()[-2000:]}")
        held = json.loads(line[6:])
        time.sleep(1.0)
        samples = []
        for _ in range(3):
            samples.append(rss_kib(pid))
            time.sleep(0.3)
        after = max(samples)
        h.stdin.write("done\n")
        h.stdin.close()
        try:
            h.wait(timeout=120)
        except subprocess.TimeoutExpired:
            h.kill()
            h.wait()
        ok = max(1, held["ok"])
        return {"binary": binary, "mode": mode, "count": count, "ok": held["ok"],
                "failed": held["failed"], "rss_before_kib": before, "rss_after_kib": after,
                "kib_per_conn": (after - before) / ok}
    finally:
        if heaptrack_out and proc.poll() is None:
            if pid is None:  # failed before it was found
                try:
                    pid = gateway_pid(proc, binary, True)
                except (OSError, RuntimeError):
                    pass
            if pid is not None:
                stop_under_heaptrack(proc, pid)
        stop(proc)
        log.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gateway", required=True, help="geogate binaries, comma-separated")
    ap.add_argument("--gpusim", help="geogate-gpusim binary")
    ap.add_argument("--modes", default="idle,stream")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--idle-count", type=int, default=10000)
    ap.add_argument("--stream-count", type=int, default=2000)
    ap.add_argument("--tls-count", type=int, default=2000)
    ap.add_argument("--heaptrack", metavar="DIR", help="run the gateways under heaptrack")
    ap.add_argument("--json", help="also write the rows to this file")
    args = ap.parse_args()
    binaries = [os.path.abspath(b) for b in args.gateway.split(",")]
    gpusim = args.gpusim
    if not gpusim:
        for d in ("build-release", "build"):
            p = os.path.join(ROOT, d, "bench", "gpusim", "geogate-gpusim")
            if os.path.exists(p):
                gpusim = p
                break
    modes = args.modes.split(",")
    for m in modes:
        if m not in MODES:
            ap.error(f"unknown mode {m}")
    want = max(args.idle_count, args.stream_count, args.tls_count) * 2 + 1024
    raise_nofile(want)
    run_dir = tempfile.mkdtemp(prefix="geogate-mem-")
    if args.heaptrack:
        os.makedirs(args.heaptrack, exist_ok=True)
    cert, key = self_signed_cert(run_dir)
    ups, sims = {}, []
    try:
        for name, flags in (("fast", ["--token-interval-ms", "0", "--tokens", "16"]),
                            ("long", ["--token-interval-ms", "1000", "--tokens", "100000",
                                      "--max-tokens-cap", "1000000"])):
            port = free_port()
            p = subprocess.Popen([gpusim, "--listen", f"127.0.0.1:{port}", "--name", name,
                                  "--threads", "1", "--rtt-ms", "0", "--ttft-ms", "0",
                                  "--idle-timeout-ms", "300000", "--models", name, *flags],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            sims.append(p)
            wait_port(port, p)
            ups[name] = port
        rows = []
        for run in range(args.runs):
            for mode in modes:
                count = {"idle": args.idle_count, "stream": args.stream_count,
                         "tls-idle": args.tls_count}[mode]
                order = binaries if run % 2 == 0 else binaries[::-1]
                for b in order:
                    r = one_row(args, b, mode, count, ups, run_dir, (cert, key), args.heaptrack)
                    rows.append(r)
                    print(f"run {run + 1} {mode:<8} {b}: {r['ok']}/{count} held "
                          f"({r['failed']} failed), {r['kib_per_conn']:.2f} KiB each "
                          f"(RSS {r['rss_before_kib'] / 1024:.1f} -> "
                          f"{r['rss_after_kib'] / 1024:.1f} MiB)", flush=True)
                    time.sleep(1.0)
        print("\nmedian KiB per connection:")
        for mode in modes:
            for b in binaries:
                v = [r["kib_per_conn"] for r in rows if r["mode"] == mode and r["binary"] == b]
                print(f"  {mode:<8} {b}: {statistics.median(v):.2f} "
                      f"({', '.join(f'{x:.2f}' for x in v)})")
        if args.json:
            with open(args.json, "w") as f:
                json.dump(rows, f, indent=1)
    finally:
        for p in sims:
            stop(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
