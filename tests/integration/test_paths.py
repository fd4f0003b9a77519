"""Request paths and backend base URLs (DESIGN.md §8): what the backend gets.

A hostile path (dot segments out of /v1/, encoded '/', '.' or NUL, a
fragment) is refused with 400 and never reaches a backend; dot segments inside
/v1/ are removed and only the normalised path is forwarded, with the query as
sent. A backend URL is an OpenAI base URL: a final /v1 is the API's own, so
`https://h/v1` + `/v1/chat/completions` is `https://h/v1/chat/completions`,
and the health and load-report paths are resolved against the URL without
that /v1 (the backend's root)."""

from __future__ import annotations

import http.server
import json
import threading
import unittest

from gateway_harness import Gateway, GatewayConfig, SharedGatewayTestCase
from harness import GpuSim, InProcessServer, chat_body, post_json, request, wait_until

MODEL = "llama-3.1-8b"

# POSTed with a valid chat body; each must be a 400 that no backend sees.
HOSTILE_PATHS = [
    "/v1/../admin/backends",
    "/v1/../admin/reload",
    "/v1/%2e%2e/metrics",
    "/v1/%2E%2E/metrics",
    "/v1/.%2e/metrics",
    "/v1/../../../etc/passwd",
    "/v1/chat/../../metrics",
    "/v1/..",
    "/v1/chat%2fcompletions",
    "/v1/chat%2Fcompletions",
    "/v1/chat/completions%00",
    "/v1/chat/completions%00.json",
    "/v1/chat/completions#fragment",
    "/v1/../admin#x",
]

# Dot segments (and an encoded unreserved letter) that stay inside /v1/.
BENIGN_PATHS = [
    "/v1/./chat/completions",
    "/v1/x/../chat/completions",
    "/v1/a/b/../../chat/./completions",
    "/v1/%63hat/completions",
]


class RecordingBackend(InProcessServer):
    """An OpenAI-compatible backend that serves only under `root`:
    GET root/health, GET root/metrics (vLLM gauges) and
    POST root/v1/chat/completions. Any other target is a 404. Every request
    line's target is recorded exactly as received."""

    def __init__(self, root: str = "", name: str = "rec"):
        self.root = root
        self.backend_name = name
        self.targets: list[tuple[str, str]] = []
        self.lock = threading.Lock()
        backend = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def reply(self, status: int, body: bytes, ctype: str = "application/json"):
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def serve(self):
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                with backend.lock:
                    backend.targets.append((self.command, self.path))
                root = backend.root
                if self.command == "GET" and self.path == root + "/health":
                    self.reply(200, b'{"status":"ok"}')
                elif self.command == "GET" and self.path == root + "/metrics":
                    self.reply(200, b"vllm:num_requests_running 1\nvllm:num_requests_waiting 0\n",
                               "text/plain; version=0.0.4")
                elif (self.command == "POST"
                      and self.path.split("?")[0] == root + "/v1/chat/completions"):
                    body = {"id": "c1", "object": "chat.completion", "model": MODEL,
                            "choices": [{"index": 0, "finish_reason": "stop",
                                         "message": {"role": "assistant",
                                                     "content": backend.backend_name}}],
                            "usage": {"prompt_tokens": 3, "completion_tokens": 1,
                                      "total_tokens": 4}}
                    self.reply(200, json.dumps(body).encode())
                else:
                    self.reply(404, b'{"error":{"message":"no such path","type":"x",'
                                    b'"code":"not_found"}}')

            do_GET = serve
            do_POST = serve

        self.serve(http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler))

    def received(self, method: str | None = None) -> list[str]:
        with self.lock:
            return [t for m, t in self.targets if method is None or m == method]

    def clear(self) -> None:
        with self.lock:
            self.targets.clear()


def assert_bad_request(case: unittest.TestCase, status: int, body, what: str) -> None:
    case.assertEqual(status, 400, f"{what}: {body}")
    case.assertIsInstance(body, dict, what)
    case.assertEqual(body["error"]["code"], "bad_request", what)
    case.assertEqual(body["error"]["type"], "invalid_request_error", what)
    case.assertTrue(body["error"]["message"], what)


class HostilePathTest(SharedGatewayTestCase):
    """Through the gateway to gpusim, which counts every path it receives."""

    def api_paths_seen(self) -> dict[str, int]:
        """What gpusim received other than the gateway's health probes."""
        by_path = self.sim.stats()["requests_by_path"]
        return {p: n for p, n in by_path.items() if p != "/health"}

    def test_hostile_paths_are_400_and_never_reach_the_backend(self):
        self.sim.reset()
        for path in HOSTILE_PATHS:
            with self.subTest(path=path):
                status, _, body = post_json(self.gw.url, path, chat_body(MODEL))
                assert_bad_request(self, status, body, path)
        for path in ("/v1/../admin/backends", "/v1/%2e%2e/models", "/v1/models#x"):
            with self.subTest(method="GET", path=path):
                status, _, body = request(self.gw.url, "GET", path)
                assert_bad_request(self, status, body, path)
        self.assertEqual(self.api_paths_seen(), {})
        # The gateway keeps serving on the same footing.
        status, _, body = post_json(self.gw.url, "/v1/chat/completions", chat_body(MODEL))
        self.assertEqual(status, 200, body)

    def test_dot_segments_inside_v1_are_removed_before_forwarding(self):
        self.sim.reset()
        for path in BENIGN_PATHS:
            with self.subTest(path=path):
                status, _, body = post_json(self.gw.url, path, chat_body(MODEL))
                self.assertEqual(status, 200, body)
        self.assertEqual(self.api_paths_seen(), {"/v1/chat/completions": len(BENIGN_PATHS)})
        # GET /v1/models is answered by the gateway on the normalised path too.
        status, _, body = request(self.gw.url, "GET", "/v1/x/../models")
        self.assertEqual(status, 200, body)
        self.assertEqual([m["id"] for m in body["data"]], [MODEL])

    def test_the_access_log_records_the_normalised_path(self):
        status, _, _ = post_json(self.gw.url, "/v1/q/../chat/completions",
                                 chat_body(MODEL), headers={"X-Request-Id": "paths-normal-1"})
        self.assertEqual(status, 200)
        status, _, _ = post_json(self.gw.url, "/v1/../admin/backends", chat_body(MODEL),
                                 headers={"X-Request-Id": "paths-refused-1"})
        self.assertEqual(status, 400)

        def lines():
            by_id = {r.get("request_id"): r for r in self.gw.access_log()}
            return by_id if {"paths-normal-1", "paths-refused-1"} <= by_id.keys() else None

        by_id = wait_until(lines, 5, message="access log lines never appeared")
        self.assertEqual(by_id["paths-normal-1"]["path"], "/v1/chat/completions")
        self.assertEqual(by_id["paths-refused-1"]["path"], "/v1/../admin/backends")
        self.assertEqual(by_id["paths-refused-1"]["status"], 400)


class ForwardedTargetTest(unittest.TestCase):
    """The exact request target a backend receives."""

    def setUp(self):
        self.backend = RecordingBackend().start(self)
        cfg = GatewayConfig().region("r1").backend(self.backend, "r1", url=self.backend.url)
        self.gw = Gateway(cfg)
        self.gw.start(self)
        self.gw.wait_until_ready()
        self.backend.clear()

    def test_normalised_path_is_forwarded_with_the_query_as_sent(self):
        cases = {
            "/v1/chat/completions": "/v1/chat/completions",
            "/v1/chat/completions?api-version=1&x=%2e%2E": "/v1/chat/completions?api-version=1&x=%2e%2E",
            "/v1/x/../chat/completions?a=/../b&c=%00": "/v1/chat/completions?a=/../b&c=%00",
            "/v1/./chat/%63ompletions?": "/v1/chat/completions?",
        }
        for sent, expected in cases.items():
            with self.subTest(sent=sent):
                self.backend.clear()
                status, _, body = post_json(self.gw.url, sent, chat_body(MODEL))
                self.assertEqual(status, 200, body)
                self.assertEqual(self.backend.received("POST"), [expected])


class BackendBaseUrlTest(unittest.TestCase):
    """Four backends that each serve only under their own root; each URL
    names that root the way an OpenAI SDK base URL would (or does not)."""

    # url path in the config -> the backend's root
    CASES = {
        "": "",
        "/v1": "",
        "/v1/": "",
        "/openai/v1": "/openai",
        "/proxy": "/proxy",
    }

    def setUp(self):
        cfg = GatewayConfig().region("r1")
        cfg.health["load_report"] = "/metrics"
        self.backends = {}
        for i, (url_path, root) in enumerate(self.CASES.items()):
            b = RecordingBackend(root=root, name=f"b{i}").start(self)
            self.backends[url_path] = b
            cfg.backend(b, "r1", models=[f"m{i}"], name=f"b{i}", url=b.url + url_path)
        self.gw = Gateway(cfg)
        self.gw.start(self)

    def test_requests_probes_and_load_reports_land_under_the_backends_root(self):
        for i, (url_path, b) in enumerate(self.backends.items()):
            with self.subTest(url=b.url + url_path):
                # Healthy only if the probe found root/health.
                self.gw.wait_backend(f"b{i}", healthy=True, timeout=10)
                status, _, body = post_json(self.gw.url, "/v1/chat/completions",
                                            chat_body(f"m{i}"))
                self.assertEqual(status, 200, body)
                self.assertEqual(body["choices"][0]["message"]["content"], f"b{i}")
                root = b.root
                self.assertEqual(b.received("POST"), [root + "/v1/chat/completions"])
                wait_until(lambda: root + "/metrics" in b.received("GET"), 5,
                           message=f"{b.url + url_path}: load report never fetched")
                self.assertEqual(set(b.received("GET")), {root + "/health", root + "/metrics"})


if __name__ == "__main__":
    unittest.main()
