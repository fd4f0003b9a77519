"""End to end: client SDKs as applications run them (npm, pinned in
package-lock.json) against geogate, with a simulated GPU backend behind it:
the official OpenAI Node SDK over plain HTTP and over TLS, the Vercel AI
SDK (`ai` + `@ai-sdk/openai`) and LangChain JS (`@langchain/openai`).

Each *_check.mjs script gets the fleet in GEOGATE_E2E (JSON): the base URL,
keys and models with which the gateway answers 200, 451 (a tenant held to
the EU asking for a model served only in the US), 429 (a tenant whose rate
bucket is spent) and 503 (a model whose only backend is down), and checks
its SDK's own error classes for each, and a stream whose backend dies
after two tokens (chat and Responses), which must reach the application as
the SDK's own stream error after those tokens."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))

from gateway_harness import Gateway, GatewayConfig  # noqa: E402
from harness import GpuSim, free_port, make_tls_files, wait_until  # noqa: E402

MODEL = "llama-3.1-8b"
US_ONLY = "us-only-model"  # served only in the US region
DEAD = "dead-model"        # served only by a backend that refuses connections
BROKEN = "broken-model"    # served only by a backend whose streams die after 2 tokens
TOKENS = 6
KEYS = {"ok": "sk-e2e", "eu": "sk-e2e-eu", "limited": "sk-e2e-limited"}


def key_hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def fleet_config(sim: GpuSim, broken: GpuSim, tls=None) -> GatewayConfig:
    cfg = GatewayConfig(tls=tls).region("r1", "EU").region("us", "US")
    cfg.backend(sim, "r1", models=[MODEL], cost_per_hour=1.0)
    cfg.backend(broken, "r1", models=[BROKEN])
    cfg.backend(sim, "us", models=[US_ONLY], name="us1")
    cfg.backends.append({"name": "dead", "region": "r1", "url": f"http://127.0.0.1:{free_port()}",
                         "models": [DEAD], "gpu": "L4", "provider": "p1", "tier": "on-demand",
                         "capacity": 8})
    cfg.residency = [{"name": "anywhere", "allow_jurisdictions": ["EU", "US"]},
                     {"name": "eu", "allow_jurisdictions": ["EU"]}]
    cfg.tenants = [
        {"name": "apps", "api_key_sha256": [key_hash(KEYS["ok"])]},
        {"name": "eu-apps", "api_key_sha256": [key_hash(KEYS["eu"])], "residency": "eu"},
        # One request per 1000 s: after the first, every request is 429.
        {"name": "limited", "api_key_sha256": [key_hash(KEYS["limited"])],
         "requests_per_second": 0.001, "burst": 1},
    ]
    return cfg


class SdkTest(unittest.TestCase):
    def setUp(self):
        self.sim = GpuSim(name="b1", models=[MODEL, US_ONLY], ttft_ms=5, token_interval_ms=2,
                          tokens=TOKENS)
        self.sim.start(self)
        self.broken = GpuSim(name="b2", models=[BROKEN], ttft_ms=5, token_interval_ms=2,
                             tokens=TOKENS, mode="die_after:2")
        self.broken.start(self)

    def start_gateway(self, tls=None) -> Gateway:
        gw = Gateway(fleet_config(self.sim, self.broken, tls))
        gw.start(self)
        gw.wait_until_ready()
        gw.wait_backend("b1")
        gw.wait_backend("b2")
        gw.wait_backend("us1")
        gw.wait_backend("dead", healthy=False)
        return gw

    def run_check(self, script: str, base_url: str, env: dict | None = None) -> str:
        fleet = {"baseURL": base_url, "model": MODEL, "backend": "b1", "tokens": TOKENS,
                 "keys": KEYS, "usOnlyModel": US_ONLY, "deadModel": DEAD,
                 "brokenModel": BROKEN, "brokenBackend": "b2"}
        proc = subprocess.run(["node", os.path.join(HERE, script)], cwd=HERE,
                              capture_output=True, text=True, timeout=60,
                              env={**os.environ, **(env or {}), "GEOGATE_E2E": json.dumps(fleet)})
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        return proc.stdout

    def paths_served(self) -> dict:
        return self.sim.stats()["requests_by_path"]

    def check_accounting(self, gw: Gateway) -> None:
        """Every generation the SDK got is in the access log with the
        backend's own token counts and a cost; every stream with a TTFT."""
        generation = ("/v1/chat/completions", "/v1/responses")
        expected = sum(self.paths_served().get(p, 0) for p in generation)

        def lines():
            served = [r for r in gw.access_log()
                      if r.get("status") == 200 and r.get("path") in generation
                      and r.get("backend") == "b1"]
            return served if len(served) == expected else None
        served = wait_until(lines, 10, message=f"{expected} access-log lines of generations")
        self.assertTrue(any(r["path"] == "/v1/responses" for r in served), served)
        for r in served:
            self.assertEqual((r.get("completion_tokens"), r.get("tokens_estimated")), (TOKENS, False), r)
            self.assertGreater(r.get("prompt_tokens") or 0, 0, r)
            self.assertIsNotNone(r.get("cost"), r)
            self.assertGreater(r["cost"], 0, r)
            if r["stream"]:
                self.assertIsNotNone(r.get("ttft_ms"), r)

    def check_interrupted(self, gw: Gateway) -> None:
        """The streams the broken backend cut (one chat, one Responses) are
        logged as interrupted with the error the client got."""
        def lines():
            cut = [r for r in gw.access_log() if r.get("backend") == "b2"]
            return cut if len(cut) == 2 else None
        for r in wait_until(lines, 10, message="2 access-log lines of interrupted streams"):
            self.assertEqual((r.get("outcome"), r.get("error")), ("interrupted", "stream_interrupted"), r)

    def test_openai_sdk_over_http(self):
        gw = self.start_gateway()
        out = self.run_check("openai_sdk_check.mjs", gw.url + "/v1")
        self.assertIn(f"ok: {TOKENS} tokens", out)
        self.assertIn("ok: openai errors 451 429 503", out)
        self.assertIn("ok: openai interrupted streams", out)
        self.check_accounting(gw)
        self.check_interrupted(gw)

    def test_openai_sdk_over_tls(self):
        tls = make_tls_files()
        self.addCleanup(tls.cleanup)
        gw = self.start_gateway(tls)
        out = self.run_check("openai_sdk_check.mjs", gw.tls_url + "/v1",
                             {"NODE_EXTRA_CA_CERTS": tls.ca_cert})
        self.assertIn(f"ok: {TOKENS} tokens", out)

    def test_vercel_ai_sdk(self):
        gw = self.start_gateway()
        before = self.paths_served()
        out = self.run_check("vercel_ai_check.mjs", gw.url + "/v1")
        self.assertIn("ok: ai sdk errors 451 429 503", out)
        self.assertIn("ok: ai sdk interrupted streams", out)
        after = self.paths_served()
        # The default provider speaks the Responses API, .chat() chat
        # completions: both really reached the backend.
        for path in ("/v1/responses", "/v1/chat/completions"):
            self.assertGreaterEqual(after.get(path, 0) - before.get(path, 0), 2, path)
        self.check_accounting(gw)
        self.check_interrupted(gw)

    def test_langchain_js(self):
        gw = self.start_gateway()
        before = self.paths_served()
        out = self.run_check("langchain_check.mjs", gw.url + "/v1")
        self.assertIn("ok: langchain errors 451 429 503", out)
        self.assertIn("ok: langchain interrupted streams", out)
        after = self.paths_served()
        for path in ("/v1/responses", "/v1/chat/completions", "/v1/embeddings"):
            self.assertGreaterEqual(after.get(path, 0) - before.get(path, 0), 1, path)
        self.check_accounting(gw)
        self.check_interrupted(gw)


if __name__ == "__main__":
    unittest.main()
