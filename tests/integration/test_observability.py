"""Observability with real processes: /metrics is valid Prometheus text
(promtool check metrics), its counters move as requests flow, the access log
carries one JSON line per request, and the admin endpoints answer."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import unittest

from gateway_harness import Gateway, GatewayConfig, SharedGatewayTestCase
from harness import GpuSim, chat_body, post_json, request, stream_chat

MODEL = "llama-3.1-8b"


class MetricsTest(SharedGatewayTestCase):
    SIM = {"ttft_ms": 2, "token_interval_ms": 1, "tokens": 5}

    @classmethod
    def configure(cls, sim: GpuSim) -> GatewayConfig:
        return GatewayConfig().region("r1").backend(sim, "r1", gpu="H100", provider="acme-cloud",
                                                      capacity=8, cost_per_hour=2.49)

    @unittest.skipUnless(shutil.which("promtool"), "promtool (Debian package prometheus) not installed")
    def test_metrics_pass_promtool(self):
        post_json(self.gw.url, "/v1/chat/completions", chat_body(MODEL))
        list(stream_chat(self.gw.url, chat_body(MODEL, stream=True)))
        text = self.gw.metrics()
        r = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True)
        # promtool exits non-zero on format errors; lint remarks are printed too.
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_every_family_is_documented(self):
        """docs/observability.md lists every metric family the gateway exports."""
        post_json(self.gw.url, "/v1/chat/completions", chat_body(MODEL))
        families = {line.split()[2] for line in self.gw.metrics().splitlines()
                    if line.startswith("# TYPE ")}
        self.assertGreater(len(families), 40)
        doc_path = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "observability.md")
        with open(doc_path) as f:
            doc = f.read()
        missing = sorted(f for f in families if f"`{f}`" not in doc)
        self.assertEqual(missing, [], "metric families missing from docs/observability.md")

    def test_counters_move_with_requests(self):
        before_ok = self.gw.metric("geogate_requests_total", backend="b1", code="200", gpu="H100",
                                   provider="acme-cloud", model=MODEL)
        before_404 = self.gw.metric("geogate_requests_total", code="404")
        before_tokens = self.gw.metric("geogate_tokens_total", backend="b1", kind="completion")
        before_ttft = self.gw.metric("geogate_ttft_seconds_count", backend="b1")
        for _ in range(3):
            post_json(self.gw.url, "/v1/chat/completions", chat_body(MODEL))
        events = list(stream_chat(self.gw.url, chat_body(MODEL, stream=True)))
        self.assertTrue(events)
        post_json(self.gw.url, "/v1/chat/completions", chat_body("no-such-model"))
        self.assertEqual(self.gw.metric("geogate_requests_total", backend="b1", code="200", gpu="H100",
                                        provider="acme-cloud", model=MODEL) - before_ok, 4)
        self.assertEqual(self.gw.metric("geogate_requests_total", code="404") - before_404, 1)
        # 5 tokens each, from the usage object the gateway asked for upstream.
        self.assertEqual(self.gw.metric("geogate_tokens_total", backend="b1", kind="completion")
                         - before_tokens, 20)
        # TTFT is a streaming measure: the three non-streaming requests do not count.
        self.assertEqual(self.gw.metric("geogate_ttft_seconds_count", backend="b1") - before_ttft, 1)
        self.assertGreaterEqual(self.gw.metric("geogate_inter_token_gap_seconds_count", backend="b1"), 4)
        self.assertEqual(self.gw.metric("geogate_backend_healthy", backend="b1"), 1)
        self.assertGreater(self.gw.metric("geogate_probes_total", backend="b1", result="ok"), 0)
        self.assertEqual(self.gw.metric("geogate_inflight", backend="b1"), 0)
        self.assertEqual(self.gw.metric("geogate_ready"), 1)

    def test_access_log_lines(self):
        status, _, _ = post_json(self.gw.url, "/v1/chat/completions", chat_body(MODEL),
                                 headers={"x-request-id": "obs-test-1"})
        self.assertEqual(status, 200)
        rec = self.gw.access_record("obs-test-1", timeout=5)
        for key in ("ts", "client_ip", "method", "path", "model", "status", "backend", "region",
                    "ttft_ms", "duration_ms", "bytes_in", "bytes_out", "route", "residency",
                    "prompt_tokens", "completion_tokens", "gpu_seconds", "cost"):
            self.assertIn(key, rec)
        self.assertEqual((rec["status"], rec["backend"], rec["model"]), (200, "b1", MODEL))
        self.assertEqual(rec["completion_tokens"], 5)
        self.assertFalse(rec["tokens_estimated"])
        # Not streamed, yet charged for the whole generation: gpusim answers
        # after its 2 ms first token and 4 more 1 ms apart, and the GPU-seconds
        # are that wall time over the capacity of 8 (one slot of eight).
        self.assertGreaterEqual(rec["gpu_seconds"] * 8, 0.0055)
        # cost = GPU-seconds x cost_per_hour / 3600
        self.assertAlmostEqual(rec["cost"], rec["gpu_seconds"] * 2.49 / 3600, places=7)

    def test_admin_endpoints(self):
        status, _, backends = self.gw.admin("GET", "/admin/backends")
        self.assertEqual(status, 200)
        b = backends[0]
        for key in ("name", "region", "gpu", "tier", "healthy", "state", "reason", "rtt_ms", "ttft_ms",
                    "expected_ttft_ms", "inflight", "capacity", "ejected_until"):
            self.assertIn(key, b)
        self.assertEqual((b["name"], b["gpu"], b["capacity"], b["state"]), ("b1", "H100", 8, "healthy"))
        status, _, cfg = self.gw.admin("GET", "/admin/config")
        self.assertEqual(status, 200)
        self.assertEqual(len(cfg["hash"]), 64)
        self.assertEqual(cfg["generation"], 1)
        # The reactor Asio runs on: epoll, unless a run against bench/ab's
        # io_uring build says otherwise.
        self.assertEqual(cfg["asio_backend"], os.environ.get("GEOGATE_ASIO_BACKEND", "epoll"))
        status, _, body = self.gw.admin("GET", "/healthz")
        self.assertEqual(status, 200)
        status, _, body = self.gw.admin("GET", "/admin/nothing")
        self.assertEqual(status, 404)


if __name__ == "__main__":
    unittest.main()
