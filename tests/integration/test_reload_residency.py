"""A reload that tightens residency applies to every request decided after
it, including the next request on a keep-alive connection that was idle,
half-way through its head, or streaming while the reload happened
(DESIGN.md §8, "Snapshot per request"). Each request's region and the
policy hash in its access-log line are checked against the snapshot that
was current when its head was complete."""

from __future__ import annotations

import http.client
import json
import socket
import time
import unittest

from gateway_harness import Gateway, GatewayConfig
from harness import GpuSim, chat_body, wait_until

MODEL = "llama-3.1-8b"


def sim(testcase, name, **kw) -> GpuSim:
    kw.setdefault("ttft_ms", 5)
    kw.setdefault("token_interval_ms", 10)
    kw.setdefault("tokens", 8)
    return GpuSim(name=name, models=[MODEL], **kw).start(testcase)


def policy(b1, b2, allow: str, **limits) -> GatewayConfig:
    """Two regions, one backend each; every (unplaced, loopback) client
    falls under the rule "gov", which allows only `allow`."""
    cfg = GatewayConfig().region("r1").region("r2")
    cfg.backend(b1, "r1").backend(b2, "r2")
    cfg.geo = {"unknown": "gov"}
    cfg.residency = [{"name": "gov", "allow_regions": [allow]}]
    if limits:
        cfg.limits = dict(limits)
    return cfg


def post(conn: http.client.HTTPConnection, rid: str, stream: bool = False):
    body = json.dumps(chat_body(MODEL, stream=stream))
    conn.request("POST", "/v1/chat/completions", body=body,
                 headers={"Content-Type": "application/json", "x-request-id": rid})
    return conn.getresponse()


class ReloadAppliesToOpenConnectionsTest(unittest.TestCase):
    def setUp(self):
        self.b1 = sim(self, "b1", tokens=10, token_interval_ms=60)
        self.b2 = sim(self, "b2", tokens=6)
        self.gw = Gateway(policy(self.b1, self.b2, "r1"))
        self.gw.start(self)
        self.gw.wait_until_ready()
        # Both: the first request goes to b1 (r1), and under TSan its first
        # probe can land after b2's (a 503 no_compliant_backend in CI).
        self.gw.wait_backend("b1")
        self.gw.wait_backend("b2")

    def config_hash(self) -> str:
        status, _, cfg = self.gw.admin("GET", "/admin/config")
        self.assertEqual(status, 200)
        return cfg["hash"]

    def reload_to(self, cfg: GatewayConfig, n: int) -> None:
        self.gw.write_config(cfg)
        self.gw.sighup()
        wait_until(lambda: self.gw.metric("geogate_config_reloads_total", result="success") >= n,
                   10, message="reload never applied")

    def log_line(self, rid: str) -> dict:
        return self.gw.access_record(rid)

    def test_idle_half_sent_and_streaming_connections_follow_the_reload(self):
        old_hash = self.config_hash()
        idle = http.client.HTTPConnection(self.gw.host, self.gw.port, timeout=10)
        streaming = http.client.HTTPConnection(self.gw.host, self.gw.port, timeout=10)
        self.addCleanup(idle.close)
        self.addCleanup(streaming.close)

        r = post(idle, "idle-1")
        r.read()
        self.assertEqual((r.status, r.getheader("x-geogate-region")), (200, "r1"))

        # A stream that is running when the reload happens finishes on the
        # backend its (old) decision chose.
        s = post(streaming, "stream-1", stream=True)
        self.assertEqual((s.status, s.getheader("x-geogate-region")), (200, "r1"))
        first = s.read1(65536)
        self.assertTrue(first)

        # A third connection sends half of its head before the reload.
        half = socket.create_connection((self.gw.host, self.gw.port), timeout=10)
        self.addCleanup(half.close)
        body = json.dumps(chat_body(MODEL)).encode()
        half.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\n"
                     b"x-request-id: half-1\r\nContent-Type: application/json\r\n")

        self.reload_to(policy(self.b1, self.b2, "r2"), 1)
        new_hash = self.config_hash()
        self.assertNotEqual(new_hash, old_hash)
        time.sleep(1.0)

        # The stream decided before the reload is untouched.
        rest = s.read()
        self.assertIn(b"[DONE]", first + rest)

        half.sendall(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        reply = b""
        while b"\r\n\r\n" not in reply:
            chunk = half.recv(65536)
            self.assertTrue(chunk, "connection closed before the response head")
            reply += chunk
        self.assertIn(b"x-geogate-region: r2", reply.split(b"\r\n\r\n")[0].lower())

        for conn, rid in ((idle, "idle-2"), (streaming, "stream-2")):
            r = post(conn, rid)
            r.read()
            self.assertEqual((r.status, r.getheader("x-geogate-region")), (200, "r2"), rid)

        for rid, region, digest, allowed in (("idle-1", "r1", old_hash, "r1"),
                                             ("stream-1", "r1", old_hash, "r1"),
                                             ("half-1", "r2", new_hash, "r2"),
                                             ("idle-2", "r2", new_hash, "r2"),
                                             ("stream-2", "r2", new_hash, "r2")):
            line = self.log_line(rid)
            evidence = line["residency"]
            self.assertEqual((line["region"], evidence["allowed"], evidence["policy"]),
                             (region, allowed, digest), rid)
            self.assertEqual(evidence["generation"], 1 if digest == old_hash else 2, rid)

    def test_a_lowered_idle_timeout_closes_connections_idle_since_before_the_reload(self):
        conn = socket.create_connection((self.gw.host, self.gw.port), timeout=10)
        self.addCleanup(conn.close)
        body = json.dumps(chat_body(MODEL)).encode()
        conn.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\n"
                     b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)
                     + body)
        reply = b""
        while b"\r\n\r\n" not in reply:
            reply += conn.recv(65536)
        self.reload_to(policy(self.b1, self.b2, "r1", idle_timeout_ms=300), 1)
        # The connection has been idle since before the reload; under the
        # old 60 s timeout it would stay open. It must close within the new
        # one (plus a generous margin), with nothing more sent.
        conn.settimeout(5)
        start = time.monotonic()
        rest = b""
        try:
            while True:
                chunk = conn.recv(65536)
                if not chunk:
                    break
                rest += chunk
        except socket.timeout:
            self.fail("idle connection still open 5 s after idle_timeout_ms was lowered to 300")
        self.assertLess(time.monotonic() - start, 5)


if __name__ == "__main__":
    unittest.main()
