"""GPU showback, budgets and capacity with real processes: a known workload
through gpusim, then the showback totals must equal what gpusim generated;
the JSON-lines file survives a restart; a spent budget answers 429
budget_exceeded; /admin/capacity and the pool metrics answer."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import shutil
import tempfile
import time
import unittest

from gateway_harness import Gateway, GatewayConfig
from harness import GpuSim, chat_body, post_json, request, stream_chat, wait_until

MODEL = "llama-3.1-8b"


def key_hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def config(sims, directory, budget=None):
    cfg = GatewayConfig().region("eu", "EU").region("us", "US")
    cfg.backend(sims[0], "eu", gpu="H100", provider="cloud-a", tier="reserved", capacity=4,
                cost_per_hour=2.49)
    cfg.backend(sims[1], "us", gpu="L4", provider="cloud-b", tier="on-demand", capacity=8,
                cost_per_hour=0.8)
    cfg.residency = [{"name": "anywhere", "allow_jurisdictions": ["EU", "US"]}]
    team_a = {"name": "team-a", "api_key_sha256": [key_hash("sk-a")]}
    if budget is not None:
        team_a["monthly_budget"] = budget
    cfg.tenants = [team_a, {"name": "team-b", "api_key_sha256": [key_hash("sk-b")]}]
    cfg.extra = None
    text = cfg.render()
    text += f'\n[showback]\nfile = "{os.path.join(directory, "showback.jsonl")}"\nwindow_hours = 24\n'
    text += "\n[capacity]\ntarget_utilization = 0.7\nsample_interval_ms = 200\n"
    return text


class ShowbackTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="geogate-showback-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.sims = [GpuSim(name=n, models=[MODEL], ttft_ms=2, token_interval_ms=2, tokens=7).start(self)
                     for n in ("eu-h100", "us-l4")]

    def start(self, budget=None) -> Gateway:
        gw = Gateway(config(self.sims, self.dir, budget), directory=self.dir)
        gw.start(self)
        gw.wait_until_ready()
        for s in self.sims:
            gw.wait_backend(s.backend_name)
        return gw

    def workload(self, gw):
        for key, n_stream, n_plain in (("sk-a", 4, 3), ("sk-b", 2, 5)):
            h = {"Authorization": f"Bearer {key}"}
            for _ in range(n_stream):
                events = [d for _, d in stream_chat(gw.url, chat_body(MODEL, stream=True), headers=h)]
                self.assertEqual(events[-1], "[DONE]")
            for _ in range(n_plain):
                status, _, _ = post_json(gw.url, "/v1/chat/completions", chat_body(MODEL), headers=h)
                self.assertEqual(status, 200)

    def showback(self, gw, query="group_by=tenant"):
        status, headers, body = request(gw.admin_url, "GET", "/admin/showback?" + query)
        self.assertEqual(status, 200, body)
        return body

    def test_totals_equal_what_the_backends_generated(self):
        gw = self.start()
        self.workload(gw)
        generated = sum(s.stats()["tokens_generated"] for s in self.sims)
        self.assertEqual(generated, 14 * 7)
        body = self.showback(gw)
        rows = {r["tenant"]: r for r in body["rows"]}
        self.assertEqual(rows["team-a"]["requests"], 7)
        self.assertEqual(rows["team-b"]["requests"], 7)
        self.assertEqual(sum(r["completion_tokens"] for r in body["rows"]), generated)
        self.assertEqual(body["totals"]["completion_tokens"], generated)
        # Tokens came from the usage object, not estimates.
        self.assertEqual(body["totals"].get("estimated_completion_tokens", 0), 0)
        self.assertGreater(body["totals"]["gpu_seconds"], 0)
        # By backend: the cost is GPU-seconds x cost_per_hour / 3600.
        by_backend = self.showback(gw, "group_by=backend,gpu,provider,tier")
        for r in by_backend["rows"]:
            rate = 2.49 if r["backend"] == "eu-h100" else 0.8
            self.assertAlmostEqual(r["cost"], r["gpu_seconds"] * rate / 3600, places=9)
        # CSV of the same.
        status, headers, text = request(gw.admin_url, "GET", "/admin/showback?group_by=tenant&format=csv")
        self.assertEqual(status, 200)
        self.assertIn("text/csv", headers["content-type"])
        rows_csv = list(csv.DictReader(io.StringIO(text if isinstance(text, str) else text.decode())))
        self.assertEqual(sorted(r["tenant"] for r in rows_csv), ["team-a", "team-b"])
        # Counters in /metrics.
        self.assertAlmostEqual(gw.metric("geogate_cost_dollars_total"), body["totals"]["cost"], places=6)
        # A bad query is a clear 400.
        status, _, err = request(gw.admin_url, "GET", "/admin/showback?group_by=planet")
        self.assertEqual(status, 400)
        self.assertIn("planet", err["error"]["message"])

    def test_the_file_survives_a_restart(self):
        gw = self.start()
        self.workload(gw)
        before = self.showback(gw)["totals"]
        gw.terminate()
        path = os.path.join(self.dir, "showback.jsonl")
        with open(path) as f:
            lines = [json.loads(line) for line in f if line.strip()]
        self.assertTrue(lines)
        self.assertEqual(sum(l["reported_completion_tokens"] + l["estimated_completion_tokens"] for l in lines), before["completion_tokens"])
        gw2 = self.start()
        after = self.showback(gw2)["totals"]
        self.assertEqual(after["requests"], before["requests"])
        self.assertEqual(after["completion_tokens"], before["completion_tokens"])

    def test_a_spent_budget_is_429_budget_exceeded(self):
        gw = self.start(budget=0.000001)  # one micro-dollar, the unit budgets count in
        h = {"Authorization": "Bearer sk-a"}
        status, _, _ = post_json(gw.url, "/v1/chat/completions", chat_body(MODEL), headers=h)
        self.assertEqual(status, 200)
        # About 2.4 micro-dollars on the H100, 0.4 on the L4 (charges below a
        # micro-dollar round up with the probability of their fraction): a
        # few requests spend the budget.
        wait_until(lambda: post_json(gw.url, "/v1/chat/completions", chat_body(MODEL),
                                     headers=h)[0] == 429, 5)
        status, headers, body = post_json(gw.url, "/v1/chat/completions", chat_body(MODEL), headers=h)
        self.assertEqual((status, body["error"]["code"]), (429, "budget_exceeded"))
        self.assertEqual(body["error"]["type"], "rate_limit_error")
        self.assertGreaterEqual(int(headers["retry-after"]), 1)
        # Other tenants are unaffected.
        status, _, _ = post_json(gw.url, "/v1/chat/completions", chat_body(MODEL),
                                 headers={"Authorization": "Bearer sk-b"})
        self.assertEqual(status, 200)
        self.assertGreaterEqual(gw.metric("geogate_tenant_budget_used_ratio", tenant="team-a"), 1)

    def test_capacity_report_and_pool_metrics(self):
        gw = self.start()
        self.workload(gw)
        wait_until(lambda: gw.metric("geogate_pool_backends", region="eu", gpu="H100", model=MODEL) == 1, 5)
        status, _, report = gw.admin("GET", "/admin/capacity")
        self.assertEqual(status, 200)
        text = json.dumps(report)
        self.assertIn("H100", text)
        self.assertIn("desired", text)
        self.assertGreaterEqual(gw.metric("geogate_pool_desired_backends", region="eu", gpu="H100",
                                          model=MODEL), 1)


if __name__ == "__main__":
    unittest.main()
