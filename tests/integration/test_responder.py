"""Integration tests of geogate-responder, bench/compare's fast upstream.

The benchmarks only mean something if the responder sends what a real
backend sends: these check that its burst answer is a valid chat stream
ending in [DONE], byte for byte the stream gpusim sends (but for the id and
the creation time), and that keep-alive works. No timing is asserted.
"""

import http.client
import json
import re
import socket
import unittest

from harness import GpuSim, Process, bin_path

RESPONDER_BIN = bin_path("bench", "responder", "geogate-responder")
TOKENS = 64
BODY = json.dumps({"model": "burst", "stream": True, "max_tokens": TOKENS,
                   "stream_options": {"include_usage": True},
                   "messages": [{"role": "user", "content": "Count to sixty-four."}]})


def responder(case, *flags):
    return Process([RESPONDER_BIN, "--listen", "127.0.0.1:0", "--name", "burst",
                    "--model", "burst", "--tokens", str(TOKENS), *flags],
                   name="responder").start(case)


def post(conn, body=BODY):
    conn.request("POST", "/v1/chat/completions", body=body,
                 headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    return r, r.read().decode()


def events_of(body):
    """The `data:` payloads of an SSE body; every event must be one data line."""
    assert body.endswith("\n\n"), body[-80:]
    events = []
    for block in body[:-2].split("\n\n"):
        assert block.startswith("data: ") and "\n" not in block, block
        events.append(block[len("data: "):])
    return events


def check_chat_stream(case, body, name="burst"):
    """A valid chat stream: token chunks, the finish chunk, the usage chunk, [DONE]."""
    events = events_of(body)
    case.assertEqual(events[-1], "[DONE]")
    chunks = [json.loads(e) for e in events[:-1]]
    for c in chunks:
        case.assertEqual(c["object"], "chat.completion.chunk")
        case.assertEqual(c["model"], "burst")
    tokens = [c["choices"][0]["delta"].get("content") for c in chunks if c["choices"]]
    case.assertEqual(tokens[:TOKENS], [f"{name}:{i} " for i in range(TOKENS)])
    case.assertEqual(chunks[0]["choices"][0]["delta"]["role"], "assistant")
    finish = chunks[TOKENS]["choices"][0]
    case.assertEqual((finish["delta"], finish["finish_reason"]), ({}, "stop"))
    case.assertEqual(chunks[TOKENS + 1]["choices"], [])
    case.assertEqual(chunks[TOKENS + 1]["usage"]["completion_tokens"], TOKENS)
    case.assertEqual(len(chunks), TOKENS + 2)


class ResponderTest(unittest.TestCase):
    def test_stream_is_a_chat_stream_ending_in_done(self):
        r = responder(self, "--answer", "stream")
        conn = http.client.HTTPConnection("127.0.0.1", r.port, timeout=10)
        for _ in range(2):  # keep-alive: the same connection twice
            res, body = post(conn)
            self.assertEqual(res.status, 200)
            self.assertEqual(res.getheader("Content-Type"), "text/event-stream")
            self.assertEqual(res.getheader("Transfer-Encoding"), "chunked")
            check_chat_stream(self, body)
        # Anything but a POST (a health probe) gets the small JSON answer.
        conn.request("GET", "/health")
        res = conn.getresponse()
        answer = json.loads(res.read())
        self.assertEqual(res.status, 200)
        self.assertEqual(answer["object"], "chat.completion")
        conn.close()

    def test_stream_has_the_bytes_gpusim_sends(self):
        for shape in ("vllm", "openai"):
            with self.subTest(chunk_shape=shape):
                self.check_same_bytes_as_gpusim(shape)

    def check_same_bytes_as_gpusim(self, shape):
        r = responder(self, "--answer", "stream", "--chunk-shape", shape)
        sim = GpuSim(name="burst", models=["burst"], ttft_ms=0, token_interval_ms=0,
                     rtt_ms=0, chunk_shape=shape).start(self)
        bodies = []
        for port in (r.port, sim.port):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            res, body = post(conn)
            conn.close()
            self.assertEqual(res.status, 200)
            bodies.append(re.sub(r'"id":"[^"]*","object":"chat.completion.chunk","created":\d+',
                                 '"id":"ID","object":"chat.completion.chunk","created":0', body))
        check_chat_stream(self, bodies[1])
        self.assertEqual(bodies[0], bodies[1])
        # OpenAI's shape: "usage":null in every chunk before the usage chunk;
        # vLLM's: no usage member there.
        chunks = [json.loads(e) for e in events_of(bodies[1])[:-2]]
        self.assertEqual(len(chunks), TOKENS + 1)
        if shape == "openai":
            self.assertTrue(all("usage" in c and c["usage"] is None for c in chunks))
        else:
            self.assertTrue(all("usage" not in c for c in chunks))

    def test_events_answer_is_the_same_stream_one_write_per_event(self):
        whole = responder(self, "--answer", "stream")
        paced = responder(self, "--answer", "events", "--step-ms", "1")
        bodies = []
        for port in (whole.port, paced.port):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            res, body = post(conn)
            conn.close()
            self.assertEqual(res.status, 200)
            bodies.append(body)
        check_chat_stream(self, bodies[1])
        self.assertEqual(bodies[0], bodies[1])

    def test_json_answer_and_connection_close(self):
        r = Process([RESPONDER_BIN, "--listen", "127.0.0.1:0", "--answer", "json",
                     "--tokens", "16", "--name", "fast"], name="responder").start(self)
        conn = http.client.HTTPConnection("127.0.0.1", r.port, timeout=10)
        conn.request("POST", "/v1/chat/completions", body="{}",
                     headers={"Connection": "close"})
        res = conn.getresponse()
        answer = json.loads(res.read())
        self.assertEqual(res.getheader("Connection"), "close")
        self.assertEqual(answer["choices"][0]["message"]["content"],
                         "".join(f"fast:{i} " for i in range(16)))
        self.assertEqual(answer["usage"]["completion_tokens"], 16)
        conn.close()

    def test_request_bodies_are_skipped_and_the_method_and_version_read(self):
        """The responder parses requests without keeping them: a sized and a
        chunked body are both consumed, so the requests pipelined behind
        them are answered; a GET gets the JSON answer, HTTP/1.0 a 505."""
        r = responder(self, "--answer", "stream")
        sized = ("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                 f"Content-Length: {len(BODY)}\r\n\r\n{BODY}")
        chunked = ("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                   "Transfer-Encoding: chunked\r\n\r\n"
                   f"{len(BODY):x}\r\n{BODY}\r\n0\r\n\r\n")
        get = "GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        with socket.create_connection(("127.0.0.1", r.port), timeout=10) as s:
            s.sendall((sized + chunked + get).encode())
            got = b""
            while chunk := s.recv(65536):
                got += chunk
        answers = got.decode().split("HTTP/1.1 ")[1:]
        self.assertEqual(len(answers), 3, got[:300])
        for a in answers[:2]:
            head, body = a.split("\r\n\r\n", 1)
            self.assertIn("text/event-stream", head)
            self.assertIn("data: [DONE]", body)
        head, body = answers[2].split("\r\n\r\n", 1)
        self.assertIn("application/json", head)
        self.assertIn("Connection: close", head)
        self.assertEqual(json.loads(body)["object"], "chat.completion")

        with socket.create_connection(("127.0.0.1", r.port), timeout=10) as s:
            s.sendall(b"GET / HTTP/1.0\r\n\r\n")
            got = b""
            while chunk := s.recv(65536):
                got += chunk
        self.assertTrue(got.startswith(b"HTTP/1.1 505 "), got[:100])


if __name__ == "__main__":
    unittest.main()
