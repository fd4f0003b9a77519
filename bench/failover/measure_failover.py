#!/usr/bin/env python3
"""bench/failover: how long a dead, stopped or black-holed GPU backend stays
in rotation, and how many requests fail, under a steady streaming load.

    bench/failover/measure_failover.py [--runs 5] [--build build]

Starts gpusim backends and geogate with the default [health] settings
(interval 100 ms, timeout 200 ms, unhealthy_threshold 2), applies each
failure while 6 clients stream, and reports per mode the median and max
detection time (failure -> backend marked out of rotation) and the failed
requests that had not started streaming. Black hole needs root and ip netns.
Prints a Markdown table (to stdout and, with --write, into bench/RESULTS.md).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--write", action="store_true", help="update bench/RESULTS.md")
    ap.add_argument("--modes", help="comma-separated subset of: kill -9,kill -STOP,black hole")
    args = ap.parse_args()
    os.environ["GEOGATE_BIN_DIR"] = os.path.abspath(args.build)

    from gateway_harness import Gateway, GatewayConfig  # noqa: E402
    from harness import GPUSIM_BIN, GpuSim, Process, wait_until  # noqa: E402
    from test_failover import StreamLoad  # noqa: E402

    class Case(unittest.TestCase):  # only to own cleanups
        def runTest(self):
            pass

    def one(mode: str) -> tuple[float, int, int]:
        case = Case()
        case.setUp()
        try:
            ns = None
            b2 = GpuSim(name="b2", models=["llama-3.1-8b"], ttft_ms=5, token_interval_ms=20,
                        tokens=10).start(case)
            if mode == "black hole":
                ns = f"ggbench{os.getpid()}"
                subprocess.run(["ip", "netns", "add", ns], check=True)
                case.addCleanup(subprocess.run, ["ip", "netns", "del", ns])
                subprocess.run(["ip", "link", "add", "ggbha", "type", "veth", "peer", "name", "ggbhb"],
                               check=True)
                case.addCleanup(subprocess.run, ["ip", "link", "del", "ggbha"])
                subprocess.run(["ip", "link", "set", "ggbhb", "netns", ns], check=True)
                subprocess.run(["ip", "addr", "add", "10.215.0.1/30", "dev", "ggbha"], check=True)
                subprocess.run(["ip", "link", "set", "ggbha", "up"], check=True)
                for c in (["addr", "add", "10.215.0.2/30", "dev", "ggbhb"], ["link", "set", "ggbhb", "up"],
                          ["link", "set", "lo", "up"]):
                    subprocess.run(["ip", "netns", "exec", ns, "ip"] + c, check=True)
                b1 = Process(["ip", "netns", "exec", ns, GPUSIM_BIN, "--listen", "10.215.0.2:0", "--name",
                              "b1", "--models", "llama-3.1-8b", "--ttft-ms", "5", "--token-interval-ms",
                              "20", "--tokens", "10"], name="b1").start(case)
                url = f"http://10.215.0.2:{b1.port}"
            else:
                b1 = GpuSim(name="b1", models=["llama-3.1-8b"], ttft_ms=5, token_interval_ms=20,
                            tokens=10).start(case)
                url = b1.url
            cfg = GatewayConfig().region("r1")
            cfg.backends.append({"name": "b1", "region": "r1", "url": url, "models": ["llama-3.1-8b"]})
            cfg.backend(b2, "r1")
            cfg.health = {}  # the defaults
            cfg.upstream = {"stream_idle_timeout_ms": 2000}
            gw = Gateway(cfg).start(case)
            gw.wait_until_ready()
            gw.wait_backend("b1")
            gw.wait_backend("b2")
            with StreamLoad(gw.url, 6) as load:
                wait_until(lambda: len(load.results) >= 20, 20)
                # t0 is when the failure is in place: after the command that
                # applies it returns (ip netns exec takes tens of ms to run).
                if mode == "kill -9":
                    b1.kill()
                elif mode == "kill -STOP":
                    b1.pause()
                else:
                    subprocess.run(["ip", "netns", "exec", ns, "ip", "link", "set", "ggbhb", "down"],
                                   check=True)
                t0 = time.monotonic()
                while gw.backend("b1")["healthy"]:
                    time.sleep(0.002)
                detected = time.monotonic() - t0
                wait_until(lambda: sum(r["t"] > t0 + 2 for r in load.results) >= 10, 30)
            if mode == "kill -STOP":
                b1.resume()
            failed = [r for r in load.results
                      if r["status"] != 200 or (r["events"] == 0 and not r["done"])]
            interrupted = [r for r in load.results if r["status"] == 200 and r["events"] and not r["done"]]
            for r in failed:
                print(f"{mode}: failed before streaming: {json.dumps(r)}", file=sys.stderr)
            if failed and os.environ.get("FAILOVER_DEBUG"):
                for e in gw.access_log():
                    if e.get("status", 200) >= 500:
                        print(f"{mode}: access log: {json.dumps(e)}", file=sys.stderr)
            return detected, len(failed), len(interrupted)
        finally:
            case.doCleanups()

    modes = ["kill -9", "kill -STOP"]
    if os.geteuid() == 0 and shutil.which("ip"):
        modes.append("black hole")
    if args.modes:
        modes = [m for m in modes if m in args.modes.split(",")]
    rows = []
    for mode in modes:
        runs = [one(mode) for _ in range(args.runs)]
        det = [r[0] * 1000 for r in runs]
        rows.append((mode, statistics.median(det), max(det), sum(r[1] for r in runs),
                     sum(r[2] for r in runs)))
        print(f"{mode}: {[round(d) for d in det]} ms", file=sys.stderr)
    table = ["| failure | runs | detection median | detection max | failed before streaming | streams cut (error event) |",
             "|---|---|---|---|---|---|"]
    for mode, med, mx, failed, cut in rows:
        table.append(f"| {mode} | {args.runs} | {med:.0f} ms | {mx:.0f} ms | {failed} | {cut} |")
    text = "\n".join(table)
    print(text)
    if args.write:
        sys.path.insert(0, os.path.join(ROOT, "bench"))
        from results import replace_section  # noqa: E402
        replace_section("Failover", text + "\n\nDefaults: interval 100 ms, timeout 200 ms, "
                        "unhealthy_threshold 2, 6 streaming clients, 2 backends. Detection = failure "
                        "applied -> /admin/backends shows the backend out of rotation (polled every 2 ms). "
                        f"Command: `bench/failover/measure_failover.py --runs {args.runs} --write`.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
