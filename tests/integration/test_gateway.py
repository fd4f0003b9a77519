"""The gateway core over loopback with real processes: streaming through
plain and TLS listeners and to an https backend, non-streaming, errors for
bad input (the gateway keeps serving), client disconnects and drain."""

from __future__ import annotations

import gzip
import http.client
import json
import signal
import socket
import socketserver
import threading
import time
import unittest
import urllib.parse
from typing import Callable, Optional

from gateway_harness import Gateway, GatewayConfig, SharedGatewayTestCase
from harness import (GpuSim, InProcessServer, SseStream, chat_body, make_tls_files, post_json, request,
                     send_raw, stream_chat, wait_until)

MODEL = "llama-3.1-8b"


def tokens_of(events: list[str]) -> list[str]:
    out = []
    for data in events:
        if data == "[DONE]":
            continue
        obj = json.loads(data)
        for choice in obj.get("choices", []):
            content = choice.get("delta", {}).get("content")
            if content:
                out.append(content)
    return out


class GatewayTestCase(unittest.TestCase):
    def start_sim(self, name="b1", **kw) -> GpuSim:
        kw.setdefault("ttft_ms", 5)
        kw.setdefault("token_interval_ms", 5)
        kw.setdefault("tokens", 8)
        sim = GpuSim(name=name, models=[MODEL], **kw)
        sim.start(self)
        return sim

    def start_gateway(self, cfg: GatewayConfig, wait_ready=True) -> Gateway:
        gw = Gateway(cfg)
        gw.start(self)
        if wait_ready:
            gw.wait_until_ready()
        return gw


class StreamingTest(GatewayTestCase):
    def test_every_token_arrives_in_order_and_before_the_stream_ends(self):
        sim = self.start_sim(tokens=12, token_interval_ms=40)
        gw = self.start_gateway(GatewayConfig().region("r1").backend(sim, "r1"))
        with SseStream(gw.url, "/v1/chat/completions", chat_body(MODEL, stream=True)) as s:
            self.assertEqual(s.status, 200)
            self.assertEqual(s.headers.get("x-geogate-backend"), "b1")
            self.assertEqual(s.headers.get("x-geogate-region"), "r1")
            self.assertEqual(s.headers.get("x-geogate-edge"), "test")
            self.assertTrue(s.headers.get("x-request-id"))
            first = s.next_event(timeout=5)
            self.assertIsNotNone(first)
            # The first token reached us while the backend was still generating:
            # nothing was buffered until the end.
            self.assertEqual(sim.stats()["streams_completed"], 0)
            events = [first[1]] + [data for _, data in s.events(timeout=10)]
        self.assertEqual(tokens_of(events), [f"b1:{i} " for i in range(12)])
        self.assertEqual(events[-1], "[DONE]")
        # The gateway asked for usage upstream for its accounting, and the
        # client (which did not ask) never sees the usage chunk.
        self.assertFalse(any('"usage"' in e for e in events))

    def test_usage_chunk_reaches_a_client_that_asked_for_it(self):
        sim = self.start_sim()
        gw = self.start_gateway(GatewayConfig().region("r1").backend(sim, "r1"))
        body = chat_body(MODEL, stream=True, stream_options={"include_usage": True})
        events = [d for _, d in stream_chat(gw.url, body)]
        usage = [json.loads(e) for e in events if '"usage"' in e]
        self.assertEqual(len(usage), 1)
        self.assertEqual(usage[0]["usage"]["completion_tokens"], 8)

    def test_tls_listener_streams(self):
        tls = make_tls_files()
        self.addCleanup(tls.cleanup)
        sim = self.start_sim()
        gw = self.start_gateway(GatewayConfig(tls=tls).region("r1").backend(sim, "r1"))
        events = [d for _, d in stream_chat(gw.tls_url, chat_body(MODEL, stream=True),
                                            tls_context=tls.client_context())]
        self.assertEqual(tokens_of(events), [f"b1:{i} " for i in range(8)])
        self.assertEqual(gw.metric("geogate_tls_handshakes_total", result="success"), 1)

    def test_https_backend_is_verified_and_streams(self):
        tls = make_tls_files()
        self.addCleanup(tls.cleanup)
        sim = self.start_sim(tls=tls)
        cfg = GatewayConfig().region("r1").backend(sim, "r1", ca_file=tls.ca_cert)
        cfg.backends[0]["url"] = f"https://localhost:{sim.port}"
        gw = self.start_gateway(cfg)
        events = [d for _, d in stream_chat(gw.url, chat_body(MODEL, stream=True))]
        self.assertEqual(tokens_of(events), [f"b1:{i} " for i in range(8)])

    def test_https_backend_with_an_untrusted_certificate_is_never_used(self):
        tls = make_tls_files()
        self.addCleanup(tls.cleanup)
        sim = self.start_sim(tls=tls)
        cfg = GatewayConfig().region("r1").backend(sim, "r1")  # system trust store only
        cfg.backends[0]["url"] = f"https://localhost:{sim.port}"
        gw = self.start_gateway(cfg, wait_ready=False)
        wait_until(lambda: gw.backend("b1")["state"] == "unhealthy", 10)
        self.assertEqual(gw.backend("b1")["reason"], "tls_error")
        status, _, body = post_json(gw.url, "/v1/chat/completions", chat_body(MODEL))
        self.assertEqual(status, 503)
        self.assertEqual(body["error"]["code"], "no_compliant_backend")


class RequestsTest(SharedGatewayTestCase, GatewayTestCase):
    SIM = {"ttft_ms": 2, "token_interval_ms": 1, "tokens": 4, "record_requests": 16}

    @classmethod
    def configure(cls, sim: GpuSim) -> GatewayConfig:
        cfg = GatewayConfig().region("r1").backend(sim, "r1")
        cfg.limits = {"max_header_bytes": 4096, "max_body_bytes": 2048, "header_timeout_ms": 500}
        return cfg

    def assert_still_serving(self):
        status, _, body = post_json(self.gw.url, "/v1/chat/completions", chat_body(MODEL))
        self.assertEqual(status, 200, body)

    def assert_error(self, raw: bytes, status: int, code: str):
        reply = send_raw(self.gw.url, raw)
        head, _, body = reply.partition(b"\r\n\r\n")
        self.assertTrue(head.startswith(f"HTTP/1.1 {status} ".encode()), reply[:200])
        self.assertEqual(json.loads(body)["error"]["code"], code)
        self.assert_still_serving()

    def test_non_streaming_completion(self):
        status, headers, body = post_json(self.gw.url, "/v1/chat/completions", chat_body(MODEL),
                                          headers={"x-request-id": "my-id-1"})
        self.assertEqual(status, 200)
        self.assertEqual(body["choices"][0]["message"]["content"], "b1:0 b1:1 b1:2 b1:3 ")
        self.assertEqual(body["usage"]["completion_tokens"], 4)
        self.assertEqual(headers["x-request-id"], "my-id-1")
        self.assertEqual(headers["x-geogate-backend"], "b1")

    def test_completions_and_embeddings_are_routed_by_model(self):
        status, _, body = post_json(self.gw.url, "/v1/completions", {"model": MODEL, "prompt": "x"})
        self.assertEqual(status, 200)
        self.assertEqual(body["object"], "text_completion")
        status, _, body = post_json(self.gw.url, "/v1/embeddings", {"model": MODEL, "input": "x"})
        self.assertEqual(status, 200)
        self.assertEqual(body["object"], "list")

    def test_models_list(self):
        status, _, body = request(self.gw.url, "GET", "/v1/models")
        self.assertEqual(status, 200)
        self.assertEqual([m["id"] for m in body["data"]], [MODEL])

    def test_unknown_model_unknown_path_missing_model(self):
        status, _, body = post_json(self.gw.url, "/v1/chat/completions", chat_body("no-such-model"))
        self.assertEqual((status, body["error"]["code"]), (404, "model_not_found"))
        self.assertEqual(body["error"]["type"], "invalid_request_error")
        status, _, body = request(self.gw.url, "GET", "/admin/backends")
        self.assertEqual((status, body["error"]["code"]), (404, "not_found"))
        status, _, body = post_json(self.gw.url, "/v1/chat/completions", {"messages": []})
        self.assertEqual((status, body["error"]["code"]), (400, "missing_model"))

    def test_keep_alive_serves_many_requests_on_one_connection(self):
        conn = http.client.HTTPConnection("127.0.0.1", self.gw.port, timeout=10)
        for _ in range(5):
            conn.request("POST", "/v1/chat/completions", json.dumps(chat_body(MODEL)),
                         {"Content-Type": "application/json"})
            r = conn.getresponse()
            self.assertEqual(r.status, 200)
            r.read()
        conn.close()
        self.assertGreaterEqual(self.gw.metric("geogate_requests_total", backend="b1"), 5)

    def test_malformed_request_line(self):
        self.assert_error(b"BLAH BLAH\r\n\r\n", 400, "bad_request")

    def test_absolute_form_target_is_not_proxied(self):
        body = json.dumps(chat_body(MODEL)).encode()
        raw = (b"POST http://evil.example/v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
               b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        self.assert_error(raw, 400, "bad_request")

    def test_oversized_headers(self):
        raw = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 8000 + b"\r\n\r\n"
        self.assert_error(raw, 431, "headers_too_large")

    def test_content_length_with_transfer_encoding(self):
        raw = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n"
               b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
        self.assert_error(raw, 400, "bad_request")

    def test_duplicate_differing_content_length(self):
        raw = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n"
               b"Content-Length: 3\r\n\r\n{}}")
        self.assert_error(raw, 400, "bad_request")

    def test_transfer_encoding_not_ending_in_chunked(self):
        raw = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n")
        self.assert_error(raw, 400, "bad_request")

    def test_invalid_json(self):
        raw = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 9\r\n"
               b"Connection: close\r\n\r\n{\"model\":")
        self.assert_error(raw, 400, "invalid_json")

    def test_encoded_body(self):
        body = gzip.compress(json.dumps(chat_body(MODEL)).encode())
        raw = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Encoding: gzip\r\n"
               b"Content-Length: " + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" +
               body)
        self.assert_error(raw, 415, "unsupported_content_encoding")

    def test_body_over_the_limit(self):
        body = json.dumps(chat_body(MODEL, content="x" * 4000)).encode()
        raw = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " +
               str(len(body)).encode() + b"\r\n\r\n" + body)
        self.assert_error(raw, 413, "body_too_large")

    def test_chunked_body_over_the_limit(self):
        chunk = b"x" * 1500
        raw = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" +
               (b"%x\r\n" % len(chunk) + chunk + b"\r\n") * 2 + b"0\r\n\r\n")
        self.assert_error(raw, 413, "body_too_large")

    def test_expect_100_continue(self):
        body = json.dumps(chat_body(MODEL)).encode()
        sock = socket.create_connection(("127.0.0.1", self.gw.port), timeout=5)
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
                     b"Content-Length: " + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n")
        self.assertTrue(sock.recv(64).startswith(b"HTTP/1.1 100 Continue"))
        sock.sendall(body)
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
        sock.close()
        self.assertTrue(reply.startswith(b"HTTP/1.1 200 "), reply[:100])

    def test_headers_not_finished_in_time(self):
        sock = socket.create_connection(("127.0.0.1", self.gw.port), timeout=5)
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n")
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
        sock.close()
        self.assertTrue(reply.startswith(b"HTTP/1.1 408 "), reply[:100])
        self.assertIn(b"header_timeout", reply)
        self.assert_still_serving()

    def test_client_key_is_never_forwarded(self):
        # A backend without api_key_env gets no Authorization at all: what
        # gpusim received, header by header.
        self.sim.reset()
        status, _, _ = post_json(self.gw.url, "/v1/chat/completions", chat_body(MODEL),
                                 headers={"Authorization": "Bearer client-secret",
                                          "X-Forwarded-For": "203.0.113.7"})
        self.assertEqual(status, 200)
        heads = [h for h in self.sim.received() if h["target"] == "/v1/chat/completions"]
        self.assertEqual(len(heads), 1, heads)
        headers = [(n.lower(), v) for n, v in heads[0]["headers"]]
        self.assertNotIn("authorization", [n for n, _ in headers], headers)
        self.assertNotIn("client-secret", json.dumps(heads[0]))
        self.assertIn(("x-forwarded-for", "203.0.113.7, 127.0.0.1"), headers)

    def test_backend_is_asked_for_unencoded_answers(self):
        # The gateway reads every answer (usage, SSE events): whatever the
        # client accepts (the SDKs send gzip), the backend gets identity.
        self.sim.reset()
        status, _, _ = post_json(self.gw.url, "/v1/chat/completions", chat_body(MODEL),
                                 headers={"Accept-Encoding": "gzip, deflate, br"})
        self.assertEqual(status, 200)
        heads = [h for h in self.sim.received() if h["target"] == "/v1/chat/completions"]
        self.assertEqual(len(heads), 1, heads)
        codings = [v for n, v in heads[0]["headers"] if n.lower() == "accept-encoding"]
        self.assertEqual(codings, ["identity"], heads[0])

    def test_backend_key_replaces_the_client_key(self):
        sim = self.start_sim(record_requests=8)
        cfg = GatewayConfig().region("r1").backend(sim, "r1", api_key_env="B1_KEY")
        gw = Gateway(cfg, env={"B1_KEY": "sk-backend-own"})
        gw.start(self)
        gw.wait_until_ready()
        for stream in (False, True):
            body = chat_body(MODEL, stream=stream)
            h = {"Authorization": "Bearer client-secret"}
            if stream:
                self.assertEqual([d for _, d in stream_chat(gw.url, body, headers=h)][-1],
                                 "[DONE]")
            else:
                self.assertEqual(post_json(gw.url, "/v1/chat/completions", body, headers=h)[0],
                                 200)
        heads = [h for h in sim.received() if h["target"] == "/v1/chat/completions"]
        self.assertEqual(len(heads), 2, heads)
        for head in heads:
            auth = [v for n, v in head["headers"] if n.lower() == "authorization"]
            self.assertEqual(auth, ["Bearer sk-backend-own"], head)
            self.assertNotIn("client-secret", json.dumps(head))


class ModelRoutesTest(SharedGatewayTestCase):
    """models.retrieve (GET /v1/models/{id}) and HEAD wherever GET is."""
    SLASHED = "meta-llama/Llama-3.1-8B"
    MODELS = [MODEL, SLASHED]

    @classmethod
    def configure(cls, sim: GpuSim) -> GatewayConfig:
        return GatewayConfig().region("r1").backend(sim, "r1", models=list(cls.MODELS))

    def raw(self, url: str, method: str, path: str) -> tuple[int, dict, bytes]:
        t = urllib.parse.urlsplit(url)
        conn = http.client.HTTPConnection(t.hostname, t.port, timeout=10)
        try:
            conn.request(method, path)
            resp = conn.getresponse()
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
        finally:
            conn.close()

    def test_a_model_is_retrieved_by_its_id(self):
        status, _, body = request(self.gw.url, "GET", f"/v1/models/{MODEL}")
        self.assertEqual(status, 200, body)
        self.assertEqual(body, {"id": MODEL, "object": "model", "created": 0, "owned_by": "geogate"})

    def test_an_id_with_a_slash_arrives_encoded_and_is_found(self):
        # What the OpenAI SDK sends for models.retrieve("meta-llama/Llama-3.1-8B").
        status, _, body = request(self.gw.url, "GET", "/v1/models/meta-llama%2FLlama-3.1-8B")
        self.assertEqual((status, body.get("id")), (200, self.SLASHED), body)

    def test_an_unknown_model_is_404_in_openai_shape(self):
        status, _, body = request(self.gw.url, "GET", "/v1/models/no-such-model")
        self.assertEqual(status, 404)
        self.assertEqual(body["error"]["code"], "model_not_found")
        self.assertEqual(body["error"]["type"], "invalid_request_error")
        # Not a retrieve target: the usual path rules (a raw '/', dot segments).
        status, _, body = request(self.gw.url, "GET", "/v1/models/a/b")
        self.assertEqual(status, 404)
        status, _, body = request(self.gw.url, "GET", "/v1/models/%2e%2e")
        self.assertEqual(status, 400)

    def test_head_is_answered_wherever_get_is_without_a_body(self):
        for url, path in ((self.gw.url, "/v1/models"), (self.gw.url, f"/v1/models/{MODEL}"),
                          (self.gw.admin_url, "/healthz"), (self.gw.admin_url, "/readyz"),
                          (self.gw.admin_url, "/admin/backends")):
            with self.subTest(path=path):
                get_status, get_headers, get_body = self.raw(url, "GET", path)
                status, headers, body = self.raw(url, "HEAD", path)
                self.assertEqual((status, body), (get_status, b""))
                self.assertEqual(int(headers["content-length"]), len(get_body))
                self.assertEqual(headers["content-type"], get_headers["content-type"])
        status, headers, body = self.raw(self.gw.admin_url, "HEAD", "/metrics")
        self.assertEqual((status, body), (200, b""))
        self.assertGreater(int(headers["content-length"]), 0)
        # HEAD where nothing answers GET: the 404 without its body.
        status, headers, body = self.raw(self.gw.url, "HEAD", "/v1/nothing-here")
        self.assertEqual((status, body), (404, b""))
        self.assertGreater(int(headers["content-length"]), 0)
        # The connection is still good after a HEAD answer.
        status, _, body = post_json(self.gw.url, "/v1/chat/completions", chat_body(MODEL))
        self.assertEqual(status, 200, body)


class FailureTest(GatewayTestCase):
    def test_client_disconnect_cancels_the_upstream_stream(self):
        sim = self.start_sim(tokens=200, token_interval_ms=20)
        gw = self.start_gateway(GatewayConfig().region("r1").backend(sim, "r1"))
        s = SseStream(gw.url, "/v1/chat/completions", chat_body(MODEL, stream=True))
        self.assertIsNotNone(s.next_event(timeout=5))
        self.assertIsNotNone(s.next_event(timeout=5))
        s.close(abort=True)
        wait_until(lambda: sim.stats()["streams_cancelled"] == 1, 10,
                   message="the backend kept generating for a client that left")
        self.assertEqual(sim.stats()["streams_completed"], 0)
        wait_until(lambda: gw.backend("b1")["inflight"] == 0, 5)
        self.assertGreaterEqual(gw.metric("geogate_client_disconnects_total"), 1)

    def test_client_disconnect_before_the_first_token_cancels_too(self):
        sim = self.start_sim(ttft_ms=3000, tokens=4)
        gw = self.start_gateway(GatewayConfig().region("r1").backend(sim, "r1"))
        sock = socket.create_connection(("127.0.0.1", gw.port), timeout=5)
        body = json.dumps(chat_body(MODEL, stream=True)).encode()
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                     str(len(body)).encode() + b"\r\n\r\n" + body)
        wait_until(lambda: gw.backend("b1")["inflight"] == 1, 5)
        sock.close()
        wait_until(lambda: gw.backend("b1")["inflight"] == 0, 5,
                   message="the request outlived its client")
        wait_until(lambda: sim.stats()["streams_cancelled"] == 1, 10)

    def test_backend_500_is_502_after_the_attempts(self):
        sim = self.start_sim(mode="error500")
        cfg = GatewayConfig().region("r1").backend(sim, "r1")
        cfg.health["path"] = "/metrics"  # keep the backend "healthy" so requests reach it
        gw = self.start_gateway(cfg)
        status, _, body = post_json(gw.url, "/v1/chat/completions", chat_body(MODEL))
        self.assertEqual((status, body["error"]["code"]), (502, "upstream_failed"))
        self.assertEqual(body["error"]["type"], "upstream_error")

    def test_stream_that_breaks_midway_ends_with_an_error_event(self):
        sim = self.start_sim(tokens=20, token_interval_ms=10)
        gw = self.start_gateway(GatewayConfig().region("r1").backend(sim, "r1"))
        sim.control(mode="die_after", n=3)
        events = []
        with SseStream(gw.url, "/v1/chat/completions", chat_body(MODEL, stream=True)) as s:
            for _, data in s.events(timeout=10):
                events.append(data)
        self.assertEqual(tokens_of(events[:-1]), ["b1:0 ", "b1:1 ", "b1:2 "])
        last = json.loads(events[-1])
        self.assertEqual(last["error"]["code"], "stream_interrupted")
        self.assertNotIn("[DONE]", events)


class ScriptedBackend(InProcessServer):
    """A backend whose answers to completions are raw bytes a test scripts:
    heads that arrive in pieces, malformed or cut short, and keep-alive
    connections it closes without answering. Health probes get a 200."""

    backend_name = "scripted"

    def __init__(self, answer: Callable[[int], Optional[list[bytes]]]):
        # answer(n): the pieces (sent 50 ms apart) for the n-th completion on
        # a connection (1-based), or None to close the connection instead; an
        # empty last piece closes it after the others.
        self.answer = answer
        self.completions = 0
        self.completion_connections = 0  # connections that carried a completion
        self.lock = threading.Lock()
        backend = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self):
                rfile = self.request.makefile("rb")
                n = 0
                while True:
                    head = b""
                    while not head.endswith(b"\r\n\r\n"):
                        line = rfile.readline()
                        if not line:
                            return
                        head += line
                    length = 0
                    for line in head.split(b"\r\n"):
                        if line.lower().startswith(b"content-length:"):
                            length = int(line.split(b":", 1)[1])
                    rfile.read(length)
                    if not head.startswith(b"POST "):
                        self.request.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
                        continue
                    n += 1
                    with backend.lock:
                        backend.completions += 1
                        backend.completion_connections += n == 1
                    pieces = backend.answer(n)
                    if pieces is None:
                        return  # closes the connection without a byte
                    for i, piece in enumerate(pieces):
                        if i:
                            time.sleep(0.05)
                        if not piece:
                            return
                        self.request.sendall(piece)

        class Server(socketserver.ThreadingTCPServer):
            allow_reuse_address = True
            daemon_threads = True
            request_queue_size = 256  # bursts of connects (UpstreamPoolTest)

        self.serve(Server(("127.0.0.1", 0), Handler))


def completion_answer(content: str = "hi") -> bytes:
    body = json.dumps({"id": "c1", "object": "chat.completion", "model": MODEL,
                       "choices": [{"index": 0, "finish_reason": "stop",
                                    "message": {"role": "assistant", "content": content}}],
                       "usage": {"prompt_tokens": 3, "completion_tokens": 1,
                                 "total_tokens": 4}}).encode()
    return (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)


class UpstreamFramingTest(GatewayTestCase):
    """The backend's response head, read straight from the socket: however it
    arrives, a well-formed one is served, a bad one is a clean 502, and a
    pooled connection the backend closed is retried on a fresh one."""

    def gateway_for(self, backend: ScriptedBackend) -> Gateway:
        cfg = GatewayConfig().region("r1").backend(backend, "r1")
        return self.start_gateway(cfg)

    def assert_answers(self, gw: Gateway, content: str, times: int) -> None:
        """`times` completions in a row, each a 200 carrying `content`."""
        for _ in range(times):
            status, _, body = post_json(gw.url, "/v1/chat/completions", chat_body(MODEL))
            self.assertEqual(status, 200, body)
            self.assertEqual(body["choices"][0]["message"]["content"], content)

    def test_head_in_pieces(self):
        answer = completion_answer("pieces")
        cut = answer.index(b"Content-Length")
        backend = ScriptedBackend(lambda n: [answer[:7], answer[7:cut], answer[cut:]]).start(self)
        gw = self.gateway_for(backend)
        status, _, body = post_json(gw.url, "/v1/chat/completions", chat_body(MODEL))
        self.assertEqual(status, 200, body)
        self.assertEqual(body["choices"][0]["message"]["content"], "pieces")

    def test_malformed_or_cut_head_is_502_and_the_gateway_keeps_serving(self):
        answers = {"malformed": [b"HTTP/1.1 two hundred\r\n\r\n"],
                   "cut": [b"HTTP/1.1 200 OK\r\nContent-Le", b""],  # then it closes
                   "ok": [completion_answer("after")]}
        mode = ["malformed"]
        backend = ScriptedBackend(lambda n: answers[mode[0]]).start(self)
        gw = self.gateway_for(backend)
        for bad in ("malformed", "cut"):
            mode[0] = bad
            status, _, body = post_json(gw.url, "/v1/chat/completions", chat_body(MODEL))
            self.assertEqual((status, body["error"]["code"]), (502, "upstream_failed"), body)
        mode[0] = "ok"
        wait_until(lambda: gw.backend("scripted")["healthy"], 10)  # passive ejection lapses
        status, _, body = post_json(gw.url, "/v1/chat/completions", chat_body(MODEL))
        self.assertEqual(status, 200, body)
        self.assertEqual(body["choices"][0]["message"]["content"], "after")

    def test_pooled_connection_closed_by_the_backend_is_retried_on_a_new_one(self):
        # Each connection answers one completion; the next on it is closed
        # unanswered, as by a backend whose keep-alive timeout just passed.
        backend = ScriptedBackend(lambda n: [completion_answer(f"c{n}")] if n == 1 else None)
        backend.start(self)
        gw = self.gateway_for(backend)
        self.assert_answers(gw, "c1", times=3)
        # At least one of the later two went to a pooled connection first.
        self.assertGreaterEqual(backend.completions, 4)

    def test_bytes_after_a_response_are_not_the_next_answer(self):
        # The first answer on each connection comes with a second, unasked
        # one in the same write. The gateway must not keep that connection
        # and serve the stray answer to the next request.
        backend = ScriptedBackend(
            lambda n: [completion_answer("first") + completion_answer("stray")] if n == 1
            else [completion_answer(f"later{n}")]).start(self)
        gw = self.gateway_for(backend)
        self.assert_answers(gw, "first", times=3)
        self.assertEqual(backend.completions, 3)


class UpstreamPoolTest(GatewayTestCase):
    def test_more_requests_in_flight_than_64_reuse_their_backend_connections(self):
        # By default a worker keeps as many idle connections to a backend as
        # the backend's capacity lets it have in flight: waves of 120
        # concurrent requests to a backend of capacity 120 open 120
        # connections once, not 56 more per wave (the old default kept 64
        # and closed the rest, so every request over 64 in flight paid a
        # connect, a close and a TIME_WAIT).
        answer = completion_answer("pooled")
        cut = answer.index(b"\r\n\r\n")
        backend = ScriptedBackend(lambda n: [answer[:cut], answer[cut:]]).start(self)  # 50 ms apart
        in_flight, waves = 120, 3
        cfg = GatewayConfig(workers=1).region("r1").backend(backend, "r1", capacity=in_flight)
        gw = self.start_gateway(cfg)
        for _ in range(waves):
            start = threading.Barrier(in_flight)
            results: list = []

            def one():
                start.wait(timeout=10)
                results.append(post_json(gw.url, "/v1/chat/completions", chat_body(MODEL),
                                         timeout=30)[0])

            threads = [threading.Thread(target=one) for _ in range(in_flight)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=60)
            self.assertEqual(results, [200] * in_flight)
        self.assertEqual(backend.completions, in_flight * waves)
        # Each wave's requests overlap (the backend holds each for 50 ms), so
        # the first opens up to 120; the later two find them all pooled.
        self.assertLessEqual(backend.completion_connections, in_flight)


class ParkedConnectionTest(GatewayTestCase):
    """A keep-alive connection idle for 100 ms parks (it gives up its
    coroutine frames until its client sends again): what it serves next, its
    deadlines and a drain must not notice."""

    def setUp(self):
        sim = self.start_sim(ttft_ms=1, token_interval_ms=1, tokens=3)
        cfg = GatewayConfig(workers=1).region("r1").backend(sim, "r1")
        cfg.limits = {"idle_timeout_ms": 2000}
        cfg.upstream = {"drain_delay_ms": 0}
        self.gw = self.start_gateway(cfg)

    def chat(self, conn: http.client.HTTPConnection) -> None:
        conn.request("POST", "/v1/chat/completions", json.dumps(chat_body(MODEL)),
                     {"Content-Type": "application/json"})
        r = conn.getresponse()
        self.assertEqual(r.status, 200)
        self.assertEqual(json.loads(r.read())["usage"]["completion_tokens"], 3)

    def parked(self) -> float:
        return self.gw.metric("geogate_connections_total", event="parked") or 0

    def test_a_parked_connection_serves_its_next_requests(self):
        conn = http.client.HTTPConnection("127.0.0.1", self.gw.port, timeout=10)
        self.chat(conn)
        before = self.parked()
        for i in range(3):
            time.sleep(0.35)  # parked after 100-200 ms
            self.chat(conn)
            self.assertGreaterEqual(self.parked(), before + i + 1)
        conn.close()

    def test_a_head_that_arrives_in_pieces_after_parking_is_served(self):
        with socket.create_connection(("127.0.0.1", self.gw.port), timeout=10) as s:
            body = json.dumps(chat_body(MODEL)).encode()
            head = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\n"
                    f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
                    ).encode()
            time.sleep(0.35)
            wait_until(lambda: self.parked() >= 1, 2, message="the idle connection did not park")
            for piece in (head[:7], head[7:40], head[40:], body):
                s.sendall(piece)
                time.sleep(0.05)
            reply = b""
            while b'"completion_tokens":3' not in reply:
                chunk = s.recv(65536)
                if not chunk:
                    break
                reply += chunk
            self.assertTrue(reply.startswith(b"HTTP/1.1 200 "), reply[:200])

    def test_the_idle_deadline_still_closes_a_parked_connection(self):
        conn = http.client.HTTPConnection("127.0.0.1", self.gw.port, timeout=10)
        self.chat(conn)
        start = time.monotonic()
        wait_until(lambda: self.parked() >= 1, 2, message="the idle connection did not park")
        # Closed by the gateway at idle_timeout_ms (2 s), not by the 10 s above.
        self.assertEqual(conn.sock.recv(1), b"")
        self.assertGreater(time.monotonic() - start, 1.5)
        conn.close()

    def test_park_after_0_never_parks(self):
        sim = self.start_sim(name="b2", ttft_ms=1, token_interval_ms=1, tokens=3)
        cfg = GatewayConfig(workers=1).region("r1").backend(sim, "r1")
        cfg.limits = {"park_after_ms": 0}
        gw = self.start_gateway(cfg)
        conn = http.client.HTTPConnection("127.0.0.1", gw.port, timeout=10)
        self.chat(conn)
        time.sleep(0.5)
        self.chat(conn)
        conn.close()
        self.assertEqual(gw.metric("geogate_connections_total", event="parked"), 0)

    def test_a_drain_closes_parked_connections_and_exits(self):
        socks = [socket.create_connection(("127.0.0.1", self.gw.port), timeout=10)
                 for _ in range(5)]
        try:
            wait_until(lambda: self.parked() >= 5, 2, message="the idle connections did not park")
            self.gw.signal(signal.SIGTERM)
            for s in socks:
                self.assertEqual(s.recv(1), b"")
            self.assertEqual(self.gw.popen.wait(timeout=10), 0)
        finally:
            for s in socks:
                s.close()


class DrainTest(GatewayTestCase):
    def test_sigterm_lets_an_in_flight_stream_finish_then_exits_zero(self):
        sim = self.start_sim(tokens=25, token_interval_ms=40)
        cfg = GatewayConfig().region("r1").backend(sim, "r1")
        cfg.upstream = {"drain_delay_ms": 300, "drain_timeout_ms": 10000}
        gw = self.start_gateway(cfg)
        with SseStream(gw.url, "/v1/chat/completions", chat_body(MODEL, stream=True)) as s:
            self.assertIsNotNone(s.next_event(timeout=5))
            gw.signal(signal.SIGTERM)
            wait_until(lambda: not gw.ready(), 2, message="/readyz stayed 200 while draining")
            events = [d for _, d in s.events(timeout=10)]
        self.assertEqual(events[-1], "[DONE]")
        self.assertEqual(len(tokens_of(events)), 24)
        self.assertEqual(gw.popen.wait(timeout=10), 0)


class OutputTest(GatewayTestCase):
    def test_every_stdout_line_is_json_and_the_process_log_is_on_stderr(self):
        # With the default access log ("-") stdout is for access-log records
        # only, so a log shipper can parse every line of it. Process messages
        # (listeners, admin, reloads, drain) are JSON lines on stderr.
        tls = make_tls_files()
        sim = self.start_sim()
        gw = self.start_gateway(GatewayConfig(tls=tls).region("r1").backend(sim, "r1"))
        gw.wait_backend("b1")
        self.assertEqual(post_json(gw.url, "/v1/chat/completions", chat_body(MODEL))[0], 200)
        events = [d for _, d in stream_chat(gw.tls_url, chat_body(MODEL))]
        self.assertEqual(events[-1], "[DONE]")
        self.assertEqual(post_json(gw.url, "/v1/chat/completions", chat_body("no-such"))[0], 404)
        gw.sighup()
        wait_until(lambda: any("reload" in r.get("component", "") for r in gw.log_records()), 10,
                   message="no reload line on stderr")
        self.assertEqual(gw.terminate(), 0)

        records = []
        for line in gw.lines:
            try:
                records.append(json.loads(line))
            except ValueError:
                self.fail(f"stdout line is not JSON: {line!r}")
        self.assertTrue(all(isinstance(r, dict) for r in records), records)
        self.assertEqual(len(records), 3, records)
        self.assertTrue(all(r.get("request_id") for r in records), records)
        # Each worker writes its own batches: lines come in no global order.
        self.assertEqual(sorted(r["status"] for r in records), [200, 200, 404])

        for line in gw.err_lines:
            try:
                json.loads(line)
            except ValueError:
                self.fail(f"stderr line is not JSON: {line!r}")
        listeners = [r for r in gw.log_records() if r.get("component") == "listener"]
        self.assertEqual(sorted((r["port"], r["tls"]) for r in listeners),
                         sorted((p, t) for p, t in gw.listeners))
        self.assertEqual(sorted(r["tls"] for r in listeners), [False, True])
        self.assertTrue(all(r["address"] == f"127.0.0.1:{r['port']}" for r in listeners))
        admin = [r for r in gw.log_records() if r.get("component") == "admin"]
        self.assertEqual([(r["address"], r["port"]) for r in admin],
                         [(f"127.0.0.1:{gw.admin_port}", gw.admin_port)])


if __name__ == "__main__":
    unittest.main()
