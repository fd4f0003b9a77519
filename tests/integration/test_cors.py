"""CORS for browser clients, per listener (docs/configuration.md,
[[gateway.listeners]] cors_*): a preflight from an allowed origin is
answered 204 by the gateway with Access-Control-Allow-Origin/-Methods/
-Headers/-Max-Age and Vary: Origin, one from any other origin is a 403
without them; every actual response to an allowed origin (JSON, an SSE
stream, every error the gateway answers once it has a request head: 400,
401, 404, 408, 413, 429, 451, 503) carries Access-Control-Allow-Origin and
-Expose-Headers, so a page can read it. A
listener without cors_allowed_origins has no CORS at all, and a reload
changes the allowed origins in place."""

from __future__ import annotations

import hashlib
import json
import socket
import time
import unittest

from gateway_harness import Gateway, GatewayConfig
from harness import GpuSim, chat_body, free_port, post_json, request, send_raw, stream_chat, \
    wait_until, HttpStatusError, SseStream

MODEL = "llama-3.1-8b"
APP = "https://app.example.com"
OTHER = "https://other.example.com"
PREFLIGHT = {"Access-Control-Request-Method": "POST",
             "Access-Control-Request-Headers": "authorization,content-type,x-stainless-retry-count"}


# Nothing listens there: the same in every config, so a reload keeps them.
DEAD_PORTS = (free_port(), free_port())


def config(sim: GpuSim, origins: list[str]) -> GatewayConfig:
    cfg = GatewayConfig()
    cfg.listeners[0]["cors_allowed_origins"] = origins
    cfg.listeners[0]["cors_max_age_s"] = 300
    cfg.listeners.append({"address": "127.0.0.1:0"})  # the same gateway without CORS
    cfg.region("r1").region("r2", jurisdiction="US")
    cfg.backend(sim, "r1")
    # Served only outside the allowed set (451), and only by a dead backend (503).
    cfg.backends.append({"name": "us-only", "region": "r2", "url": f"http://127.0.0.1:{DEAD_PORTS[0]}",
                         "models": ["us-model"], "gpu": "L4", "provider": "p1",
                         "tier": "on-demand", "capacity": 8})
    cfg.backends.append({"name": "dead", "region": "r1", "url": f"http://127.0.0.1:{DEAD_PORTS[1]}",
                         "models": ["dead-model"], "gpu": "L4", "provider": "p1",
                         "tier": "on-demand", "capacity": 8})
    cfg.models = [{"name": MODEL}, {"name": "us-model"}, {"name": "dead-model"}]
    cfg.residency = [{"name": "anywhere", "allow_regions": ["r1"]}]
    return cfg


class CorsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.sim = GpuSim(name="b1", models=[MODEL], ttft_ms=2, token_interval_ms=1, tokens=4,
                         record_requests=100)
        cls.sim.start()
        try:
            cls.gw = Gateway(config(cls.sim, [APP]))
            cls.gw.start()
            cls.gw.wait_until_ready()
            cls.gw.wait_backend("b1")
        except BaseException:
            cls.sim.stop()
            raise
        plain = [p for p, tls in cls.gw.listeners if not tls]
        cls.cors_url = f"http://127.0.0.1:{plain[0]}"
        cls.plain_url = f"http://127.0.0.1:{plain[1]}"

    @classmethod
    def tearDownClass(cls):
        cls.gw.stop()
        cls.sim.stop()

    def preflight(self, url: str, origin: str, path: str = "/v1/chat/completions"):
        return request(url, "OPTIONS", path, headers={"Origin": origin, **PREFLIGHT})

    def assert_no_cors(self, headers):
        for name in ("Access-Control-Allow-Origin", "Access-Control-Allow-Methods",
                     "Access-Control-Allow-Headers", "Access-Control-Expose-Headers"):
            self.assertIsNone(headers.get(name), name)

    def assert_readable(self, headers, origin: str = APP):
        self.assertEqual(headers.get("Access-Control-Allow-Origin"), origin)
        expose = [h.strip() for h in headers.get("Access-Control-Expose-Headers", "").split(",")]
        self.assertIn("x-request-id", expose)
        self.assertIn("retry-after", expose)
        self.assertIn("Origin", headers.get_all("Vary") or [])

    # ---------------------------------------------------------- preflight --
    def test_preflight_from_an_allowed_origin_is_answered_by_the_gateway(self):
        for path in ("/v1/chat/completions", "/v1/responses", "/v1/models", "/v1/embeddings"):
            status, headers, body = self.preflight(self.cors_url, APP, path)
            self.assertEqual(status, 204, (path, body))
            self.assertEqual(headers.get("Access-Control-Allow-Origin"), APP)
            methods = {m.strip() for m in headers["Access-Control-Allow-Methods"].split(",")}
            self.assertTrue({"GET", "POST"} <= methods, methods)
            allowed = {h.strip() for h in headers["Access-Control-Allow-Headers"].split(",")}
            for h in ("authorization", "content-type", "x-stainless-retry-count", "x-request-id"):
                self.assertIn(h, allowed)
            self.assertEqual(headers.get("Access-Control-Max-Age"), "300")
            self.assertIn("Origin", headers.get_all("Vary"))
            self.assertEqual(body, "")
            self.assertIsNone(headers.get("Access-Control-Allow-Credentials"))
        # Never forwarded.
        self.assertFalse([r for r in self.sim.received() if r.get("method") == "OPTIONS"])
        log = wait_until(lambda: [r for r in self.gw.access_log() if r.get("method") == "OPTIONS"
                                  and r.get("status") == 204], 5)
        self.assertTrue(log)

    def test_preflight_from_another_origin_is_403_without_cors_fields(self):
        for origin in (OTHER, "https://app.example.com.evil.test", "http://app.example.com",
                       "null"):
            status, headers, body = self.preflight(self.cors_url, origin)
            self.assertEqual(status, 403, origin)
            self.assertEqual(body["error"]["code"], "origin_not_allowed")
            self.assert_no_cors(headers)

    def test_options_without_the_preflight_fields_is_no_preflight(self):
        status, headers, _ = request(self.cors_url, "OPTIONS", "/v1/chat/completions",
                                     headers={"Origin": APP})
        self.assertEqual(status, 404)

    # ----------------------------------------------------- actual requests --
    def test_a_completion_from_an_allowed_origin_is_readable(self):
        status, headers, body = post_json(self.cors_url, "/v1/chat/completions", chat_body(MODEL),
                                          headers={"Origin": APP})
        self.assertEqual(status, 200, body)
        self.assert_readable(headers)
        self.assertEqual(headers.get_all("Access-Control-Allow-Origin"), [APP])

    def test_a_stream_from_an_allowed_origin_is_readable(self):
        s = SseStream(self.cors_url, "/v1/chat/completions", {**chat_body(MODEL), "stream": True},
                      headers={"Origin": APP})
        try:
            self.assertEqual(s.status, 200)
            self.assertEqual(s.headers.get("access-control-allow-origin"), APP)
            self.assertIn("x-request-id", s.headers.get("access-control-expose-headers", ""))
            events = [data for _, data in s.events()]
        finally:
            s.close()
        self.assertEqual(events[-1], "[DONE]")

    def test_models_list_from_an_allowed_origin_is_readable(self):
        status, headers, _ = request(self.cors_url, "GET", "/v1/models", headers={"Origin": APP})
        self.assertEqual(status, 200)
        self.assert_readable(headers)

    def test_the_gateways_errors_are_readable_too(self):
        cases = [("us-model", 451, "residency_denied"),
                 ("dead-model", 503, "no_compliant_backend"),
                 ("no-such-model", 404, "model_not_found")]
        for model, want_status, want_code in cases:
            status, headers, body = post_json(self.cors_url, "/v1/chat/completions",
                                              chat_body(model), headers={"Origin": APP})
            self.assertEqual((status, body["error"]["code"]), (want_status, want_code))
            self.assert_readable(headers)
        with self.assertRaises(HttpStatusError) as e:
            list(stream_chat(self.cors_url, chat_body("us-model"), headers={"Origin": APP}))
        self.assertEqual(e.exception.status, 451)
        self.assertEqual(e.exception.headers.get("access-control-allow-origin"), APP)

    def test_another_origin_gets_the_answer_but_no_cors_fields(self):
        status, headers, _ = post_json(self.cors_url, "/v1/chat/completions", chat_body(MODEL),
                                       headers={"Origin": OTHER})
        self.assertEqual(status, 200)  # CORS is the browser's to enforce
        self.assert_no_cors(headers)
        self.assertIn("Origin", headers.get_all("Vary"))

    def test_a_listener_without_cors_has_none(self):
        status, headers, _ = self.preflight(self.plain_url, APP)
        self.assertEqual(status, 404)
        self.assert_no_cors(headers)
        status, headers, _ = post_json(self.plain_url, "/v1/chat/completions", chat_body(MODEL),
                                       headers={"Origin": APP})
        self.assertEqual(status, 200)
        self.assert_no_cors(headers)
        self.assertIsNone(headers.get("Vary"))


def parse_reply(raw: bytes) -> tuple[int, dict, dict]:
    """(status, lower-case headers, JSON body) of the first response in `raw`."""
    head, sep, body = raw.partition(b"\r\n\r\n")
    if not sep:
        raise AssertionError(f"no response head in {raw!r}")
    lines = head.decode("latin-1").split("\r\n")
    headers: dict[str, list[str]] = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers.setdefault(k.strip().lower(), []).append(v.strip())
    if "content-length" in headers:
        body = body[: int(headers["content-length"][0])]
    return int(lines[0].split(" ")[1]), headers, json.loads(body) if body else {}


OPEN_KEY = "sk-cors-open"
LIMITED_KEY = "sk-cors-limited"


class CorsErrorsTest(unittest.TestCase):
    """Every error a browser can get, from an allowed origin, is readable:
    the gateway's own answers before routing (400, 401, 404, 408, 413,
    429) as much as after it (451, 503). The gateway has no 405: an
    unknown method and path is OpenAI's 404. Answers given before a
    request head exists (431, a header timeout) cannot know the Origin."""

    @classmethod
    def setUpClass(cls):
        cls.sim = GpuSim(name="b1", models=[MODEL], ttft_ms=2, token_interval_ms=1, tokens=2)
        cls.sim.start()
        try:
            cfg = config(cls.sim, [APP])
            cfg.limits = {"max_body_bytes": 4096, "body_timeout_ms": 300}
            sha = lambda k: hashlib.sha256(k.encode()).hexdigest()  # noqa: E731
            cfg.tenants = [{"name": "open", "api_key_sha256": [sha(OPEN_KEY)]},
                           {"name": "limited", "api_key_sha256": [sha(LIMITED_KEY)],
                            "requests_per_second": 0.001, "burst": 1}]
            cls.gw = Gateway(cfg)
            cls.gw.start()
            cls.gw.wait_until_ready()
            cls.gw.wait_backend("b1")
        except BaseException:
            cls.sim.stop()
            raise
        cls.port = cls.gw.listeners[0][0]
        cls.url = f"http://127.0.0.1:{cls.port}"

    @classmethod
    def tearDownClass(cls):
        cls.gw.stop()
        cls.sim.stop()

    def raw(self, method: str, path: str, body: bytes = b"", key: str = OPEN_KEY,
            length: int | None = None, chunked: bool = False) -> bytes:
        """A request from the allowed origin; `length` announces another
        Content-Length than the body's; `chunked` sends the body in 1 kB chunks."""
        if chunked:
            framing = "Transfer-Encoding: chunked"
            body = b"".join(b"%x\r\n" % len(body[i:i + 1024]) + body[i:i + 1024] + b"\r\n"
                            for i in range(0, len(body), 1024)) + b"0\r\n\r\n"
        else:
            framing = f"Content-Length: {len(body) if length is None else length}"
        head = (f"{method} {path} HTTP/1.1\r\nHost: x\r\nOrigin: {APP}\r\n"
                f"Authorization: Bearer {key}\r\nContent-Type: application/json\r\n"
                f"{framing}\r\nConnection: close\r\n\r\n")
        return head.encode() + body

    def assert_readable_error(self, reply: bytes, status: int, code: str):
        got, headers, body = parse_reply(reply)
        self.assertEqual((got, body.get("error", {}).get("code")), (status, code), reply[:300])
        self.assertEqual(headers.get("access-control-allow-origin"), [APP], (status, headers))
        expose = [h.strip() for h in headers.get("access-control-expose-headers", [""])[0].split(",")]
        self.assertIn("x-request-id", expose, (status, headers))
        self.assertIn("retry-after", expose, (status, headers))
        self.assertIn("Origin", headers.get("vary", []), (status, headers))

    def test_errors_before_routing_are_readable(self):
        chat = json.dumps(chat_body(MODEL)).encode()
        cases = [
            ("bad JSON", self.raw("POST", "/v1/chat/completions", b'{"model":'), 400,
             "invalid_json"),
            ("no model", self.raw("POST", "/v1/chat/completions", b'{"messages":[]}'), 400,
             "missing_model"),
            ("bad key", self.raw("POST", "/v1/chat/completions", chat, key="sk-wrong"), 401,
             "invalid_api_key"),
            ("unknown path", self.raw("GET", "/nothing-here"), 404, "not_found"),
            # What would be a 405 elsewhere: a GET of a POST-only route.
            ("wrong method", self.raw("GET", "/v1/chat/completions"), 404, "not_found"),
            ("unknown model", self.raw("POST", "/v1/chat/completions",
                                       json.dumps(chat_body("no-such-model")).encode()),
             404, "model_not_found"),
            # Over max_body_bytes while it arrives (chunked: no length up front).
            ("body over the limit", self.raw("POST", "/v1/chat/completions",
                                             json.dumps(chat_body(MODEL, content="x" * 5000))
                                             .encode(), chunked=True), 413, "body_too_large"),
        ]
        for name, raw, status, code in cases:
            with self.subTest(name):
                self.assert_readable_error(send_raw(self.url, raw), status, code)

    def test_an_oversized_content_length_413_is_readable(self):
        # Refused from the head alone (Content-Length over max_body_bytes),
        # before any body byte is read.
        reply = send_raw(self.url, self.raw("POST", "/v1/chat/completions", length=1_000_000))
        self.assert_readable_error(reply, 413, "body_too_large")

    def test_a_rate_limited_429_is_readable(self):
        chat = json.dumps(chat_body(MODEL)).encode()
        statuses = []
        for _ in range(3):
            reply = send_raw(self.url, self.raw("POST", "/v1/chat/completions", chat,
                                                key=LIMITED_KEY))
            statuses.append(parse_reply(reply)[0])
            if statuses[-1] == 429:
                self.assert_readable_error(reply, 429, "rate_limited")
                break
        self.assertIn(429, statuses)

    def test_a_stalled_body_408_is_readable(self):
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=5)
        try:
            sock.sendall(self.raw("POST", "/v1/chat/completions", b'{"model":', length=200))
            reply = b""
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                try:
                    chunk = sock.recv(65536)
                except socket.timeout:
                    break
                if not chunk:
                    break
                reply += chunk
        finally:
            sock.close()
        self.assert_readable_error(reply, 408, "body_timeout")

    def test_errors_after_routing_are_readable(self):
        for model, status, code in (("us-model", 451, "residency_denied"),
                                    ("dead-model", 503, "no_compliant_backend")):
            with self.subTest(model):
                raw = self.raw("POST", "/v1/chat/completions",
                               json.dumps(chat_body(model)).encode())
                self.assert_readable_error(send_raw(self.url, raw), status, code)


class CorsReloadTest(unittest.TestCase):
    def test_a_reload_changes_the_allowed_origins_and_a_bad_origin_keeps_them(self):
        sim = GpuSim(name="b1", models=[MODEL], ttft_ms=2, token_interval_ms=1, tokens=2)
        sim.start()
        gw = Gateway(config(sim, [APP]))
        try:
            gw.start()
            gw.wait_until_ready()
            url = f"http://127.0.0.1:{gw.listeners[0][0]}"

            def preflight(origin):
                return request(url, "OPTIONS", "/v1/chat/completions",
                               headers={"Origin": origin, **PREFLIGHT})[0]

            self.assertEqual((preflight(APP), preflight(OTHER)), (204, 403))
            gw.write_config(config(sim, [OTHER]))
            gw.sighup()
            wait_until(lambda: gw.metric("geogate_config_reloads_total", result="success") >= 1, 10)
            self.assertEqual((preflight(APP), preflight(OTHER)), (403, 204))

            # A spelling no browser sends is refused; the running policy stays.
            gw.write_config(config(sim, ["https://App.Example.com/"]))
            gw.sighup()
            wait_until(lambda: gw.metric("geogate_config_reloads_total", result="failure") >= 1, 10)
            self.assertEqual((preflight(APP), preflight(OTHER)), (403, 204))
            self.assertIn("browsers send the origin alone: 'https://app.example.com'",
                          gw.stderr_text())

            # CORS off again: no preflight answer at all.
            gw.write_config(config(sim, []))
            gw.sighup()
            wait_until(lambda: gw.metric("geogate_config_reloads_total", result="success") >= 2, 10)
            self.assertEqual((preflight(APP), preflight(OTHER)), (404, 404))
        finally:
            gw.stop()
            sim.stop()


if __name__ == "__main__":
    unittest.main()
