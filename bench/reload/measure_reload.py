#!/usr/bin/env python3
"""bench/reload: time from SIGHUP to the new snapshot serving, for a config
with N backends (default 1000), while the gateway is idle.

    bench/reload/measure_reload.py [--backends 1000] [--runs 10] [--write]

"Serving" = /admin/config reports the new generation (the admin thread reads
the published runtime); the gateway also logs the reload with its own
timestamps. Backends point at one gpusim so the health thread has real
probes to run. Reported: median and max over the runs.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import unittest
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backends", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    os.environ["GEOGATE_BIN_DIR"] = os.path.abspath(args.build)
    from gateway_harness import Gateway, GatewayConfig  # noqa: E402
    from harness import GpuSim  # noqa: E402
    import json

    class Case(unittest.TestCase):
        def runTest(self):
            pass

    case = Case()
    case.setUp()
    try:
        sim = GpuSim(name="sim", models=["llama-3.1-8b"], threads=1).start(case)

        def config(variant: int) -> GatewayConfig:
            cfg = GatewayConfig()
            for r in range(10):
                cfg.region(f"r{r}", "EU" if r % 2 else "US", 10.0 * r, 5.0 * r)
            for i in range(args.backends):
                cfg.backends.append({"name": f"b{i}", "region": f"r{i % 10}", "url": sim.url,
                                     "models": ["llama-3.1-8b"], "capacity": 32 + variant,
                                     "tier": "reserved" if i % 3 else "on-demand"})
            cfg.health = {"interval_ms": 1000, "timeout_ms": 500}
            return cfg

        gw = Gateway(config(0)).start(case)
        gw.wait_until_ready(60)

        def generation() -> int:
            with urllib.request.urlopen(gw.admin_url + "/admin/config", timeout=10) as r:
                return json.loads(r.read())["generation"]

        times = []
        for run in range(1, args.runs + 1):
            gw.write_config(config(run))
            want = generation() + 1
            t0 = time.monotonic()
            gw.sighup()
            while generation() < want:
                pass
            times.append((time.monotonic() - t0) * 1000)
        text = (f"| backends | runs | SIGHUP -> serving, median | max |\n|---|---|---|---|\n"
                f"| {args.backends} | {args.runs} | {statistics.median(times):.1f} ms | {max(times):.1f} ms |\n\n"
                "Measured with the gateway idle; the time includes re-reading and validating the whole "
                "file, rebinding 1,000 health states by name, rebuilding the TLS and geo state and "
                f"publishing to every worker. Command: `bench/reload/measure_reload.py --backends {args.backends}"
                f" --runs {args.runs} --write`.")
        print(text)
        if args.write:
            sys.path.insert(0, os.path.join(ROOT, "bench"))
            from results import replace_section  # noqa: E402
            replace_section("Reload", text)
    finally:
        case.doCleanups()
    return 0


if __name__ == "__main__":
    sys.exit(main())
