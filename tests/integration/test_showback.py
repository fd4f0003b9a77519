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
import socket
import tempfile
import time
import unittest

from gateway_harness import Gateway, GatewayConfig
from harness import GpuSim, chat_body, post_json, request, stream_chat, wait_until

MODEL = "llama-3.1-8b"
# What config() declares, by backend: (capacity, cost_per_hour).
BACKENDS = {"eu-h100": (4, 2.49), "us-l4": (8, 0.8)}
TOKENS = 7  # completion tokens of every answer (GpuSim tokens=7)


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
        self.assertEqual(generated, 14 * TOKENS)
        # Every request sent the same prompt: gpusim counted its tokens.
        prompt = sum(s.stats()["prompt_tokens"] for s in self.sims)
        self.assertEqual(prompt % 14, 0)
        per_prompt = prompt // 14
        self.assertGreater(per_prompt, 0)
        def access_log():
            lines = [r for r in gw.access_log() if r.get("tenant")]
            return lines if len(lines) == 14 else None

        log = wait_until(access_log, 10, message="14 access-log lines")

        # Each request's GPU share: its wall time at the backend over the
        # backend's capacity, so at least gpusim's own generation time (TTFT
        # plus the gaps between 7 tokens) and at most the whole request as
        # the gateway saw it; its cost is that at the backend's hourly price.
        for r in log:
            capacity, rate = BACKENDS[r["backend"]]
            generation_s = (2 + (TOKENS - 1) * 2) / 1000
            self.assertGreaterEqual(r["gpu_seconds"], generation_s / capacity - 1e-6, r)
            self.assertLessEqual(r["gpu_seconds"], r["duration_ms"] / 1000 / capacity + 1e-6, r)
            self.assertAlmostEqual(r["cost"], r["gpu_seconds"] * rate / 3600, delta=1e-8)
            self.assertEqual((r["prompt_tokens"], r["completion_tokens"], r["tokens_estimated"]),
                             (per_prompt, TOKENS, False), r)

        body = self.showback(gw)
        rows = {r["tenant"]: r for r in body["rows"]}
        self.assertEqual(sorted(rows), ["team-a", "team-b"])
        for tenant in ("team-a", "team-b"):
            mine = [r for r in log if r["tenant"] == tenant]
            row = rows[tenant]
            self.assertEqual(len(mine), 7)
            self.assertEqual(row["requests"], 7)
            self.assertEqual(row["estimated_requests"], 0)
            self.assertEqual(row["completion_tokens"], 7 * TOKENS)
            self.assertEqual(row["prompt_tokens"], 7 * per_prompt)
            self.assertEqual(row["estimated_share"], 0)
            # The access log rounds to 6 (GPU-seconds) and 8 (cost) decimals.
            self.assertAlmostEqual(row["gpu_seconds"], sum(r["gpu_seconds"] for r in mine),
                                   delta=7e-6)
            self.assertAlmostEqual(row["cost"], sum(r["cost"] for r in mine), delta=7e-8)
        totals = body["totals"]
        self.assertEqual((totals["requests"], totals["completion_tokens"], totals["prompt_tokens"]),
                         (14, generated, prompt))
        # Tokens came from the usage object, not estimates.
        self.assertEqual(totals.get("estimated_completion_tokens", 0), 0)
        self.assertAlmostEqual(totals["gpu_seconds"], sum(r["gpu_seconds"] for r in rows.values()),
                               places=12)
        # By backend: what each backend served, at its price.
        by_backend = self.showback(gw, "group_by=backend,gpu,provider,tier")
        self.assertEqual(sum(r["requests"] for r in by_backend["rows"]), 14)
        for r in by_backend["rows"]:
            capacity, rate = BACKENDS[r["backend"]]
            served = [e for e in log if e["backend"] == r["backend"]]
            self.assertEqual(r["requests"], len(served))
            self.assertEqual(r["completion_tokens"], len(served) * TOKENS)
            self.assertEqual((r["gpu"], r["tier"]),
                             ("H100", "reserved") if r["backend"] == "eu-h100" else ("L4", "on-demand"))
            self.assertAlmostEqual(r["gpu_seconds"], sum(e["gpu_seconds"] for e in served),
                                   delta=14e-6)
            self.assertAlmostEqual(r["cost"], r["gpu_seconds"] * rate / 3600, places=9)
        self.assertEqual(sum(r["requests"] for r in by_backend["rows"]
                             if r["backend"] == "eu-h100"),
                         self.sims[0].stats()["requests_by_path"].get("/v1/chat/completions", 0))
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
        # Four streams held open on the H100 (capacity 4): its first token
        # never comes while the test runs, and the EU header keeps them off
        # the L4 in "us".
        eu = self.sims[0]
        eu.control(ttft_ms=60000)
        body = json.dumps(chat_body(MODEL, stream=True)).encode()
        held = []
        for _ in range(4):
            sock = socket.create_connection(("127.0.0.1", gw.port), timeout=5)
            self.addCleanup(sock.close)
            sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                         b"Authorization: Bearer sk-b\r\nx-geogate-residency: EU\r\n"
                         b"Content-Type: application/json\r\n"
                         b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
            held.append(sock)
        wait_until(lambda: gw.backend("eu-h100")["inflight"] == 4, 10)

        def pools():
            status, _, report = gw.admin("GET", "/admin/capacity")
            self.assertEqual(status, 200, report)
            return report, {p["region"]: p for p in report["pools"]}

        # desired = max(1, ceil(mean in-flight / (0.7 x 4))): 2 once the
        # 5-minute mean (taken since the gateway started) passes 2.8 of the 4.
        wait_until(lambda: pools()[1]["eu"]["desired_backends"] == 2, 30,
                   message="the loaded H100 pool never asked for a second backend")
        report, by_region = pools()
        self.assertEqual(report["target_utilization"], 0.7)
        self.assertEqual(sorted(by_region), ["eu", "us"])
        h100, l4 = by_region["eu"], by_region["us"]
        self.assertEqual((h100["gpu"], h100["model"], h100["backends"], h100["configured_backends"],
                          h100["capacity_per_backend"]), ("H100", MODEL, 1, 1, 4))
        self.assertGreater(h100["mean_inflight_5m"], 2.8)
        self.assertLessEqual(h100["mean_inflight_5m"], 4)
        self.assertAlmostEqual(h100["utilization"]["5m"], h100["mean_inflight_5m"] / 4, places=6)
        self.assertEqual(h100["desired_backends"], 2)
        self.assertIn("-> 2 backends", h100["reason"])
        # The idle L4 pool keeps its one warm backend.
        self.assertEqual((l4["gpu"], l4["backends"], l4["capacity_per_backend"],
                          l4["mean_inflight_5m"], l4["utilization"]["5m"], l4["desired_backends"]),
                         ("L4", 1, 8, 0, 0, 1))
        # The same numbers in /metrics.
        self.assertEqual(gw.metric("geogate_pool_desired_backends", region="eu", gpu="H100",
                                   model=MODEL), 2)
        self.assertEqual(gw.metric("geogate_pool_desired_backends", region="us", gpu="L4",
                                   model=MODEL), 1)
        self.assertEqual(gw.metric("geogate_pool_backends", region="eu", gpu="H100", model=MODEL), 1)
        self.assertGreater(gw.metric("geogate_pool_utilization", region="eu", gpu="H100",
                                     model=MODEL, window="1m"), 0.7)
        for sock in held:
            sock.close()
        wait_until(lambda: gw.backend("eu-h100")["inflight"] == 0, 10)


if __name__ == "__main__":
    unittest.main()
