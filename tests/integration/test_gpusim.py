"""Integration tests of geogate-gpusim, the GPU backend simulator.

Timing assertions are deliberately loose (lower bounds and ordering only):
the machine is small and shared.
"""

import base64
import json
import os
import signal
import socket
import ssl
import threading
import time
import unittest
import http.client
import struct

from harness import (GpuSim, HttpStatusError, IncompleteStream, SseStream, chat_body,
                     get_json, make_tls_files, port_refuses, post_json, send_raw, stream_chat,
                     wait_until)

MODEL = "llama-3.1-8b"


def tokens_of(events):
    """Content of every token chunk of a chat stream, in order."""
    out = []
    for _, data in events:
        if data == "[DONE]":
            continue
        chunk = json.loads(data)
        for choice in chunk["choices"]:
            content = choice.get("delta", {}).get("content")
            if content is None:
                content = choice.get("text")
            if content:
                out.append(content)
    return out


RESPONSES_EVENT_ORDER = ["response.created", "response.in_progress", "response.output_item.added",
                         "response.content_part.added"]
RESPONSES_CLOSING = ["response.output_text.done", "response.content_part.done",
                     "response.output_item.done", "response.completed"]


def responses_stream(url, body):
    """(event name, data) of every event of a /v1/responses stream, read to its end."""
    with SseStream(url, "/v1/responses", {"stream": True, **body}) as s:
        if s.status != 200:
            raise HttpStatusError(s.status, s.headers, s.read_body())
        raw = s.read_body().decode()
    out = []
    for block in raw.replace("\r\n", "\n").split("\n\n"):
        if not block.strip():
            continue
        name, data = None, []
        for line in block.split("\n"):
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].lstrip())
        out.append((name, "\n".join(data)))
    return out


class ShapesTest(unittest.TestCase):
    """Endpoints and OpenAI shapes with a fast, healthy simulator."""

    def setUp(self):
        self.sim = GpuSim(name="eu-1", region="eu-west", ttft_ms=1, token_interval_ms=0,
                          tokens=4, models=[MODEL, "tiny"]).start(self)

    def test_health(self):
        status, headers, data = get_json(self.sim.url, "/health")
        self.assertEqual(status, 200)
        self.assertEqual(data["status"], "ok")
        self.assertEqual(data["backend"], "eu-1")
        self.assertEqual(data["region"], "eu-west")
        self.assertEqual(data["inflight"], 0)
        self.assertEqual(data["queue_depth"], 0)
        self.assertTrue(0.0 <= data["kv_cache_utilization"] <= 1.0)
        self.assertEqual(headers.get("x-gpusim-backend"), "eu-1")
        self.assertEqual(headers.get("x-gpusim-region"), "eu-west")
        self.assertEqual(self.sim.stats()["health_checks"], 1)

    def test_models_and_metrics(self):
        status, headers, data = get_json(self.sim.url, "/v1/models")
        self.assertEqual(status, 200)
        self.assertEqual(data["object"], "list")
        self.assertEqual([m["id"] for m in data["data"]], [MODEL, "tiny"])
        self.assertTrue(all(m["object"] == "model" for m in data["data"]))
        self.assertEqual(headers.get("x-gpusim-backend"), "eu-1")
        status, _, text = get_json(self.sim.url, "/metrics")
        self.assertEqual(status, 200)
        for metric in ("vllm:num_requests_running", "vllm:num_requests_waiting",
                       "vllm:gpu_cache_usage_perc"):
            self.assertIn(f"# TYPE {metric} gauge", text)
            self.assertRegex(text, rf"(?m)^{metric}\{{model_name=\"{MODEL}\"\}} [0-9.]+$")

    def test_chat_non_streaming(self):
        body = {"model": MODEL, "messages": [{"role": "system", "content": "be brief"},
                                              {"role": "user", "content": "one  two\tthree"}]}
        status, headers, data = post_json(self.sim.url, "/v1/chat/completions", body)
        self.assertEqual(status, 200, data)
        self.assertEqual(headers.get("x-gpusim-backend"), "eu-1")
        self.assertEqual(data["object"], "chat.completion")
        self.assertEqual(data["model"], MODEL)
        self.assertTrue(data["id"])
        self.assertIsInstance(data["created"], int)
        choice = data["choices"][0]
        self.assertEqual(choice["index"], 0)
        self.assertEqual(choice["finish_reason"], "stop")
        self.assertEqual(choice["message"]["role"], "assistant")
        self.assertEqual(choice["message"]["content"], "eu-1:0 eu-1:1 eu-1:2 eu-1:3 ")
        self.assertEqual(data["usage"],
                         {"prompt_tokens": 5, "completion_tokens": 4, "total_tokens": 9})

    def test_max_tokens(self):
        for key, value, expect in (("max_tokens", 2, 2), ("max_completion_tokens", 3, 3)):
            status, _, data = post_json(self.sim.url, "/v1/chat/completions",
                                        chat_body(MODEL, "hi", **{key: value}))
            self.assertEqual(status, 200, data)
            self.assertEqual(data["usage"]["completion_tokens"], expect)
            self.assertEqual(data["choices"][0]["message"]["content"].split(),
                             [f"eu-1:{i}" for i in range(expect)])
        status, _, data = post_json(self.sim.url, "/v1/chat/completions",
                                    chat_body(MODEL, "hi", max_tokens=0))
        self.assertEqual(status, 400, data)

    def test_completions_non_streaming(self):
        status, _, data = post_json(self.sim.url, "/v1/completions",
                                    {"model": "tiny", "prompt": "a b c", "max_tokens": 2})
        self.assertEqual(status, 200, data)
        self.assertEqual(data["object"], "text_completion")
        self.assertEqual(data["model"], "tiny")
        self.assertEqual(data["choices"][0]["text"], "eu-1:0 eu-1:1 ")
        self.assertEqual(data["choices"][0]["finish_reason"], "stop")
        self.assertEqual(data["usage"]["prompt_tokens"], 3)

    def test_embeddings(self):
        body = {"model": MODEL, "input": ["the quick fox", "jumps"]}
        status, _, data = post_json(self.sim.url, "/v1/embeddings", body)
        self.assertEqual(status, 200, data)
        self.assertEqual(data["object"], "list")
        self.assertEqual(data["model"], MODEL)
        self.assertEqual(len(data["data"]), 2)
        for i, item in enumerate(data["data"]):
            self.assertEqual(item["object"], "embedding")
            self.assertEqual(item["index"], i)
            self.assertEqual(len(item["embedding"]), 8)
            self.assertTrue(all(isinstance(x, float) for x in item["embedding"]))
        self.assertEqual(data["usage"], {"prompt_tokens": 4, "total_tokens": 4})
        _, _, again = post_json(self.sim.url, "/v1/embeddings", {"model": MODEL, "input": "jumps"})
        self.assertEqual(again["data"][0]["embedding"], data["data"][1]["embedding"])
        self.assertNotEqual(data["data"][0]["embedding"], data["data"][1]["embedding"])

    def test_embeddings_base64(self):
        body = {"model": MODEL, "input": ["the quick fox", "jumps"]}
        _, _, floats = post_json(self.sim.url, "/v1/embeddings", body)
        status, _, explicit = post_json(self.sim.url, "/v1/embeddings",
                                        {**body, "encoding_format": "float"})
        self.assertEqual(status, 200, explicit)
        self.assertEqual(explicit["data"], floats["data"])
        status, _, data = post_json(self.sim.url, "/v1/embeddings",
                                    {**body, "encoding_format": "base64"})
        self.assertEqual(status, 200, data)
        self.assertEqual(data["usage"], floats["usage"])
        for item, plain in zip(data["data"], floats["data"], strict=True):
            self.assertEqual(item["index"], plain["index"])
            self.assertIsInstance(item["embedding"], str)
            raw = base64.b64decode(item["embedding"], validate=True)
            self.assertEqual(len(raw), 4 * 8)
            # Little-endian float32: the float answer rounded to float32.
            as_float32 = [struct.unpack("<f", struct.pack("<f", x))[0]
                          for x in plain["embedding"]]
            self.assertEqual(list(struct.unpack("<8f", raw)), as_float32)
        for bad in ("int", "", 1, True):
            status, _, data = post_json(self.sim.url, "/v1/embeddings",
                                        {**body, "encoding_format": bad})
            self.assertEqual(status, 400, (bad, data))
            self.assertEqual(data["error"]["type"], "invalid_request_error")
            self.assertIn("encoding_format", data["error"]["message"])

    def test_responses_non_streaming(self):
        body = {"model": MODEL, "instructions": "be brief",
                "input": [{"role": "user", "content": "one  two\tthree"},
                          {"type": "message", "role": "user",
                           "content": [{"type": "input_text", "text": "four five"}]}]}
        status, headers, data = post_json(self.sim.url, "/v1/responses", body)
        self.assertEqual(status, 200, data)
        self.assertEqual(headers.get("x-gpusim-backend"), "eu-1")
        self.assertTrue(data["id"].startswith("resp_"), data["id"])
        self.assertEqual(data["object"], "response")
        self.assertIsInstance(data["created_at"], int)
        self.assertEqual(data["status"], "completed")
        self.assertIsNone(data["error"])
        self.assertIsNone(data["incomplete_details"])
        self.assertEqual(data["instructions"], "be brief")
        self.assertEqual(data["model"], MODEL)
        self.assertEqual(len(data["output"]), 1)
        item = data["output"][0]
        self.assertEqual(item["type"], "message")
        self.assertTrue(item["id"].startswith("msg_"), item["id"])
        self.assertEqual(item["status"], "completed")
        self.assertEqual(item["role"], "assistant")
        self.assertEqual(item["content"], [{"type": "output_text",
                                            "text": "eu-1:0 eu-1:1 eu-1:2 eu-1:3 ",
                                            "annotations": [], "logprobs": []}])
        # Prompt tokens as chat counts them: the words of instructions and input.
        self.assertEqual(data["usage"]["input_tokens"], 7)
        self.assertEqual(data["usage"]["output_tokens"], 4)
        self.assertEqual(data["usage"]["total_tokens"], 11)
        # A plain string input, max_output_tokens, and the other model.
        status, _, data = post_json(self.sim.url, "/v1/responses",
                                    {"model": "tiny", "input": "a b c", "max_output_tokens": 2})
        self.assertEqual(status, 200, data)
        self.assertEqual(data["model"], "tiny")
        self.assertIsNone(data["instructions"])
        self.assertEqual(data["max_output_tokens"], 2)
        self.assertEqual(data["output"][0]["content"][0]["text"], "eu-1:0 eu-1:1 ")
        self.assertEqual(data["usage"]["input_tokens"], 3)
        self.assertEqual(data["usage"]["output_tokens"], 2)
        stats = self.sim.stats()
        self.assertEqual(stats["requests_by_path"]["/v1/responses"], 2)
        self.assertEqual(stats["by_model"], {MODEL: 1, "tiny": 1})

    def test_responses_streaming(self):
        events = responses_stream(self.sim.url, {"model": MODEL, "input": "a b",
                                                 "instructions": "c"})
        names = [name for name, _ in events]
        self.assertEqual(names, RESPONSES_EVENT_ORDER + ["response.output_text.delta"] * 4
                         + RESPONSES_CLOSING, names)
        self.assertNotIn("[DONE]", [data for _, data in events])
        data = [json.loads(d) for _, d in events]
        self.assertEqual([d["type"] for d in data], names)
        self.assertEqual([d["sequence_number"] for d in data], list(range(len(data))))
        created, in_progress = data[0]["response"], data[1]["response"]
        self.assertTrue(created["id"].startswith("resp_"))
        self.assertEqual(created["status"], "in_progress")
        self.assertEqual(created["output"], [])
        self.assertEqual(created["model"], MODEL)
        self.assertEqual(in_progress, created)
        item_id = data[2]["item"]["id"]
        self.assertTrue(item_id.startswith("msg_"))
        self.assertEqual(data[2]["item"]["status"], "in_progress")
        self.assertEqual(data[2]["output_index"], 0)
        self.assertEqual(data[3]["part"]["text"], "")
        deltas = [d for d in data if d["type"] == "response.output_text.delta"]
        for d in deltas + [data[3], data[-4], data[-3]]:
            self.assertEqual((d["item_id"], d["output_index"], d["content_index"]),
                             (item_id, 0, 0))
        # Token texts as chat's, so a test can tell which backend served it.
        self.assertEqual([d["delta"] for d in deltas], ["eu-1:0 ", "eu-1:1 ", "eu-1:2 ", "eu-1:3 "])
        text = "".join(d["delta"] for d in deltas)
        self.assertEqual(data[-4]["text"], text)
        self.assertEqual(data[-3]["part"]["text"], text)
        self.assertEqual(data[-2]["item"]["id"], item_id)
        self.assertEqual(data[-2]["item"]["status"], "completed")
        self.assertEqual(data[-2]["item"]["content"][0]["text"], text)
        done = data[-1]["response"]
        self.assertEqual(done["id"], created["id"])
        self.assertEqual(done["status"], "completed")
        self.assertEqual(done["output"], [data[-2]["item"]])
        self.assertEqual((done["usage"]["input_tokens"], done["usage"]["output_tokens"],
                          done["usage"]["total_tokens"]), (3, 4, 7))
        stats = wait_until(lambda: (s := self.sim.stats())["streams_completed"] == 1 and s,
                           timeout=5, message="stream counted as completed")
        self.assertEqual(stats["streams_started"], 1)
        self.assertEqual(stats["tokens_generated"], 4)
        # max_output_tokens caps the deltas and moves the closing sequence numbers.
        events = responses_stream(self.sim.url, {"model": MODEL, "input": "x",
                                                 "max_output_tokens": 1})
        data = [json.loads(d) for _, d in events]
        self.assertEqual([d["type"] for d in data], RESPONSES_EVENT_ORDER
                         + ["response.output_text.delta"] + RESPONSES_CLOSING)
        self.assertEqual([d["sequence_number"] for d in data], list(range(9)))
        self.assertEqual(data[-1]["response"]["usage"]["output_tokens"], 1)

    def test_responses_errors(self):
        status, _, data = post_json(self.sim.url, "/v1/responses",
                                    {"model": "nope", "input": "hi"})
        self.assertEqual(status, 404, data)
        self.assertEqual(data["error"]["code"], "model_not_found")
        with self.assertRaises(HttpStatusError) as ctx:
            responses_stream(self.sim.url, {"model": "nope", "input": "hi"})
        self.assertEqual(ctx.exception.status, 404)
        for bad in ({"model": MODEL},
                    {"model": MODEL, "input": 5},
                    {"model": MODEL, "input": []},
                    {"model": MODEL, "input": ["hi"]},
                    {"model": MODEL, "input": [{"role": "user", "content": 5}]},
                    {"model": MODEL, "input": "hi", "instructions": 5},
                    {"model": MODEL, "input": "hi", "max_output_tokens": 0},
                    {"model": MODEL, "input": "hi", "stream": "yes"},
                    {"input": "hi"}):
            status, _, data = post_json(self.sim.url, "/v1/responses", bad)
            self.assertEqual(status, 400, (bad, data))
            self.assertEqual(data["error"]["type"], "invalid_request_error")
        status, _, _ = get_json(self.sim.url, "/v1/responses")
        self.assertEqual(status, 405)

    def test_errors(self):
        status, _, data = post_json(self.sim.url, "/v1/chat/completions", chat_body("nope"))
        self.assertEqual(status, 404)
        self.assertEqual(data["error"]["type"], "invalid_request_error")
        self.assertEqual(data["error"]["code"], "model_not_found")
        self.assertTrue(data["error"]["message"])
        status, headers, data = post_json(self.sim.url, "/v1/chat/completions", "{not json")
        self.assertEqual(status, 400)
        self.assertEqual(data["error"]["type"], "invalid_request_error")
        self.assertEqual(headers.get("x-gpusim-backend"), "eu-1")
        status, _, data = post_json(self.sim.url, "/v1/chat/completions", {"messages": []})
        self.assertEqual(status, 400)
        status, _, data = get_json(self.sim.url, "/nowhere")
        self.assertEqual(status, 404)
        self.assertEqual(data["error"]["code"], "not_found")
        status, _, data = get_json(self.sim.url, "/v1/chat/completions")
        self.assertEqual(status, 405)

    def test_malformed_http_gets_400(self):
        reply = send_raw(self.sim.url, b"GARBAGE\r\n\r\n")
        self.assertTrue(reply.startswith(b"HTTP/1.1 400"), reply[:100])
        reply = send_raw(self.sim.url, b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: "
                         + b"a" * 20000 + b"\r\n\r\n")
        self.assertTrue(reply.startswith(b"HTTP/1.1 431"), reply[:100])

    def test_keep_alive_and_pipelining(self):
        conn = http.client.HTTPConnection("127.0.0.1", self.sim.port, timeout=10)
        self.addCleanup(conn.close)
        for _ in range(3):
            conn.request("POST", "/v1/chat/completions", body=json.dumps(chat_body(MODEL)),
                         headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            self.assertEqual(resp.status, 200)
            json.loads(resp.read())
        # Two requests in one write: both answered, in order, on one connection.
        one = json.dumps(chat_body(MODEL, max_tokens=1)).encode()
        req = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
               b"\r\nContent-Length: " + str(len(one)).encode() + b"\r\n\r\n" + one)
        reply = send_raw(self.sim.url, req + req.replace(b"Host: x", b"Host: x\r\nConnection: close"))
        self.assertEqual(reply.count(b"HTTP/1.1 200 OK"), 2, reply)

    def test_back_to_back_requests_on_one_connection(self):
        # A client that sends its next request the moment a response ends
        # raced the watch on the connection: the request could hang until the
        # client gave up. wrk -c1 hit that within ~20 requests; this Python
        # client is slower than the race window, so it guards the behaviour
        # (400 immediate requests, none left unanswered) rather than
        # reproducing that race every time.
        sim = GpuSim(ttft_ms=0, token_interval_ms=0, tokens=2).start(self)
        one = json.dumps(chat_body(MODEL, max_tokens=2)).encode()
        req = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
               b"\r\nContent-Length: " + str(len(one)).encode() + b"\r\n\r\n" + one)
        sock = socket.create_connection(("127.0.0.1", sim.port), timeout=5)
        self.addCleanup(sock.close)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        buf = b""
        for i in range(400):
            sock.sendall(req)
            while True:
                head_end = buf.find(b"\r\n\r\n")
                if head_end >= 0:
                    head = buf[:head_end].decode("latin-1").lower()
                    length = int(head.split("content-length:")[1].split("\r\n")[0])
                    if len(buf) >= head_end + 4 + length:
                        break
                try:
                    data = sock.recv(65536)
                except socket.timeout:
                    self.fail(f"request {i} on the connection got no answer within 5 s")
                self.assertTrue(data, f"connection closed at request {i}")
                buf += data
            self.assertTrue(buf.startswith(b"HTTP/1.1 200"), buf[:80])
            buf = buf[head_end + 4 + length:]

    def test_chat_streaming(self):
        events = list(stream_chat(self.sim.url, chat_body(MODEL, "a b")))
        self.assertEqual(events[-1][1], "[DONE]")
        chunks = [json.loads(d) for _, d in events[:-1]]
        self.assertEqual(len(chunks), 5)  # 4 tokens + the finish chunk, no usage chunk
        ids = {c["id"] for c in chunks}
        self.assertEqual(len(ids), 1)
        for c in chunks:
            self.assertEqual(c["object"], "chat.completion.chunk")
            self.assertEqual(c["model"], MODEL)
            self.assertIsInstance(c["created"], int)
            self.assertEqual(len(c["choices"]), 1)
            self.assertNotIn("usage", c)
        self.assertEqual(chunks[0]["choices"][0]["delta"].get("role"), "assistant")
        self.assertEqual(tokens_of(events), ["eu-1:0 ", "eu-1:1 ", "eu-1:2 ", "eu-1:3 "])
        for c in chunks[:-1]:
            self.assertIsNone(c["choices"][0]["finish_reason"])
        self.assertEqual(chunks[-1]["choices"][0]["finish_reason"], "stop")
        # The client can read [DONE] before the simulator counts the stream.
        stats = wait_until(lambda: (s := self.sim.stats())["streams_completed"] == 1 and s,
                           timeout=5, message="stream counted as completed")
        self.assertEqual(stats["streams_started"], 1)
        self.assertEqual(stats["tokens_generated"], 4)

    def test_stream_headers_and_chunking(self):
        with SseStream(self.sim.url, "/v1/chat/completions",
                       chat_body(MODEL, stream=True, max_tokens=2)) as s:
            self.assertEqual(s.status, 200)
            self.assertTrue(s.headers["content-type"].startswith("text/event-stream"))
            self.assertEqual(s.headers["transfer-encoding"], "chunked")
            self.assertEqual(s.headers["x-gpusim-backend"], "eu-1")
            self.assertEqual(s.headers["x-gpusim-region"], "eu-west")
            self.assertEqual(len(list(s.events())), 4)

    def test_include_usage(self):
        body = chat_body(MODEL, "one two three", stream_options={"include_usage": True})
        events = list(stream_chat(self.sim.url, body))
        self.assertEqual(events[-1][1], "[DONE]")
        usage_chunk = json.loads(events[-2][1])
        self.assertEqual(usage_chunk["choices"], [])
        self.assertEqual(usage_chunk["usage"],
                         {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7})
        self.assertEqual(json.loads(events[-3][1])["choices"][0]["finish_reason"], "stop")
        body["stream_options"] = {"include_usage": False}
        events = list(stream_chat(self.sim.url, body))
        self.assertTrue(all("usage" not in json.loads(d) for _, d in events[:-1]))

    def test_openai_chunk_shape(self):
        # --chunk-shape openai: "usage":null in every chunk of a stream that
        # asked for usage, as api.openai.com sends; none when it did not.
        sim = GpuSim(ttft_ms=1, token_interval_ms=0, tokens=3, models=[MODEL],
                     chunk_shape="openai").start(self)
        body = chat_body(MODEL, "one two", stream_options={"include_usage": True})
        for path in ("/v1/chat/completions", "/v1/completions"):
            if path == "/v1/completions":
                body = {"model": MODEL, "prompt": "x", "max_tokens": 3,
                        "stream_options": {"include_usage": True}}
            chunks = [json.loads(d) for _, d in list(stream_chat(sim.url, body, path=path))[:-1]]
            self.assertEqual(len(chunks), 5, path)  # 3 tokens, the finish, usage
            self.assertTrue(all(c["usage"] is None for c in chunks[:-1]), path)
            self.assertEqual(chunks[-1]["usage"]["completion_tokens"], 3, path)
            body["stream_options"] = {"include_usage": False}
            chunks = [json.loads(d) for _, d in list(stream_chat(sim.url, body, path=path))[:-1]]
            self.assertTrue(all("usage" not in c for c in chunks), path)

    def test_completions_streaming(self):
        events = list(stream_chat(self.sim.url, {"model": MODEL, "prompt": "x", "max_tokens": 3},
                                  path="/v1/completions"))
        self.assertEqual(events[-1][1], "[DONE]")
        chunks = [json.loads(d) for _, d in events[:-1]]
        self.assertTrue(all(c["object"] == "text_completion" for c in chunks))
        self.assertEqual(tokens_of(events), ["eu-1:0 ", "eu-1:1 ", "eu-1:2 "])
        self.assertEqual(chunks[-1]["choices"][0]["finish_reason"], "stop")

    def test_stats_by_client_and_model(self):
        post_json(self.sim.url, "/v1/chat/completions", chat_body(MODEL),
                  headers={"X-Forwarded-For": "203.0.113.7, 10.0.0.1"})
        post_json(self.sim.url, "/v1/chat/completions", chat_body("tiny"))
        stats = self.sim.stats()
        self.assertEqual(stats["by_client"].get("203.0.113.7"), 1)
        self.assertEqual(stats["by_client"].get("127.0.0.1"), 1)
        self.assertEqual(stats["by_model"], {MODEL: 1, "tiny": 1})
        self.assertEqual(stats["requests_by_path"]["/v1/chat/completions"], 2)
        self.assertEqual(stats["requests_total"], 2)
        self.assertEqual(stats["name"], "eu-1")
        self.assertEqual(stats["region"], "eu-west")
        self.assertEqual(stats["mode"], "healthy")
        self.sim.reset()
        stats = self.sim.stats()
        self.assertEqual(stats["requests_total"], 0)
        self.assertEqual(stats["by_client"], {})

    def test_control_validation(self):
        status, _, _ = post_json(self.sim.control_url, "/control", {"mode": "sideways"})
        self.assertEqual(status, 400)
        status, _, _ = post_json(self.sim.control_url, "/control", {"rtt_ms": -1})
        self.assertEqual(status, 400)
        status, _, _ = post_json(self.sim.control_url, "/control", {"bogus": 1})
        self.assertEqual(status, 400)
        settings = self.sim.control(ttft_ms=7.5)
        self.assertEqual(settings["ttft_ms"], 7.5)
        self.assertEqual(self.sim.settings()["mode"], "healthy")


class TimingTest(unittest.TestCase):
    """Delays: generous lower bounds and ordering, never tight upper bounds."""

    def test_tokens_arrive_incrementally(self):
        sim = GpuSim(ttft_ms=1, token_interval_ms=100, tokens=5).start(self)
        events = list(stream_chat(sim.url, chat_body(MODEL)))
        token_times = [t for t, d in events if d != "[DONE]"][:5]
        self.assertEqual(len(token_times), 5)
        self.assertEqual(token_times, sorted(token_times))
        gaps = [b - a for a, b in zip(token_times, token_times[1:])]
        # Each gap is ~100 ms; a busy machine may bunch a pair, never all.
        self.assertGreater(token_times[-1] - token_times[0], 0.25, gaps)
        self.assertGreater(sum(1 for g in gaps if g > 0.05), 2, gaps)

    def test_rtt_applies_to_health_and_ttft_after_it(self):
        sim = GpuSim(rtt_ms=300, ttft_ms=200, token_interval_ms=0, tokens=1).start(self)
        t0 = time.monotonic()
        status, _ = sim.health()
        self.assertEqual(status, 200)
        self.assertGreater(time.monotonic() - t0, 0.25)
        t0 = time.monotonic()
        s = SseStream(sim.url, "/v1/chat/completions", chat_body(MODEL, stream=True))
        self.addCleanup(s.close)
        head_at = time.monotonic()
        first_at, _ = s.next_event()
        self.assertGreater(head_at - t0, 0.25)  # the head after the RTT
        self.assertGreater(first_at - head_at, 0.15)  # the first token a TTFT later
        sim.control(rtt_ms=0)
        t0 = time.monotonic()
        sim.health()
        self.assertLess(time.monotonic() - t0, 5)

    def test_responses_ttft_after_created(self):
        sim = GpuSim(rtt_ms=300, ttft_ms=200, token_interval_ms=0, tokens=1).start(self)
        t0 = time.monotonic()
        s = SseStream(sim.url, "/v1/responses", {"model": MODEL, "input": "hi", "stream": True})
        self.addCleanup(s.close)
        head_at = time.monotonic()
        created_at, created = s.next_event()
        self.assertEqual(json.loads(created)["type"], "response.created")
        while (ev := s.next_event()) is not None:
            if json.loads(ev[1])["type"] == "response.output_text.delta":
                break
        self.assertIsNotNone(ev)
        self.assertGreater(head_at - t0, 0.25)  # the head after the RTT
        # response.created comes with the head, the first delta a TTFT later.
        self.assertGreater(ev[0] - created_at, 0.15)

    def test_slow_mode_multiplies(self):
        sim = GpuSim(ttft_ms=60, token_interval_ms=0, tokens=1).start(self)
        sim.control("slow", factor=5)
        t0 = time.monotonic()
        status, _, _ = post_json(sim.url, "/v1/chat/completions", chat_body(MODEL))
        self.assertEqual(status, 200)
        self.assertGreater(time.monotonic() - t0, 0.25)
        self.assertEqual(sim.stats()["mode"], "slow")

    def test_decode_grid(self):
        sim = GpuSim(ttft_ms=0, token_interval_ms=0, tokens=6, decode_step_ms=60).start(self)
        t0 = time.monotonic()
        events = list(stream_chat(sim.url, chat_body(MODEL)))
        self.assertEqual(len(tokens_of(events)), 6)
        # One token per 60 ms step: at least 5 steps between the first and last.
        self.assertGreater(time.monotonic() - t0, 0.25)

    def test_max_concurrency_queues_fifo(self):
        sim = GpuSim(ttft_ms=300, token_interval_ms=0, tokens=1, max_concurrency=1).start(self)
        results = []

        def call():
            status, _, _ = post_json(sim.url, "/v1/chat/completions", chat_body(MODEL),
                                     timeout=30)
            results.append((status, time.monotonic()))

        t0 = time.monotonic()
        threads = [threading.Thread(target=call) for _ in range(3)]
        for th in threads:
            th.start()
        wait_until(lambda: sim.stats()["queue_depth"] >= 1, timeout=10, message="a queued request")
        status, health = sim.health()
        self.assertEqual(health["inflight"], 1)
        self.assertEqual(health["kv_cache_utilization"], 1.0)
        for th in threads:
            th.join(30)
        self.assertEqual([s for s, _ in results], [200, 200, 200])
        # Served one at a time: three TTFTs back to back.
        self.assertGreater(max(t for _, t in results) - t0, 0.75)
        wait_until(lambda: sim.stats()["inflight"] == 0, message="inflight back to 0")

    def test_queue_limit_gives_429(self):
        sim = GpuSim(ttft_ms=0, token_interval_ms=200, tokens=50, max_concurrency=1,
                     queue_limit=1).start(self)
        running = SseStream(sim.url, "/v1/chat/completions", chat_body(MODEL, stream=True))
        self.addCleanup(running.close)
        running.next_event()
        # The queued request holds the one queue place (in a thread: it blocks).
        t = threading.Thread(target=lambda: post_json(sim.url, "/v1/chat/completions",
                                                      chat_body(MODEL, max_tokens=1), timeout=30),
                             daemon=True)
        t.start()
        wait_until(lambda: sim.stats()["queue_depth"] == 1, message="one queued request")
        status, headers, data = post_json(sim.url, "/v1/chat/completions", chat_body(MODEL))
        self.assertEqual(status, 429)
        self.assertEqual(data["error"]["type"], "rate_limit_error")
        self.assertEqual(headers.get("x-gpusim-backend"), "gpusim")
        running.close(abort=True)
        t.join(30)
        self.assertFalse(t.is_alive())


class FailureModesTest(unittest.TestCase):

    def test_refuse_then_healthy_reopens_same_port(self):
        sim = GpuSim(ttft_ms=1, token_interval_ms=100, tokens=100, threads=2).start(self)
        port = sim.port
        stream = SseStream(sim.url, "/v1/chat/completions", chat_body(MODEL, stream=True))
        self.addCleanup(stream.close)
        stream.next_event()
        sim.control("refuse")
        self.assertTrue(port_refuses("127.0.0.1", port))
        with self.assertRaises((ConnectionError, IncompleteStream, OSError)):
            for _ in range(200):
                if stream.next_event(timeout=5) is None:
                    break
        sim.control("healthy")
        status, _ = sim.health()
        self.assertEqual(status, 200)
        self.assertEqual(sim.port, port)
        self.assertEqual(sim.stats()["mode"], "healthy")

    def test_start_in_refuse_mode(self):
        sim = GpuSim(mode="refuse").start(self)
        self.assertTrue(port_refuses("127.0.0.1", sim.port))
        sim.control("healthy")
        self.assertEqual(sim.health()[0], 200)

    def test_error500(self):
        sim = GpuSim(ttft_ms=1).start(self)
        sim.control("error500")
        status, headers, data = get_json(sim.url, "/health")
        self.assertEqual(status, 500)
        self.assertEqual(headers.get("x-gpusim-backend"), "gpusim")
        status, _, data = post_json(sim.url, "/v1/chat/completions", chat_body(MODEL))
        self.assertEqual(status, 500)
        self.assertEqual(set(data["error"]), {"message", "type", "code"})
        with self.assertRaises(HttpStatusError) as ctx:
            list(stream_chat(sim.url, chat_body(MODEL)))
        self.assertEqual(ctx.exception.status, 500)
        sim.control("healthy")
        self.assertEqual(sim.health()[0], 200)

    def test_stall_and_resume(self):
        sim = GpuSim(ttft_ms=1, token_interval_ms=50, tokens=20).start(self)
        stream = SseStream(sim.url, "/v1/chat/completions", chat_body(MODEL, stream=True))
        self.addCleanup(stream.close)
        stream.next_event()
        sim.control("stall")
        # Connects still succeed, but nothing is answered.
        with self.assertRaises(socket.timeout):
            get_json(sim.url, "/health", timeout=0.5)
        # At most a token that was already on its way, then silence.
        seen = 1
        deadline = time.monotonic() + 0.4
        while time.monotonic() < deadline:
            try:
                stream.next_event(timeout=0.3)
                seen += 1
            except socket.timeout:
                break
        self.assertLessEqual(seen, 3)
        with self.assertRaises(socket.timeout):
            stream.next_event(timeout=0.5)
        sim.control("healthy")
        rest = list(stream.events(timeout=10))
        self.assertEqual(rest[-1][1], "[DONE]")
        wait_until(lambda: sim.stats()["streams_completed"] == 1, timeout=5,
                   message="stream counted as completed")
        self.assertEqual(sim.health()[0], 200)

    def test_die_after_resets_mid_stream(self):
        sim = GpuSim(ttft_ms=1, token_interval_ms=5, tokens=10).start(self)
        sim.control("die_after", n=2)
        stream = SseStream(sim.url, "/v1/chat/completions", chat_body(MODEL, stream=True))
        self.addCleanup(stream.close)
        self.assertEqual(stream.status, 200)
        got = []
        with self.assertRaises(ConnectionResetError):
            while True:
                ev = stream.next_event(timeout=10)
                if ev is None:
                    break
                got.append(ev)
        self.assertEqual(tokens_of(got), ["gpusim:0 ", "gpusim:1 "])
        wait_until(lambda: sim.stats()["streams_aborted"] == 1, message="an aborted stream")
        self.assertEqual(sim.stats()["inflight"], 0)

    def test_die_after_resets_responses_stream(self):
        sim = GpuSim(ttft_ms=1, token_interval_ms=5, tokens=10).start(self)
        sim.control("die_after", n=2)
        stream = SseStream(sim.url, "/v1/responses",
                           {"model": MODEL, "input": "hi", "stream": True})
        self.addCleanup(stream.close)
        self.assertEqual(stream.status, 200)
        got = []
        with self.assertRaises(ConnectionResetError):
            while True:
                ev = stream.next_event(timeout=10)
                if ev is None:
                    break
                got.append(json.loads(ev[1]))
        self.assertEqual([d["type"] for d in got],
                         RESPONSES_EVENT_ORDER + ["response.output_text.delta"] * 2)
        self.assertEqual([d["delta"] for d in got[4:]], ["gpusim:0 ", "gpusim:1 "])
        wait_until(lambda: sim.stats()["streams_aborted"] == 1, message="an aborted stream")
        self.assertEqual(sim.stats()["inflight"], 0)
        # Non-streamed: the head, then the reset instead of the body.
        with self.assertRaises((ConnectionResetError, http.client.HTTPException)):
            post_json(sim.url, "/v1/responses", {"model": MODEL, "input": "hi"})
        sim.control("error500")
        status, _, data = post_json(sim.url, "/v1/responses", {"model": MODEL, "input": "hi"})
        self.assertEqual(status, 500)
        self.assertEqual(set(data["error"]), {"message", "type", "code"})

    def test_die_after_zero_resets_after_head(self):
        sim = GpuSim(ttft_ms=1, token_interval_ms=5, tokens=10, mode="die_after:0").start(self)
        stream = SseStream(sim.url, "/v1/chat/completions", chat_body(MODEL, stream=True))
        self.addCleanup(stream.close)
        self.assertEqual(stream.status, 200)
        with self.assertRaises(ConnectionResetError):
            stream.next_event(timeout=10)
        # Non-streamed: the head, then the reset instead of the body.
        with self.assertRaises((ConnectionResetError, http.client.HTTPException)):
            post_json(sim.url, "/v1/chat/completions", chat_body(MODEL))

    def test_client_disconnect_counts_cancelled_and_frees_slot(self):
        sim = GpuSim(ttft_ms=1, token_interval_ms=50, tokens=1000, max_concurrency=1).start(self)
        for abort in (False, True):
            stream = SseStream(sim.url, "/v1/chat/completions", chat_body(MODEL, stream=True))
            stream.next_event()
            stream.next_event()
            stream.close(abort=abort)
            wait_until(lambda: sim.stats()["inflight"] == 0, message="the slot freed")
        stats = sim.stats()
        self.assertEqual(stats["streams_cancelled"], 2)
        self.assertEqual(stats["streams_completed"], 0)
        # The slot is free: a new request is served at once.
        status, _, _ = post_json(sim.url, "/v1/chat/completions", chat_body(MODEL, max_tokens=1))
        self.assertEqual(status, 200)

    def test_disconnect_while_queued_frees_the_queue_place(self):
        sim = GpuSim(ttft_ms=1, token_interval_ms=50, tokens=1000, max_concurrency=1).start(self)
        running = SseStream(sim.url, "/v1/chat/completions", chat_body(MODEL, stream=True))
        self.addCleanup(running.close)
        running.next_event()
        sock = socket.create_connection(("127.0.0.1", sim.port), timeout=5)
        body = json.dumps(chat_body(MODEL, stream=True)).encode()
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: "
                     + str(len(body)).encode() + b"\r\n\r\n" + body)
        wait_until(lambda: sim.stats()["queue_depth"] == 1, message="one queued")
        sock.close()
        wait_until(lambda: sim.stats()["queue_depth"] == 0, message="queue place given up")
        running.close()
        wait_until(lambda: sim.stats()["inflight"] == 0, message="slot freed")

    def test_pause_and_kill(self):
        sim = GpuSim().start(self)
        sim.pause()
        with self.assertRaises(socket.timeout):
            get_json(sim.url, "/health", timeout=0.5)
        sim.resume()
        self.assertEqual(sim.health()[0], 200)
        sim.kill()
        self.assertFalse(sim.alive())
        self.assertTrue(port_refuses("127.0.0.1", sim.port))

    def test_sigterm_exits_zero(self):
        sim = GpuSim(token_interval_ms=100, tokens=100).start(self)
        stream = SseStream(sim.url, "/v1/chat/completions", chat_body(MODEL, stream=True))
        self.addCleanup(stream.close)
        stream.next_event()
        self.assertEqual(sim.terminate(timeout=5), 0)


class TlsAndThreadsTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.tls = make_tls_files()

    def test_https(self):
        sim = GpuSim(tls=self.tls, ttft_ms=1, token_interval_ms=1, tokens=3).start(self)
        self.assertTrue(sim.url.startswith("https://"))
        ctx = self.tls.client_context()
        status, headers, data = post_json(sim.url, "/v1/chat/completions", chat_body(MODEL),
                                          tls_context=ctx)
        self.assertEqual(status, 200, data)
        self.assertEqual(data["choices"][0]["message"]["content"], "gpusim:0 gpusim:1 gpusim:2 ")
        events = list(stream_chat(sim.url, chat_body(MODEL), tls_context=ctx))
        self.assertEqual(tokens_of(events), ["gpusim:0 ", "gpusim:1 ", "gpusim:2 "])
        self.assertEqual(events[-1][1], "[DONE]")
        # A plain-HTTP client gets nothing useful from the TLS port.
        with self.assertRaises((ssl.SSLError, ConnectionError, http.client.HTTPException,
                                socket.timeout)):
            status, _, _ = get_json(sim.url.replace("https", "http"), "/health", timeout=2)
            if status != 200:
                raise ConnectionError(status)
        # A client that trusts another CA refuses the certificate.
        with self.assertRaises(ssl.SSLCertVerificationError):
            get_json(sim.url, "/health", tls_context=ssl.create_default_context())

    def test_https_client_disconnect(self):
        sim = GpuSim(tls=self.tls, ttft_ms=1, token_interval_ms=50, tokens=1000).start(self)
        stream = SseStream(sim.url, "/v1/chat/completions", chat_body(MODEL, stream=True),
                           tls_context=self.tls.client_context())
        stream.next_event()
        stream.close()
        wait_until(lambda: sim.stats()["streams_cancelled"] == 1, message="TLS stream cancelled")

    def test_threads_share_port_and_counters(self):
        sim = GpuSim(threads=2, ttft_ms=1, token_interval_ms=0, tokens=2).start(self)
        errors = []

        def worker():
            try:
                for _ in range(10):
                    status, _, _ = post_json(sim.url, "/v1/chat/completions", chat_body(MODEL))
                    if status != 200:
                        errors.append(status)
                    list(stream_chat(sim.url, chat_body(MODEL)))
            except Exception as e:  # noqa: BLE001
                errors.append(e)

        threads = [threading.Thread(target=worker) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        self.assertEqual(errors, [])
        # A stream counts as completed after its last write returns, which
        # can be just after the client has read that last chunk.
        wait_until(lambda: sim.stats()["streams_completed"] == 40, timeout=10,
                   message="40 completed streams")
        stats = sim.stats()
        self.assertEqual(stats["requests_total"], 80)
        self.assertEqual(stats["streams_completed"], 40)
        self.assertEqual(stats["tokens_generated"], 160)

    def test_port_file_and_log_requests(self):
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "port")
            sim = GpuSim(port_file=path, log_requests=True).start(self)
            with open(path) as f:
                self.assertEqual(int(f.read()), sim.port)
            post_json(sim.url, "/v1/chat/completions", chat_body(MODEL),
                      headers={"X-Forwarded-For": "198.51.100.9"})
            line = wait_until(lambda: [l for l in sim.stderr_text().splitlines()
                                       if '"path":"/v1/chat/completions"' in l],
                              message="a request log line")[0]
            entry = json.loads(line)
            self.assertEqual(entry["status"], 200)
            self.assertEqual(entry["client"], "198.51.100.9")
            self.assertEqual(entry["model"], MODEL)


if __name__ == "__main__":
    unittest.main()
