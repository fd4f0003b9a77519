"""HTTP strictness at the edge (issue #18, item 9): Host as RFC 9112 3.2
requires it, no silently ignored second copy of a header or JSON member the
gateway decides on, and the admin port answering malformed requests with
the same 4xx as the data plane instead of closing without a word."""

from __future__ import annotations

import json
import unittest

from gateway_harness import Gateway, GatewayConfig, SharedGatewayTestCase
from harness import GpuSim, chat_body, send_raw

MODEL = "llama-3.1-8b"


def parse_response(raw: bytes) -> tuple[int, dict, bytes]:
    """(status, lower-case headers, body) of the first response in `raw`."""
    if b"\r\n\r\n" not in raw:
        raise AssertionError(f"no response head in {raw!r}")
    head, body = raw.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    if "content-length" in headers:
        body = body[: int(headers["content-length"])]
    return int(lines[0].split(" ")[1]), headers, body


def error_code(body: bytes) -> str:
    return json.loads(body)["error"]["code"]


def chat_request(headers: list[tuple[str, str]], body: bytes | None = None,
                 version: str = "HTTP/1.1") -> bytes:
    data = body if body is not None else json.dumps(chat_body(MODEL)).encode()
    head = f"POST /v1/chat/completions {version}\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in headers)
    head += f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
    return head.encode() + data


class StrictnessBase(SharedGatewayTestCase):
    SIM = {"ttft_ms": 1, "token_interval_ms": 1, "tokens": 3}

    @classmethod
    def configure(cls, sim: GpuSim) -> GatewayConfig:
        cfg = GatewayConfig().region("r1", jurisdiction="EU").region("r2", jurisdiction="US")
        cfg.backend(sim, "r1")
        cfg.limits = {"max_body_bytes": 65536}  # the admin port's body limit too
        return cfg

    def send(self, data: bytes) -> tuple[int, dict, bytes]:
        return parse_response(send_raw(self.gw.url, data))

    def v1_requests(self) -> int:
        return self.sim.stats()["requests_by_path"].get("/v1/chat/completions", 0)


class HostHeaderTest(StrictnessBase):
    def test_http11_without_host_is_400(self):
        status, _, body = self.send(chat_request([]))
        self.assertEqual((status, error_code(body)), (400, "bad_request"), body)

    def test_two_host_headers_are_400(self):
        for version in ("HTTP/1.1", "HTTP/1.0"):
            with self.subTest(version=version):
                status, _, body = self.send(chat_request(
                    [("Host", "edge.example.com"), ("Host", "evil.example.com")], version=version))
                self.assertEqual((status, error_code(body)), (400, "bad_request"), body)

    def test_host_that_is_not_an_authority_is_400(self):
        status, _, body = self.send(chat_request([("Host", "user@edge.example.com")]))
        self.assertEqual((status, error_code(body)), (400, "bad_request"), body)

    def test_http10_without_host_and_http11_with_one_are_served(self):
        status, _, body = self.send(chat_request([], version="HTTP/1.0"))
        self.assertEqual(status, 200, body)
        status, _, body = self.send(chat_request([("Host", "edge.example.com:8080")]))
        self.assertEqual(status, 200, body)


class DuplicateHeaderTest(StrictnessBase):
    def test_two_residency_headers_are_400(self):
        before = self.v1_requests()
        status, _, body = self.send(chat_request(
            [("Host", "h"), ("x-geogate-residency", "US"), ("X-Geogate-Residency", "EU")]))
        self.assertEqual((status, error_code(body)), (400, "bad_residency_header"), body)
        self.assertEqual(self.v1_requests(), before)  # nothing reached a backend

    def test_two_authorization_headers_are_400(self):
        status, _, body = self.send(chat_request(
            [("Host", "h"), ("Authorization", "Bearer a"), ("Authorization", "Bearer b")]))
        self.assertEqual((status, error_code(body)), (400, "bad_request"), body)


class DuplicateModelTest(StrictnessBase):
    def test_a_body_with_two_models_is_invalid_json(self):
        before = self.v1_requests()
        for body in (b'{"model":"llama-3.1-8b","model":"other","messages":[]}',
                     b'{"model":"llama-3.1-8b","mod\\u0065l":"other","messages":[]}'):
            with self.subTest(body=body):
                status, _, answer = self.send(chat_request([("Host", "h")], body=body))
                self.assertEqual((status, error_code(answer)), (400, "invalid_json"), answer)
                self.assertIn(b"model", answer)
        self.assertEqual(self.v1_requests(), before)


# Request shapes both ports must refuse, and with which status.
def _oversized_head(path: str) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: h\r\nX-Big: {'a' * 20000}\r\n\r\n".encode()


BAD_SHAPES = {
    "headers over the limit": (431, _oversized_head),
    "body over the limit": (413, lambda path: (
        f"POST {path} HTTP/1.1\r\nHost: h\r\nContent-Length: 10000000\r\n\r\n").encode()),
    "Content-Length with Transfer-Encoding": (400, lambda path: (
        f"POST {path} HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n"
        "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n").encode()),
    "Transfer-Encoding not ending in chunked": (400, lambda path: (
        f"POST {path} HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\n\r\nxxxx").encode()),
    "two different Content-Lengths": (400, lambda path: (
        f"POST {path} HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n"
        "Content-Length: 3\r\n\r\nabc").encode()),
    "garbage request line": (400, lambda path: b"HELLO\x01 WORLD\r\n\r\n"),
}


class AdminBadRequestTest(StrictnessBase):
    def test_admin_answers_like_the_data_plane(self):
        for name, (expected, build) in BAD_SHAPES.items():
            with self.subTest(shape=name):
                data_plane = self.send(build("/v1/chat/completions"))
                admin = parse_response(send_raw(self.gw.admin_url, build("/admin/reload")))
                self.assertEqual(data_plane[0], expected, data_plane)
                self.assertEqual(admin[0], expected, admin)
                self.assertEqual(error_code(admin[2]), error_code(data_plane[2]), admin)
                self.assertEqual(admin[1].get("connection"), "close", admin)

    def test_admin_still_serves_after_bad_requests(self):
        for _, build in BAD_SHAPES.values():
            send_raw(self.gw.admin_url, build("/metrics"))
        status, _, _ = self.gw.admin("GET", "/healthz")
        self.assertEqual(status, 200)


if __name__ == "__main__":
    unittest.main()
