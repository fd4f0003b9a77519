"""The OpenAI Responses API (POST /v1/responses) through the gateway, with
real processes: routed by `model` and held to residency exactly as chat;
its usage (usage.input_tokens / output_tokens, in a stream inside
response.completed) lands in the access log, showback and /metrics; a
stream's TTFT is taken at the first output delta, not at response.created,
which gpusim sends with the response head."""

from __future__ import annotations

import hashlib
import json
import unittest

from gateway_harness import Gateway, GatewayConfig
from harness import GpuSim, SseStream, post_json, request, wait_until

MODEL = "llama-3.1-8b"
US_ONLY = "us-only-model"
TOKENS = 5
TTFT_MS = 150  # gpusim: from the response head (and response.created) to the first delta
KEY = "sk-resp"


def key_hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


class ResponsesApiTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        sim_kw = {"ttft_ms": TTFT_MS, "token_interval_ms": 2, "tokens": TOKENS}
        cls.eu = GpuSim(name="eu-sim", models=[MODEL], **sim_kw)
        cls.us = GpuSim(name="us-sim", models=[MODEL, US_ONLY], **sim_kw)
        for s in (cls.eu, cls.us):
            s.start()
        cfg = GatewayConfig().region("eu", "EU").region("us", "US")
        cfg.backend(cls.eu, "eu", models=[MODEL], gpu="H100", capacity=4, cost_per_hour=2.5)
        cfg.backend(cls.us, "us", models=[MODEL, US_ONLY], gpu="L4", capacity=8,
                    cost_per_hour=0.8)
        cfg.residency = [{"name": "anywhere", "allow_jurisdictions": ["EU", "US"]}]
        cfg.tenants = [{"name": "team-r", "api_key_sha256": [key_hash(KEY)]}]
        try:
            cls.gw = Gateway(cfg)
            cls.gw.start()
            cls.gw.wait_until_ready()
            for s in (cls.eu, cls.us):
                cls.gw.wait_backend(s.backend_name)
        except BaseException:
            for s in (cls.eu, cls.us):
                s.stop()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.gw.stop()
        cls.eu.stop()
        cls.us.stop()

    def headers(self, residency: str | None = "EU") -> dict:
        h = {"Authorization": f"Bearer {KEY}"}
        if residency:
            h["x-geogate-residency"] = residency
        return h

    def open_stream(self, residency: str, request_id: str, backend: str) -> SseStream:
        """A streamed Responses request, answered 200 by `backend`."""
        h = self.headers(residency)
        h["x-request-id"] = request_id
        s = SseStream(self.gw.url, "/v1/responses",
                      {"model": MODEL, "input": "hello", "stream": True}, headers=h)
        self.addCleanup(s.close)
        self.assertEqual(s.status, 200)
        self.assertEqual(s.headers["x-geogate-backend"], backend)
        return s

    def log_line(self, request_id: str) -> dict:
        def find():
            for r in self.gw.access_log():
                if r.get("request_id") == request_id:
                    return r
            return None
        return wait_until(find, 10, message=f"access-log line of {request_id}")

    def showback_row(self) -> dict:
        status, _, body = request(self.gw.admin_url, "GET", "/admin/showback?group_by=tenant")
        self.assertEqual(status, 200, body)
        rows = [r for r in body["rows"] if r["tenant"] == "team-r"]
        return rows[0] if rows else {"requests": 0, "completion_tokens": 0, "prompt_tokens": 0,
                                     "estimated_requests": 0, "cost": 0.0}

    def check_accounted(self, line: dict, usage: dict, stream: bool) -> None:
        self.assertEqual(line["path"], "/v1/responses")
        self.assertEqual(line["backend"], "eu-sim")
        self.assertEqual(line["stream"], stream)
        self.assertEqual(line["outcome"], "completed")
        self.assertEqual((line.get("prompt_tokens"), line.get("completion_tokens"),
                          line.get("tokens_estimated")),
                         (usage["input_tokens"], usage["output_tokens"], False), line)
        self.assertEqual(usage["output_tokens"], TOKENS)
        self.assertIsNotNone(line.get("gpu_seconds"))
        self.assertGreater(line["gpu_seconds"], 0)
        self.assertIsNotNone(line.get("cost"))
        self.assertAlmostEqual(line["cost"], line["gpu_seconds"] * 2.5 / 3600, delta=1e-8)
        # Both kinds: the first token comes TTFT_MS after the head.
        self.assertIsNotNone(line.get("ttft_ms"))
        self.assertGreaterEqual(line["ttft_ms"], TTFT_MS * 0.9, line)

    def test_stream_is_accounted_from_its_events(self):
        ttft_count = self.gw.metric("geogate_ttft_seconds_count", backend="eu-sim")
        ttft_sum = self.gw.metric("geogate_ttft_seconds_sum", backend="eu-sim")
        tokens = self.gw.metric("geogate_tokens_total", backend="eu-sim", kind="completion")
        before = self.showback_row()
        s = self.open_stream("EU", "resp-stream-1", "eu-sim")
        events = [json.loads(d) for _, d in s.events()]
        types = [e["type"] for e in events]
        self.assertEqual(types[0], "response.created")
        self.assertEqual(types[-1], "response.completed")
        self.assertEqual(types.count("response.output_text.delta"), TOKENS)
        usage = events[-1]["response"]["usage"]

        line = self.log_line("resp-stream-1")
        self.check_accounted(line, usage, stream=True)
        # One TTFT sample for the stream, at the first delta.
        self.assertEqual(self.gw.metric("geogate_ttft_seconds_count", backend="eu-sim"),
                         ttft_count + 1)
        sample = self.gw.metric("geogate_ttft_seconds_sum", backend="eu-sim") - ttft_sum
        self.assertGreaterEqual(sample, TTFT_MS / 1000 * 0.9)
        self.assertEqual(self.gw.metric("geogate_tokens_total", backend="eu-sim",
                                        kind="completion") - tokens, TOKENS)
        after = self.showback_row()
        self.assertEqual(after["requests"] - before["requests"], 1)
        self.assertEqual(after["completion_tokens"] - before["completion_tokens"], TOKENS)
        self.assertEqual(after["prompt_tokens"] - before["prompt_tokens"], usage["input_tokens"])
        self.assertEqual(after["estimated_requests"], before["estimated_requests"])
        self.assertGreater(after["cost"], before["cost"])

    def test_non_streaming_answer_is_accounted_from_its_usage(self):
        ttft_count = self.gw.metric("geogate_ttft_seconds_count", backend="eu-sim")
        before = self.showback_row()
        h = self.headers()
        h["x-request-id"] = "resp-plain-1"
        status, headers, body = post_json(self.gw.url, "/v1/responses",
                                          {"model": MODEL, "input": "hello"}, headers=h)
        self.assertEqual(status, 200, body)
        self.assertEqual(headers["x-geogate-backend"], "eu-sim")
        self.assertEqual(body["object"], "response")
        line = self.log_line("resp-plain-1")
        self.check_accounted(line, body["usage"], stream=False)
        # Non-streaming durations never feed the TTFT estimate (DESIGN.md §8).
        self.assertEqual(self.gw.metric("geogate_ttft_seconds_count", backend="eu-sim"),
                         ttft_count)
        after = self.showback_row()
        self.assertEqual(after["completion_tokens"] - before["completion_tokens"], TOKENS)
        self.assertEqual(after["estimated_requests"], before["estimated_requests"])

    def test_stream_failing_midway_ends_with_the_apis_error_event(self):
        # The US backend resets the stream after two deltas. A Responses
        # client gets the API's own error event (event: error, type "error",
        # the next sequence_number) around the gateway's error object, once,
        # and no response.completed.
        self.us.control(mode="die_after", n=2)
        self.addCleanup(self.us.control, mode="healthy")
        s = self.open_stream("US", "resp-broken-1", "us-sim")
        text = s.read_body().decode()
        events = [e for e in text.replace("\r\n", "\n").split("\n\n") if e]
        last = events[-1].split("\n")
        self.assertEqual(last[0], "event: error", events[-1])
        data = json.loads(last[1].removeprefix("data: "))
        self.assertEqual(data["type"], "error")
        self.assertEqual(data["error"]["code"], "stream_interrupted")
        self.assertEqual(data["error"]["type"], "upstream_error")
        # Numbered after the last event the backend sent.
        sent = [json.loads(e.split("data: ", 1)[1]) for e in events[:-1]]
        self.assertEqual([e["type"] for e in sent].count("response.output_text.delta"), 2)
        self.assertEqual(data["sequence_number"], sent[-1]["sequence_number"] + 1)
        self.assertEqual(text.count("stream_interrupted"), 1)
        self.assertNotIn("response.completed", text)
        line = self.log_line("resp-broken-1")
        self.assertEqual((line["outcome"], line["error"]), ("interrupted", "stream_interrupted"))

    def test_routed_by_model_under_residency_as_chat(self):
        # The model only the US backend serves: a client narrowed to EU is
        # refused, as for chat; without the narrowing it is served in the US.
        for path, body in (("/v1/chat/completions",
                            {"model": US_ONLY, "messages": [{"role": "user", "content": "x"}]}),
                           ("/v1/responses", {"model": US_ONLY, "input": "x"})):
            status, _, err = post_json(self.gw.url, path, body, headers=self.headers("EU"))
            self.assertEqual((status, err["error"]["code"]), (451, "residency_denied"), path)
            status, headers, _ = post_json(self.gw.url, path, body, headers=self.headers(None))
            self.assertEqual(status, 200, path)
            self.assertEqual(headers["x-geogate-backend"], "us-sim", path)
        # The shared model follows the narrowing to each jurisdiction.
        for residency, backend in (("EU", "eu-sim"), ("US", "us-sim")):
            status, headers, _ = post_json(self.gw.url, "/v1/responses",
                                           {"model": MODEL, "input": "x"},
                                           headers=self.headers(residency))
            self.assertEqual((status, headers["x-geogate-backend"]), (200, backend))
        status, _, err = post_json(self.gw.url, "/v1/responses", {"model": "nope", "input": "x"},
                                   headers=self.headers())
        self.assertEqual((status, err["error"]["code"]), (404, "model_not_found"))
        status, _, err = post_json(self.gw.url, "/v1/responses", {"input": "x"},
                                   headers=self.headers())
        self.assertEqual((status, err["error"]["code"]), (400, "missing_model"))


if __name__ == "__main__":
    unittest.main()
