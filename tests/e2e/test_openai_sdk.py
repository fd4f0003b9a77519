"""End to end: the official OpenAI Node SDK (npm `openai`) against geogate,
over plain HTTP and over TLS, with a simulated GPU backend behind it."""

from __future__ import annotations

import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))

from gateway_harness import Gateway, GatewayConfig  # noqa: E402
from harness import GpuSim, make_tls_files  # noqa: E402

MODEL = "llama-3.1-8b"


class OpenAISdkTest(unittest.TestCase):
    def run_sdk(self, base_url: str, env: dict | None = None) -> None:
        proc = subprocess.run(["node", os.path.join(HERE, "openai_sdk_check.mjs"), base_url, MODEL,
                               "b1", "6"], cwd=HERE, capture_output=True, text=True, timeout=120,
                              env={**os.environ, **(env or {})})
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertIn("ok: 6 tokens", proc.stdout)

    def setUp(self):
        self.sim = GpuSim(name="b1", models=[MODEL], ttft_ms=5, token_interval_ms=5, tokens=6)
        self.sim.start(self)

    def test_sdk_over_http(self):
        gw = Gateway(GatewayConfig().region("r1").backend(self.sim, "r1"))
        gw.start(self)
        gw.wait_until_ready()
        self.run_sdk(gw.url + "/v1")

    def test_sdk_over_tls(self):
        tls = make_tls_files()
        self.addCleanup(tls.cleanup)
        gw = Gateway(GatewayConfig(tls=tls).region("r1").backend(self.sim, "r1"))
        gw.start(self)
        gw.wait_until_ready()
        self.run_sdk(gw.tls_url + "/v1", {"NODE_EXTRA_CA_CERTS": tls.ca_cert})


if __name__ == "__main__":
    unittest.main()
