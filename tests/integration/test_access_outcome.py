"""The access log says how every request ended: `outcome` (completed,
rejected, upstream_failed, interrupted, client_closed), with `error` and
`upstream_error` when there is one. Cut streams and truncated bodies used to
be logged as a plain status 200 (issue #18, item 9)."""

from __future__ import annotations

import socket
import threading
import time
import unittest

from gateway_harness import Gateway, GatewayConfig
from harness import GpuSim, SseStream, chat_body, post_json

MODEL = "llama-3.1-8b"


class FaultyBackend:
    """A backend over loopback that answers its health probes and then
    misbehaves on every /v1 request in one way gpusim has no mode for:
    "truncate" sends a Content-Length JSON head and half the body, then
    closes; "error500" answers 500. Used only for those shapes."""

    def __init__(self, behaviour: str):
        self.behaviour = behaviour
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.v1_requests = 0
        self._stop = False
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self._stop = True
        try:
            self.sock.close()
        except OSError:
            pass

    def _accept(self) -> None:
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        buf = b""
        try:
            while True:
                while b"\r\n\r\n" not in buf:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buf += data
                head, buf = buf.split(b"\r\n\r\n", 1)
                lines = head.decode("latin-1").split("\r\n")
                method, path = lines[0].split(" ")[:2]
                length = 0
                for line in lines[1:]:
                    k, _, v = line.partition(":")
                    if k.strip().lower() == "content-length":
                        length = int(v.strip())
                while len(buf) < length:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buf += data
                buf = buf[length:]
                if path == "/health":
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                 b"Content-Length: 15\r\n\r\n{\"status\":\"ok\"}")
                    continue
                self.v1_requests += 1
                if self.behaviour == "error500":
                    body = b'{"error":{"message":"boom","type":"server_error"}}'
                    conn.sendall(b"HTTP/1.1 500 Internal Server Error\r\n"
                                 b"Content-Type: application/json\r\n"
                                 + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
                    continue
                body = (b'{"id":"x","object":"chat.completion","model":"llama-3.1-8b",'
                        b'"choices":[{"index":0,"message":{"role":"assistant","content":"'
                        + b"a" * 400 + b'"}}]}')
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                             + f"Content-Length: {len(body)}\r\n\r\n".encode()
                             + body[: len(body) // 2])
                time.sleep(0.05)
                return  # closes with the body half sent
        except OSError:
            return
        finally:
            conn.close()


class OutcomeTest(unittest.TestCase):
    """Each case ends one request one way and reads its access log line."""

    def start_gateway(self, backend_url: str, name: str = "b1") -> Gateway:
        cfg = GatewayConfig().region("r1")
        cfg.backends.append({"name": name, "region": "r1", "url": backend_url, "models": [MODEL],
                             "gpu": "L4", "provider": "p1", "tier": "on-demand",
                             "capacity": 64})
        gw = Gateway(cfg)
        gw.start(self)
        gw.wait_until_ready()
        return gw

    def start_sim(self, **kw) -> GpuSim:
        kw.setdefault("ttft_ms", 5)
        kw.setdefault("token_interval_ms", 5)
        kw.setdefault("tokens", 5)
        return GpuSim(name="b1", models=[MODEL], **kw).start(self)

    def log_line(self, gw: Gateway, request_id: str) -> dict:
        return gw.access_record(request_id)

    def test_completed_stream_and_rejected_request(self):
        sim = self.start_sim()
        gw = self.start_gateway(sim.url)
        with SseStream(gw.url, "/v1/chat/completions", chat_body(MODEL, stream=True),
                       headers={"x-request-id": "done-1"}) as s:
            self.assertEqual(s.status, 200)
            self.assertEqual([d for _, d in s.events(timeout=10)][-1], "[DONE]")
        rec = self.log_line(gw, "done-1")
        self.assertEqual((rec["status"], rec["outcome"]), (200, "completed"), rec)
        self.assertNotIn("error", rec)
        self.assertNotIn("upstream_error", rec)

        status, _, _ = post_json(gw.url, "/v1/chat/completions", chat_body("no-such-model"),
                                 headers={"x-request-id": "rejected-1"})
        self.assertEqual(status, 404)
        rec = self.log_line(gw, "rejected-1")
        self.assertEqual((rec["status"], rec["outcome"], rec["error"]),
                         (404, "rejected", "model_not_found"), rec)
        # The gateway's own answer is counted like a relayed one.
        self.assertGreater(rec["bytes_out"], 0, rec)

    def test_backend_killed_mid_stream_is_interrupted(self):
        sim = self.start_sim(token_interval_ms=100, tokens=100)
        gw = self.start_gateway(sim.url)
        with SseStream(gw.url, "/v1/chat/completions", chat_body(MODEL, stream=True),
                       headers={"x-request-id": "killed-1"}, timeout=20) as s:
            self.assertEqual(s.status, 200)
            s.next_event(timeout=10)
            s.next_event(timeout=10)
            sim.kill()
            rest = [d for _, d in s.events(timeout=10)]
        self.assertTrue(any('"stream_interrupted"' in d for d in rest), rest)
        rec = self.log_line(gw, "killed-1")
        self.assertEqual(rec["status"], 200, rec)  # the head the client got
        self.assertEqual(rec["outcome"], "interrupted", rec)
        self.assertEqual(rec["error"], "stream_interrupted", rec)
        self.assertEqual(rec["upstream_error"], "reset", rec)

    def test_truncated_body_is_interrupted(self):
        backend = FaultyBackend("truncate")
        self.addCleanup(backend.close)
        gw = self.start_gateway(backend.url)
        s = SseStream(gw.url, "/v1/chat/completions", chat_body(MODEL),
                      headers={"x-request-id": "cut-1"}, timeout=10)
        self.addCleanup(s.close)
        self.assertEqual(s.status, 200)
        body = s.read_body()
        self.assertLess(len(body), int(s.headers["content-length"]))  # cut, not complete
        rec = self.log_line(gw, "cut-1")
        self.assertEqual((rec["status"], rec["outcome"]), (200, "interrupted"), rec)
        self.assertEqual(rec["upstream_error"], "reset", rec)

    def test_client_closing_mid_stream_is_client_closed(self):
        sim = self.start_sim(token_interval_ms=100, tokens=100)
        gw = self.start_gateway(sim.url)
        s = SseStream(gw.url, "/v1/chat/completions", chat_body(MODEL, stream=True),
                      headers={"x-request-id": "gone-1"}, timeout=10)
        self.assertEqual(s.status, 200)
        s.next_event(timeout=10)
        s.close()
        rec = self.log_line(gw, "gone-1")
        self.assertEqual((rec["status"], rec["outcome"]), (200, "client_closed"), rec)
        self.assertNotIn("upstream_error", rec)

    def test_every_attempt_failing_is_upstream_failed(self):
        backend = FaultyBackend("error500")
        self.addCleanup(backend.close)
        gw = self.start_gateway(backend.url)
        status, _, body = post_json(gw.url, "/v1/chat/completions", chat_body(MODEL),
                                    headers={"x-request-id": "failed-1"})
        self.assertEqual(status, 502, body)
        rec = self.log_line(gw, "failed-1")
        self.assertEqual((rec["status"], rec["outcome"], rec["error"], rec["upstream_error"]),
                         (502, "upstream_failed", "upstream_failed", "upstream_5xx"), rec)


if __name__ == "__main__":
    unittest.main()
