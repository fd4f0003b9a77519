"""Client geography and data residency over loopback with real processes:
a geo database generated from tests/fixtures/geo, EU and US GPU backends, and
clients placed by X-Forwarded-For, by their own source address, or by the
PROXY protocol. The promise under test: a governed request never reaches a
backend outside its allowed regions, even when that backend is faster, and
even when every allowed backend is down (then 503, never another
jurisdiction)."""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import socket
import struct
import threading
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from gateway_harness import Gateway, GatewayConfig
from harness import BIN_DIR, GpuSim, SseStream, chat_body, make_tls_files, post_json, request, wait_until

MODEL = "llama-3.1-8b"
BIG = "llama-3.1-70b"
CITY_DB = os.path.join(BIN_DIR, "tests", "fixtures", "geo", "geo-city.mmdb")
DE, FR, US, JP, UNPLACED = "192.0.2.1", "192.0.2.17", "198.51.100.1", "203.0.113.1", "203.0.113.113"


def eu_us_config(eu: list[GpuSim], us: GpuSim, **gateway) -> GatewayConfig:
    cfg = GatewayConfig(residency_header=True, **gateway)
    cfg.geo = {"database": CITY_DB, "client_ip": "x-forwarded-for",
               "trusted_proxies": ["127.0.0.1/32"], "unknown": "deny"}
    cfg.region("eu-west", "EU", 53.35, -6.26).region("eu-central", "EU", 50.11, 8.68)
    cfg.region("us-east", "US", 38.9, -77.0)
    for sim, region in zip(eu, ["eu-west", "eu-central"]):
        cfg.backend(sim, region, models=[MODEL])
    cfg.backend(us, "us-east", models=[MODEL, BIG])
    cfg.residency = [{"name": "eu", "continents": ["EU"], "allow_jurisdictions": ["EU"]}]
    return cfg


class ResidencyTest(unittest.TestCase):
    def setUp(self):
        # The US backend is the fastest by far: latency alone would pick it.
        self.eu1 = GpuSim(name="eu-1", models=[MODEL], rtt_ms=25, ttft_ms=30, tokens=3,
                          token_interval_ms=2).start(self)
        self.eu2 = GpuSim(name="eu-2", models=[MODEL], rtt_ms=25, ttft_ms=30, tokens=3,
                          token_interval_ms=2).start(self)
        self.us = GpuSim(name="us-1", models=[MODEL, BIG], ttft_ms=1, tokens=3,
                         token_interval_ms=1).start(self)
        self.gw = Gateway(eu_us_config([self.eu1, self.eu2], self.us))
        self.gw.start(self)
        self.gw.wait_until_ready()
        for name in ("eu-1", "eu-2", "us-1"):
            self.gw.wait_backend(name)

    def ask(self, client_ip, model=MODEL, headers=None, stream=False):
        h = {"X-Forwarded-For": client_ip} if client_ip else {}
        h.update(headers or {})
        return post_json(self.gw.url, "/v1/chat/completions", chat_body(model, stream=stream), headers=h)

    def test_eu_client_only_ever_reaches_eu_backends(self):
        regions = set()
        for _ in range(30):
            status, headers, _ = self.ask(DE)
            self.assertEqual(status, 200)
            regions.add(headers["x-geogate-region"])
            self.assertEqual(headers["x-geogate-residency-rule"], "eu")
        self.assertLessEqual(regions, {"eu-west", "eu-central"})
        self.assertNotIn(DE, self.us.stats()["by_client"])
        # Ungoverned clients do use the fast US backend.
        status, headers, _ = self.ask(US)
        self.assertEqual(status, 200)
        self.assertEqual(headers["x-geogate-residency-rule"], "none")
        # Evidence in the access log: country, rule, allowed set, policy hash, geo epoch.
        rec = next(r for r in self.gw.access_log() if r["client_ip"] == DE)
        self.assertEqual(rec["residency"]["country"], "DE")
        self.assertEqual(rec["residency"]["continent"], "EU")
        self.assertEqual(rec["residency"]["rule"], "eu")
        self.assertEqual(rec["residency"]["allowed"], "eu-west,eu-central")
        self.assertEqual(len(rec["residency"]["policy"]), 64)
        self.assertEqual(rec["residency"]["geo_epoch"], 1700000000)
        self.assertGreaterEqual(self.gw.metric("geogate_residency_decisions_total", rule="eu",
                                               outcome="allowed"), 30)

    def test_all_eu_backends_down_is_503_and_never_the_us(self):
        self.eu1.kill()
        self.eu2.kill()
        self.us.reset()
        # The first request may still try the dead backends (502 after both
        # attempts are refused, inside the EU); the refusals take them out of
        # rotation at once, and from then on the answer is 503.
        status, _, body = self.ask(FR)
        self.assertIn(status, (502, 503), body)
        # On a loaded machine the first request's retry may be refused by the
        # retry budget, leaving the second backend to be found dead by the
        # prober: wait until both are out of rotation, however that happened.
        for name in ("eu-1", "eu-2"):
            self.gw.wait_backend(name, healthy=False)
        for _ in range(10):
            status, headers, body = self.ask(FR)
            self.assertEqual(status, 503, body)
            self.assertEqual(body["error"]["code"], "no_compliant_backend")
            self.assertEqual(body["error"]["type"], "upstream_error")
            self.assertTrue(headers.get("retry-after"))
        streaming = self.ask(DE, stream=True)
        self.assertEqual(streaming[0], 503)
        self.assertNotIn(FR, self.us.stats()["by_client"])
        self.assertNotIn(DE, self.us.stats()["by_client"])
        self.assertEqual(self.gw.metric("geogate_residency_rule_available", rule="eu"), 0)
        # Everyone else is still served.
        status, headers, _ = self.ask(US)
        self.assertEqual((status, headers["x-geogate-backend"]), (200, "us-1"))
        status, _, _ = self.ask(JP)
        self.assertEqual(status, 200)

    def test_failover_inside_the_allowed_set_only(self):
        # eu-1 dies mid-flight: its requests move to eu-2, never to the US.
        self.eu1.control(mode="error500")
        self.us.reset()
        for _ in range(20):
            status, headers, _ = self.ask(DE)
            self.assertEqual(status, 200)
            self.assertEqual(headers["x-geogate-backend"], "eu-2")
        self.assertNotIn(DE, self.us.stats()["by_client"])

    def test_model_served_only_outside_the_allowed_set_is_451(self):
        status, _, body = self.ask(DE, model=BIG)
        self.assertEqual(status, 451)
        self.assertEqual(body["error"]["type"], "residency_violation")
        self.assertEqual(body["error"]["code"], "residency_denied")
        status, _, body = request(self.gw.url, "GET", "/v1/models", headers={"X-Forwarded-For": DE})
        self.assertEqual([m["id"] for m in body["data"]], [MODEL])
        status, _, body = request(self.gw.url, "GET", "/v1/models", headers={"X-Forwarded-For": US})
        self.assertEqual(sorted(m["id"] for m in body["data"]), sorted([MODEL, BIG]))

    def test_a_model_is_retrieved_only_inside_the_allowed_set(self):
        status, _, body = request(self.gw.url, "GET", f"/v1/models/{MODEL}",
                                  headers={"X-Forwarded-For": DE})
        self.assertEqual((status, body.get("id")), (200, MODEL), body)
        # BIG is served only outside the EU: an EU client cannot use it.
        status, _, body = request(self.gw.url, "GET", f"/v1/models/{BIG}",
                                  headers={"X-Forwarded-For": DE})
        self.assertEqual((status, body["error"]["code"]), (404, "model_not_found"))
        status, _, body = request(self.gw.url, "GET", f"/v1/models/{BIG}",
                                  headers={"X-Forwarded-For": US})
        self.assertEqual((status, body.get("id")), (200, BIG), body)
        status, _, body = request(self.gw.url, "GET", f"/v1/models/{MODEL}",
                                  headers={"X-Forwarded-For": UNPLACED})
        self.assertEqual((status, body["error"]["code"]), (451, "residency_denied"))

    def test_every_451_counts_as_denied_with_its_reason(self):
        # One of each way to a 451, and one allowed request, through /metrics.
        status, _, _ = self.ask(DE, model=BIG)            # model served only outside EU
        self.assertEqual(status, 451)
        status, _, _ = self.ask(DE, headers={"x-geogate-residency": "US"})  # narrowed to nothing
        self.assertEqual(status, 451)
        status, _, _ = self.ask(UNPLACED)                 # geo.unknown = deny
        self.assertEqual(status, 451)
        status, _, _ = request(self.gw.url, "GET", "/v1/models", headers={"X-Forwarded-For": UNPLACED})
        self.assertEqual(status, 451)
        status, _, _ = self.ask(DE)
        self.assertEqual(status, 200)
        m = self.gw.metric
        name = "geogate_residency_decisions_total"
        self.assertEqual(m(name, rule="eu", outcome="denied", reason="model_outside_allowed"), 1)
        self.assertEqual(m(name, rule="eu", outcome="denied", reason="narrowed_to_nothing"), 1)
        self.assertEqual(m(name, rule="deny", outcome="denied", reason="policy"), 2)
        self.assertEqual(m(name, rule="eu", outcome="allowed", reason="none"), 1)
        self.assertEqual(m(name, outcome="denied"), 4)
        self.assertEqual(m(name, outcome="allowed"), 1)

    def test_unplaced_clients_are_denied_by_default(self):
        for ip in (UNPLACED, "10.1.2.3"):
            status, _, body = self.ask(ip)
            self.assertEqual((status, body["error"]["code"]), (451, "residency_denied"))
        status, _, body = request(self.gw.url, "GET", "/v1/models", headers={"X-Forwarded-For": UNPLACED})
        self.assertEqual(status, 451)

    def test_the_residency_header_narrows_never_widens(self):
        status, headers, _ = self.ask(US, headers={"x-geogate-residency": "EU"})
        self.assertEqual(status, 200)
        self.assertIn(headers["x-geogate-region"], ("eu-west", "eu-central"))
        status, _, body = self.ask(DE, headers={"x-geogate-residency": "US"})
        self.assertEqual((status, body["error"]["code"]), (451, "residency_denied"))
        status, _, body = self.ask(DE, headers={"x-geogate-residency": "MARS"})
        self.assertEqual((status, body["error"]["code"]), (400, "bad_residency_header"))
        self.assertNotIn(DE, self.us.stats()["by_client"])

    def test_xff_from_an_untrusted_peer_is_ignored(self):
        # 127.10.2.5 is a US address in the fixture and not a trusted proxy:
        # its claim to be in Germany is ignored, so it is an ungoverned US client.
        conn = http.client.HTTPConnection("127.0.0.1", self.gw.port, timeout=10,
                                          source_address=("127.10.2.5", 0))
        conn.request("POST", "/v1/chat/completions", json.dumps(chat_body(MODEL)),
                     {"X-Forwarded-For": DE, "Content-Type": "application/json"})
        r = conn.getresponse()
        r.read()
        self.assertEqual(r.status, 200)
        self.assertEqual(r.getheader("x-geogate-residency-rule"), "none")
        # And a German source address is governed even with a US claim.
        conn = http.client.HTTPConnection("127.0.0.1", self.gw.port, timeout=10,
                                          source_address=("127.10.1.7", 0))
        conn.request("POST", "/v1/chat/completions", json.dumps(chat_body(MODEL)),
                     {"X-Forwarded-For": US, "Content-Type": "application/json"})
        r = conn.getresponse()
        r.read()
        self.assertEqual(r.getheader("x-geogate-residency-rule"), "eu")

    def test_spoofed_left_most_entries_do_not_escape_the_rule(self):
        # A trusted proxy appended the real client (DE) after a forged entry.
        status, headers, _ = self.ask(f"{US}, {DE}")
        self.assertEqual(headers["x-geogate-residency-rule"], "eu")

    def test_geo_endpoint_and_metrics(self):
        status, _, body = self.gw.admin("GET", "/admin/geo")
        self.assertEqual(status, 200)
        self.assertEqual(body["type"], "GeoIP2-City")
        self.assertEqual(body["build_epoch"], 1700000000)
        self.assertEqual(self.gw.metric("geogate_geo_database_build_timestamp_seconds"), 1700000000)
        self.assertEqual(self.gw.metric("geogate_residency_rule_available", rule="eu"), 1)


def _key_hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


class _EchoBackend(BaseHTTPRequestHandler):
    """A backend that answers with the headers it received."""

    def do_GET(self):
        self._reply({"status": "ok"})

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self._reply({"headers": {k.lower(): v for k, v in self.headers.items()}})

    def _reply(self, obj):
        body = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class TenantTest(unittest.TestCase):
    def setUp(self):
        self.eu = GpuSim(name="eu-1", models=[MODEL], ttft_ms=1, tokens=2,
                         token_interval_ms=1).start(self)
        self.us = GpuSim(name="us-1", models=[MODEL], ttft_ms=1, tokens=40,
                         token_interval_ms=50).start(self)
        cfg = GatewayConfig()
        cfg.region("eu-west", "EU").region("us-east", "US")
        cfg.backend(self.eu, "eu-west").backend(self.us, "us-east")
        cfg.residency = [{"name": "anywhere", "allow_jurisdictions": ["EU", "US"]},
                         {"name": "eu-only", "allow_jurisdictions": ["EU"]},
                         {"name": "us-only", "allow_jurisdictions": ["US"]}]
        cfg.tenants = [
            {"name": "bank", "api_key_sha256": [_key_hash("sk-bank")], "residency": "eu-only"},
            {"name": "slow", "api_key_sha256": [_key_hash("sk-slow")], "requests_per_second": 1,
             "burst": 2, "residency": "eu-only"},
            {"name": "single", "api_key_sha256": [_key_hash("sk-single")], "residency": "us-only",
             "max_concurrent": 1},
        ]
        self.gw = Gateway(cfg)
        self.gw.start(self)
        self.gw.wait_until_ready()
        self.gw.wait_backend("eu-1")
        self.gw.wait_backend("us-1")

    def ask(self, key, stream=False):
        h = {"Authorization": f"Bearer {key}"} if key else {}
        return post_json(self.gw.url, "/v1/chat/completions", chat_body(MODEL, stream=stream), headers=h)

    def test_unknown_or_missing_key_is_401(self):
        for key in (None, "sk-wrong"):
            status, _, body = self.ask(key)
            self.assertEqual((status, body["error"]["code"]), (401, "invalid_api_key"))
            self.assertEqual(body["error"]["type"], "authentication_error")
        status, _, _ = request(self.gw.url, "GET", "/v1/models")
        self.assertEqual(status, 401)

    def test_tenant_forced_residency(self):
        for _ in range(10):
            status, headers, _ = self.ask("sk-bank")
            self.assertEqual((status, headers["x-geogate-backend"]), (200, "eu-1"))

    def test_request_rate_limit(self):
        codes = [self.ask("sk-slow")[0] for _ in range(6)]
        self.assertEqual(codes[:2], [200, 200])  # the burst
        self.assertIn(429, codes[2:])
        status, headers, body = self.ask("sk-slow")
        if status == 429:
            self.assertEqual(body["error"]["code"], "rate_limited")
            self.assertGreaterEqual(int(headers["retry-after"]), 1)
        self.assertGreaterEqual(self.gw.metric("geogate_tenant_rejections_total", tenant="slow",
                                               reason="rate"), 1)

    def test_concurrency_limit(self):
        with SseStream(self.gw.url, "/v1/chat/completions", chat_body(MODEL, stream=True),
                       headers={"Authorization": "Bearer sk-single"}) as s:
            self.assertIsNotNone(s.next_event(timeout=5))
            status, _, body = self.ask("sk-single")
            self.assertEqual((status, body["error"]["code"]), (429, "rate_limited"))
        wait_until(lambda: self.ask("sk-single")[0] == 200, 10)


class BackendKeyTest(unittest.TestCase):
    def test_backend_key_injected_and_client_key_never_forwarded(self):
        server = ThreadingHTTPServer(("127.0.0.1", 0), _EchoBackend)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self.addCleanup(server.shutdown)
        cfg = GatewayConfig()
        cfg.region("r1")
        cfg.backends.append({"name": "echo", "region": "r1", "models": [MODEL],
                             "url": f"http://127.0.0.1:{server.server_address[1]}",
                             "api_key_env": "ECHO_BACKEND_KEY"})
        cfg.tenants = [{"name": "t", "api_key_sha256": [_key_hash("sk-client")]}]
        gw = Gateway(cfg, env={"ECHO_BACKEND_KEY": "sk-backend-only"})
        gw.start(self)
        gw.wait_until_ready()
        status, _, body = post_json(gw.url, "/v1/chat/completions", chat_body(MODEL),
                                    headers={"Authorization": "Bearer sk-client",
                                             "X-Forwarded-For": "203.0.113.9"})
        self.assertEqual(status, 200)
        seen = body["headers"]
        self.assertEqual(seen["authorization"], "Bearer sk-backend-only")
        self.assertNotIn("sk-client", json.dumps(seen))
        self.assertEqual(seen["x-forwarded-for"], "203.0.113.9, 127.0.0.1")
        self.assertEqual(seen["x-forwarded-proto"], "http")
        self.assertTrue(seen["x-request-id"])


def proxy_v2(src: str, dst: str, sport: int, dport: int) -> bytes:
    sig = b"\r\n\r\n\x00\r\nQUIT\n"
    addrs = socket.inet_aton(src) + socket.inet_aton(dst) + struct.pack("!HH", sport, dport)
    return sig + bytes([0x21, 0x11]) + struct.pack("!H", len(addrs)) + addrs


class ProxyProtocolTest(unittest.TestCase):
    def setUp(self):
        self.eu = GpuSim(name="eu-1", models=[MODEL], ttft_ms=1, tokens=2, token_interval_ms=1).start(self)
        self.us = GpuSim(name="us-1", models=[MODEL], ttft_ms=1, tokens=2, token_interval_ms=1).start(self)
        self.tls = make_tls_files()
        self.addCleanup(self.tls.cleanup)
        cfg = eu_us_config([self.eu], self.us, tls=self.tls, proxy_protocol=True)
        cfg.regions = [r for r in cfg.regions if r["name"] != "eu-central"]
        cfg.geo["client_ip"] = "proxy-protocol"
        self.gw = Gateway(cfg)
        self.gw.start(self)
        self.gw.wait_until_ready()
        self.gw.wait_backend("eu-1")
        self.gw.wait_backend("us-1")

    def exchange(self, preface: bytes, port=None, tls=False) -> bytes:
        body = json.dumps(chat_body(MODEL)).encode()
        req = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
               b"X-Forwarded-For: " + US.encode() + b"\r\n"
               b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        sock = socket.create_connection(("127.0.0.1", port or self.gw.port), timeout=10)
        sock.sendall(preface)
        if tls:
            sock = self.tls.client_context().wrap_socket(sock, server_hostname="localhost")
        sock.sendall(req)
        out = b""
        try:
            while chunk := sock.recv(65536):
                out += chunk
        except (ConnectionResetError, OSError):
            pass
        sock.close()
        return out

    def test_v1_source_decides_and_xff_is_ignored(self):
        reply = self.exchange(b"PROXY TCP4 192.0.2.1 10.0.0.1 5555 443\r\n")
        self.assertTrue(reply.startswith(b"HTTP/1.1 200"), reply[:200])
        self.assertIn(b"x-geogate-residency-rule: eu", reply)
        self.assertIn(b"x-geogate-backend: eu-1", reply)

    def test_v2_over_tls(self):
        reply = self.exchange(proxy_v2(DE, "10.0.0.1", 5555, 443), port=self.gw.tls_port, tls=True)
        self.assertTrue(reply.startswith(b"HTTP/1.1 200"), reply[:200])
        self.assertIn(b"x-geogate-residency-rule: eu", reply)

    def test_missing_or_garbage_header_closes_the_connection(self):
        self.assertEqual(self.exchange(b""), b"")
        self.assertEqual(self.exchange(b"PROXY TCP9 nonsense\r\n"), b"")
        self.assertGreaterEqual(self.gw.metric("geogate_proxy_protocol_failures_total"), 2)
        # ...and the gateway keeps serving.
        reply = self.exchange(b"PROXY TCP4 198.51.100.1 10.0.0.1 5555 443\r\n")
        self.assertTrue(reply.startswith(b"HTTP/1.1 200"), reply[:200])


if __name__ == "__main__":
    unittest.main()
