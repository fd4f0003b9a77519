"""Hot reload and drain with real processes: SIGHUP under load drops
nothing, a bad file changes nothing, certificates and the geo database are
re-read, a stream outlives a reload that removes its backend, and SIGTERM /
POST /admin/drain take the edge out gracefully."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import random
import re
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import threading
import time
import unittest

from gateway_harness import Gateway, GatewayConfig
from harness import (BIN_DIR, GATEWAY_BIN, GpuSim, SseStream, chat_body, make_tls_files, port_refuses,
                     post_json, wait_until)
from test_failover import StreamLoad

MODEL = "llama-3.1-8b"
HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "fixtures", "geo")
CITY_DB = os.path.join(BIN_DIR, "tests", "fixtures", "geo", "geo-city.mmdb")


def sim(testcase, name, **kw) -> GpuSim:
    kw.setdefault("ttft_ms", 5)
    kw.setdefault("token_interval_ms", 10)
    kw.setdefault("tokens", 8)
    return GpuSim(name=name, models=[MODEL], **kw).start(testcase)


class JsonLoad:
    """Non-streaming requests in a loop; records statuses."""

    def __init__(self, url, concurrency=2):
        self.url, self.statuses, self._stop = url, [], threading.Event()
        self._threads = [threading.Thread(target=self._run, daemon=True) for _ in range(concurrency)]

    def __enter__(self):
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        for t in self._threads:
            t.join(timeout=30)

    def _run(self):
        while not self._stop.is_set():
            try:
                status, _, _ = post_json(self.url, "/v1/chat/completions", chat_body(MODEL), timeout=20)
            except Exception as e:  # noqa: BLE001
                status = repr(e)
            self.statuses.append(status)


class ReloadUnderLoadTest(unittest.TestCase):
    def test_twenty_sighups_drop_nothing(self):
        b1, b2, b3 = sim(self, "b1"), sim(self, "b2"), sim(self, "b3", tokens=30, token_interval_ms=15)
        a = GatewayConfig().region("r1").region("r2", "EU", 40, 2)
        a.backend(b1, "r1").backend(b2, "r2")
        b = GatewayConfig().region("r1").region("r2", "EU", 40, 2)
        b.backend(b1, "r1", capacity=32).backend(b2, "r2").backend(b3, "r2")
        b.routing = {"latency_slack_ms": 50}
        b.limits = {"max_body_bytes": 65536}
        gw = Gateway(a)
        gw.start(self)
        gw.wait_until_ready()
        with StreamLoad(gw.url, 3) as streams, JsonLoad(gw.url, 2) as plain:
            for i in range(20):
                gw.write_config(b if i % 2 == 0 else a)
                gw.sighup()
                wait_until(lambda i=i: gw.metric("geogate_config_reloads_total", result="success") >= i + 1,
                           10)
                time.sleep(0.15)
        self.assertEqual(gw.metric("geogate_config_reloads_total", result="failure"), 0)
        self.assertGreater(len(streams.results), 20)
        broken = [r for r in streams.results if r["status"] != 200 or not r["done"]]
        self.assertEqual(broken, [], streams.summary())
        self.assertTrue(plain.statuses)
        self.assertEqual(set(plain.statuses), {200})
        status, _, cfg = gw.admin("GET", "/admin/config")
        self.assertEqual(cfg["generation"], 21)
        self.assertEqual(cfg["reloads"]["success"], 20)


class BadConfigTest(unittest.TestCase):
    def test_syntax_and_semantic_errors_change_nothing(self):
        b1 = sim(self, "b1")
        cfg = GatewayConfig().region("r1").backend(b1, "r1")
        gw = Gateway(cfg)
        gw.start(self)
        gw.wait_until_ready()
        _, _, before = gw.admin("GET", "/admin/config")
        good = cfg.render()

        broken_syntax = good.replace("[gateway.admin]", "[gateway.admin", 1)
        unknown_region = good.replace('region = "r1"', 'region = "nowhere"', 1)
        for n, text in enumerate([broken_syntax, unknown_region], start=1):
            gw.write_config(text)
            gw.sighup()
            wait_until(lambda n=n: gw.metric("geogate_config_reloads_total", result="failure") >= n, 10)
            status, _, body = post_json(gw.url, "/v1/chat/completions", chat_body(MODEL))
            self.assertEqual(status, 200, body)  # the old policy keeps serving
            _, _, now = gw.admin("GET", "/admin/config")
            self.assertEqual(now["hash"], before["hash"])
            self.assertEqual(now["generation"], before["generation"])
            check = subprocess.run([GATEWAY_BIN, "--check", "--config", gw.config_path],
                                   capture_output=True, text=True)
            self.assertEqual(check.returncode, 1)
            first = check.stderr.splitlines()[0]
            self.assertRegex(first, r"^.*geogate\.toml:\d+:\d+: ")
            logged = [json.loads(line)["msg"] for line in gw.stderr_text().splitlines()
                      if line.startswith("{")]
            self.assertIn(first, logged)  # the reload logged the same line
        # The admin endpoint reports errors with their position too.
        status, _, body = gw.admin("POST", "/admin/reload")
        self.assertEqual(status, 422)
        self.assertFalse(body["ok"])
        self.assertRegex(body["errors"][0], r"geogate\.toml:\d+:\d+: .*nowhere")
        # A fixed file is taken.
        gw.write_config(good)
        status, _, body = gw.admin("POST", "/admin/reload")
        self.assertEqual((status, body["ok"]), (200, True))


class CertificateRotationTest(unittest.TestCase):
    def test_new_handshakes_present_the_new_certificate(self):
        b1 = sim(self, "b1")
        first, second = make_tls_files(), make_tls_files()
        self.addCleanup(first.cleanup)
        self.addCleanup(second.cleanup)
        live = tempfile.mkdtemp(prefix="geogate-certs-")
        self.addCleanup(shutil.rmtree, live, True)
        cert, key = os.path.join(live, "edge.pem"), os.path.join(live, "edge.key")
        shutil.copy(first.cert, cert)
        shutil.copy(first.key, key)
        cfg = GatewayConfig().region("r1").backend(b1, "r1")
        cfg.listeners.append({"address": "127.0.0.1:0", "tls": {"cert": cert, "key": key}})
        gw = Gateway(cfg)
        gw.start(self)
        gw.wait_until_ready()

        def presented() -> bytes:
            ctx = ssl.create_default_context()
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            with socket.create_connection(("127.0.0.1", gw.tls_port), timeout=5) as raw:
                with ctx.wrap_socket(raw, server_hostname="localhost") as s:
                    return s.getpeercert(binary_form=True)

        def fingerprint(path) -> bytes:
            with open(path) as f:
                return ssl.PEM_cert_to_DER_cert(f.read())

        self.assertEqual(presented(), fingerprint(first.cert))
        # A connection opened before the rotation keeps working.
        old = SseStream(gw.tls_url, "/v1/chat/completions", chat_body(MODEL, stream=True),
                        tls_context=first.client_context())
        shutil.copy(second.cert, cert + ".new")
        shutil.copy(second.key, key + ".new")
        os.replace(cert + ".new", cert)
        os.replace(key + ".new", key)
        gw.sighup()
        wait_until(lambda: presented() == fingerprint(second.cert), 10)
        self.assertEqual([d for _, d in old.events(timeout=10)][-1], "[DONE]")
        old.close()
        events = [d for _, d in SseStream(gw.tls_url, "/v1/chat/completions",
                                          chat_body(MODEL, stream=True),
                                          tls_context=second.client_context()).events(timeout=10)]
        self.assertEqual(events[-1], "[DONE]")


def ticket_key() -> str:
    """One session-ticket key line, as `openssl rand 80 | base64 -w0` makes."""
    return base64.b64encode(os.urandom(80)).decode()


class TlsSessionResumptionTest(unittest.TestCase):
    """Session tickets outlive a reload, and edges that share a ticket key
    file resume each other's sessions (a client whose anycast route moves)."""

    def setUp(self):
        self.b1 = sim(self, "b1")
        self.tls = make_tls_files()
        self.ctx = self.tls.client_context()

    def gateway(self, ticket_keys=None) -> Gateway:
        tls = {"cert": self.tls.cert, "key": self.tls.key}
        if ticket_keys is not None:
            tls["ticket_keys"] = ticket_keys
        cfg = GatewayConfig().region("r1").backend(self.b1, "r1")
        cfg.listeners.append({"address": "127.0.0.1:0", "tls": tls})
        gw = Gateway(cfg)
        gw.start(self)
        gw.wait_until_ready()
        return gw

    def connect(self, gw, session=None):
        """One request on a new TLS 1.3 connection. @return (session, resumed)."""
        with socket.create_connection(("127.0.0.1", gw.tls_port), timeout=5) as raw:
            with self.ctx.wrap_socket(raw, server_hostname="localhost", session=session) as s:
                s.sendall(b"GET /v1/models HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
                data = b""
                while len(data) < 1 << 20:
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    data += chunk
                self.assertTrue(data.startswith(b"HTTP/1.1 200"), data[:100])
                self.assertEqual(s.version(), "TLSv1.3")
                return s.session, s.session_reused

    def reload(self, gw, expect="success"):
        before = gw.metric("geogate_config_reloads_total", result=expect)
        gw.sighup()
        wait_until(lambda: gw.metric("geogate_config_reloads_total", result=expect) > before, 10)

    def test_a_session_resumes_after_a_reload(self):
        gw = self.gateway()
        session, resumed = self.connect(gw)
        self.assertFalse(resumed)
        self.assertTrue(self.connect(gw, session)[1])
        # A reload makes new contexts (certificates are re-read); the
        # listener's ticket keys stay, so the session still resumes. Before
        # the keys were the listener's, every reload cost a full handshake.
        self.reload(gw)
        self.assertTrue(self.connect(gw, session)[1])
        self.assertGreaterEqual(gw.metric("geogate_tls_resumed_handshakes_total"), 2)
        self.assertGreaterEqual(gw.metric("geogate_tls_handshakes_total", result="success"), 3)

    def test_edges_sharing_a_key_file_resume_each_others_sessions(self):
        keys = os.path.join(tempfile.mkdtemp(prefix="geogate-tickets-"), "tickets.keys")
        self.addCleanup(shutil.rmtree, os.path.dirname(keys), True)
        old, new = ticket_key(), ticket_key()
        with open(keys, "w") as f:
            f.write(f"# fleet ticket keys\n{old}\n")
        edge_a, edge_b = self.gateway(keys), self.gateway(keys)
        session, _ = self.connect(edge_a)
        self.assertTrue(self.connect(edge_b, session)[1])
        # A generated-key edge cannot read them.
        self.assertFalse(self.connect(self.gateway(), session)[1])
        # Rotation, step 2 of docs/operations.md: the new key encrypts, the
        # old one still decrypts.
        with open(keys, "w") as f:
            f.write(f"{new}\n{old}\n")
        self.reload(edge_a)
        self.assertTrue(self.connect(edge_a, session)[1])
        # A broken file is rejected and the keys in use stay.
        with open(keys, "w") as f:
            f.write("not a key\n")
        self.reload(edge_a, expect="failure")
        self.assertTrue(self.connect(edge_a, session)[1])
        # Step 3: the old key is dropped, and with it its tickets.
        with open(keys, "w") as f:
            f.write(f"{new}\n")
        self.reload(edge_a)
        self.assertFalse(self.connect(edge_a, session)[1])


class BackendRemovalTest(unittest.TestCase):
    def test_a_stream_outlives_the_reload_that_removes_its_backend(self):
        b1 = sim(self, "b1", tokens=40, token_interval_ms=40)
        b2 = sim(self, "b2")
        with_b1 = GatewayConfig().region("r1").backend(b1, "r1")
        without_b1 = GatewayConfig().region("r1").backend(b2, "r1")
        gw = Gateway(with_b1)
        gw.start(self)
        gw.wait_until_ready()
        with SseStream(gw.url, "/v1/chat/completions", chat_body(MODEL, stream=True)) as s:
            self.assertEqual(s.headers["x-geogate-backend"], "b1")
            self.assertIsNotNone(s.next_event(timeout=5))
            gw.write_config(without_b1)
            gw.sighup()
            wait_until(lambda: gw.metric("geogate_config_reloads_total", result="success") >= 1, 10)
            # New requests never go to the removed backend (b2 takes traffic
            # after its first probe).
            wait_until(lambda: gw.ready(), 10)
            for _ in range(5):
                status, headers, _ = post_json(gw.url, "/v1/chat/completions", chat_body(MODEL))
                self.assertEqual((status, headers["x-geogate-backend"]), (200, "b2"))
            rest = [d for _, d in s.events(timeout=10)]
        self.assertEqual(rest[-1], "[DONE]")
        tokens = [json.loads(d)["choices"][0]["delta"].get("content") for d in rest[:-1]
                  if json.loads(d)["choices"]]
        self.assertEqual([t for t in tokens if t][-1], "b1:39 ")
        # gpusim counts the stream once its last write has completed, which
        # can be after the client has read [DONE] through the gateway.
        wait_until(lambda: b1.stats()["streams_completed"] == 1, 5,
                   message="b1 to count the stream completed")

    def test_a_new_backend_waits_for_its_first_good_probe(self):
        b1 = sim(self, "b1")
        b2 = sim(self, "b2")
        b2.pause()
        self.addCleanup(b2.resume)
        gw = Gateway(GatewayConfig().region("r1").backend(b1, "r1"))
        gw.start(self)
        gw.wait_until_ready()
        gw.write_config(GatewayConfig().region("r1").backend(b1, "r1").backend(b2, "r1"))
        gw.sighup()
        wait_until(lambda: any(b["name"] == "b2" for b in gw.backends()), 10)
        self.assertFalse(gw.backend("b2")["healthy"])
        for _ in range(10):
            _, headers, _ = post_json(gw.url, "/v1/chat/completions", chat_body(MODEL))
            self.assertEqual(headers["x-geogate-backend"], "b1")
        b2.resume()
        gw.wait_backend("b2")


class GeoDatabaseReloadTest(unittest.TestCase):
    @unittest.skipUnless(shutil.which("perl"), "needs perl with MaxMind::DB::Writer")
    def test_sighup_reopens_the_database_and_a_bad_file_keeps_the_old_one(self):
        work = tempfile.mkdtemp(prefix="geogate-geo-")
        self.addCleanup(shutil.rmtree, work, True)
        db = os.path.join(work, "geo.mmdb")
        shutil.copy(CITY_DB, db)
        eu, us = sim(self, "eu1"), sim(self, "us1")
        cfg = GatewayConfig(residency_header=True).region("eu", "EU").region("us", "US")
        cfg.backend(eu, "eu").backend(us, "us")
        cfg.geo = {"database": db, "client_ip": "x-forwarded-for", "trusted_proxies": ["127.0.0.1/32"],
                   "unknown": "anywhere"}
        cfg.residency = [{"name": "eu", "continents": ["EU"], "allow_jurisdictions": ["EU"]},
                         {"name": "anywhere", "allow_jurisdictions": ["EU", "US"]}]
        gw = Gateway(cfg)
        gw.start(self)
        gw.wait_until_ready()
        gw.wait_backend("eu1")
        gw.wait_backend("us1")

        def rule_for(ip):
            _, headers, _ = post_json(gw.url, "/v1/chat/completions", chat_body(MODEL),
                                      headers={"X-Forwarded-For": ip})
            return headers.get("x-geogate-residency-rule")

        self.assertEqual(rule_for("192.0.2.1"), "eu")  # DE
        # A new database build moves 192.0.2.0/28 to the US.
        with open(os.path.join(FIXTURES, "geo-fixture.json")) as f:
            fixture = json.load(f)
        for net in fixture["networks"]:
            if net.get("country") == "DE":
                net.update(country="US", continent="NA")
        fixture["build_epoch"] = 1800000000
        moved = os.path.join(work, "moved.json")
        with open(moved, "w") as f:
            json.dump(fixture, f)
        subprocess.run(["perl", os.path.join(FIXTURES, "write-mmdb.pl"), moved,
                        os.path.join(work, "new.mmdb"), os.path.join(work, "flat.mmdb")], check=True,
                       capture_output=True)
        os.replace(os.path.join(work, "new.mmdb"), db)
        gw.sighup()
        wait_until(lambda: rule_for("192.0.2.1") == "none", 10)
        self.assertEqual(gw.metric("geogate_geo_database_build_timestamp_seconds"), 1800000000)
        # A corrupt file: the reload keeps the loaded database and says so.
        with open(db + ".bad", "wb") as f:
            f.write(b"not a maxmind database" * 100)
        os.replace(db + ".bad", db)
        gw.sighup()
        wait_until(lambda: gw.metric("geogate_geo_database_reload_failures_total") >= 1, 10)
        self.assertEqual(rule_for("192.0.2.17"), "eu")  # FR: still placed by the old database


class HostileConfigReloadTest(unittest.TestCase):
    """Issue #18 item 2: no config file, however deep or large, takes the
    gateway down on SIGHUP or POST /admin/reload; each such reload is a
    counted failure and the running policy keeps serving."""

    def test_a_deep_dotted_key_is_a_failed_reload_not_a_crash(self):
        b1 = sim(self, "b1")
        cfg = GatewayConfig().region("r1").backend(b1, "r1")
        gw = Gateway(cfg)
        gw.start(self)
        gw.wait_until_ready()
        _, _, before = gw.admin("GET", "/admin/config")
        good = cfg.render()
        # The file of the issue: ~100 KB, last line a key of 50,000 parts.
        gw.write_config(good + ".".join(["a"] * 50000) + " = 1\n")
        gw.sighup()
        wait_until(lambda: gw.metric("geogate_config_reloads_total", result="failure") >= 1, 10)
        self.assertIsNone(gw.popen.poll())
        status, _, body = post_json(gw.url, "/v1/chat/completions", chat_body(MODEL))
        self.assertEqual(status, 200, body)
        status, _, body = gw.admin("POST", "/admin/reload")
        self.assertEqual(status, 422)
        self.assertFalse(body["ok"])
        self.assertRegex(body["errors"][0], r"geogate\.toml:\d+:1: key nested \d+ levels deep")
        self.assertEqual(gw.metric("geogate_config_reloads_total", result="failure"), 2)
        self.assertIsNone(gw.popen.poll())
        _, _, now = gw.admin("GET", "/admin/config")
        self.assertEqual((now["hash"], now["generation"]), (before["hash"], before["generation"]))
        status, _, body = post_json(gw.url, "/v1/chat/completions", chat_body(MODEL))
        self.assertEqual(status, 200, body)
        # --check says the same instead of dying.
        check = subprocess.run([GATEWAY_BIN, "--check", "--config", gw.config_path],
                               capture_output=True, text=True, timeout=30)
        self.assertEqual(check.returncode, 1, check.stderr)
        self.assertRegex(check.stderr, r"geogate\.toml:\d+:1: key nested \d+ levels deep")


# An ASN-only database, the way MaxMind ships GeoLite2-ASN: records without
# any country. Written with MaxMind's own writer, like tests/fixtures/geo.
ASN_WRITER = r"""
use strict; use warnings;
use MaxMind::DB::Writer::Tree;
my %types = (autonomous_system_number => 'uint32', autonomous_system_organization => 'utf8_string');
my $tree = MaxMind::DB::Writer::Tree->new(
    ip_version => 6, record_size => 24, database_type => 'GeoLite2-ASN', languages => ['en'],
    description => { en => 'geogate test: ASN only' }, alias_ipv6_to_ipv4 => 1,
    remove_reserved_networks => 0, map_key_type_callback => sub { $types{ $_[0] } });
$tree->insert_network('192.0.2.0/24', { autonomous_system_number => 64496,
                                        autonomous_system_organization => 'Example AS' });
open my $fh, '>:raw', $ARGV[0] or die "$ARGV[0]: $!";
$tree->write_tree($fh);
close $fh or die "$ARGV[0]: $!";
"""


class CheckEqualsStartupTest(unittest.TestCase):
    """Issue #18 item 2: `--check` opens and validates everything start-up
    opens (the geo database, TLS certificate and key, CA files) and reports
    each problem at the key that names the file; start-up rejects the same
    files. The bad files are made here, never taken from outside the repo."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="geogate-check-")
        self.addCleanup(shutil.rmtree, self.dir, True)

    def path(self, name):
        return os.path.join(self.dir, name)

    def write_config(self, extra=""):
        # `extra` starts on line 10: geo_config's database is at 11:12,
        # tls_config's cert at 13:8 and key at 14:7.
        config = self.path("geogate.toml")
        with open(config, "w") as f:
            f.write('[[regions]]\nname = "r1"\njurisdiction = "EU"\nlocation = { lat = 50, lon = 8 }\n'
                    '[[backends]]\nname = "b1"\nregion = "r1"\nurl = "http://127.0.0.1:9"\n'
                    'models = ["m"]\n' + extra +
                    '[[gateway.listeners]]\naddress = "127.0.0.1:0"\n'
                    '[gateway.admin]\naddress = "127.0.0.1:0"\n')
        return config

    def check(self, config, *flags):
        return subprocess.run([GATEWAY_BIN, "--check", *flags, "--config", config],
                              capture_output=True, text=True, timeout=60)

    def assert_rejected(self, config, line, col, message):
        r = self.check(config)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertEqual(r.stdout, "")
        errors = [e for e in r.stderr.splitlines() if ": warning: " not in e]
        self.assertEqual(len(errors), 1, r.stderr)
        self.assertRegex(errors[0], rf"^{re.escape(config)}:{line}:{col}: .*{message}")
        # Start-up refuses the same file (and says so at the same place).
        start = subprocess.run([GATEWAY_BIN, "--config", config], capture_output=True, text=True,
                               timeout=30)
        self.assertEqual(start.returncode, 1, start.stderr)
        self.assertIn(f"{config}:{line}:{col}: ", start.stderr)

    def geo_config(self, database):
        return self.write_config(f'[geo]\ndatabase = "{database}"\n')

    def test_a_random_bytes_database(self):
        with open(self.path("random.mmdb"), "wb") as f:
            f.write(random.Random(18).randbytes(8192))
        self.assert_rejected(self.geo_config("random.mmdb"), 11, 12, "not a valid MaxMind DB file")

    def test_a_database_with_a_broken_search_tree(self):
        # A real database whose first search-tree nodes point past the tree.
        with open(CITY_DB, "rb") as f:
            data = bytearray(f.read())
        data[0:48] = b"\xff" * 48
        with open(self.path("broken.mmdb"), "wb") as f:
            f.write(data)
        self.assert_rejected(self.geo_config("broken.mmdb"), 11, 12, "corrupt")

    @unittest.skipUnless(shutil.which("perl"), "needs perl with MaxMind::DB::Writer")
    def test_an_asn_database_has_no_country(self):
        subprocess.run(["perl", "-e", ASN_WRITER, self.path("asn.mmdb")], check=True,
                       capture_output=True)
        self.assert_rejected(self.geo_config("asn.mmdb"), 11, 12,
                             r"no record has a string at geo.country_field \"country.iso_code\"; "
                             r"records have the keys \[autonomous_system_number")

    def tls_config(self, cert, key):
        return self.write_config(f'[[gateway.listeners]]\naddress = "127.0.0.1:0"\n'
                                 f'[gateway.listeners.tls]\ncert = "{cert}"\nkey = "{key}"\n')

    def test_a_certificate_and_a_key_that_do_not_match(self):
        a, b = make_tls_files(os.path.join(self.dir, "a")), make_tls_files(os.path.join(self.dir, "b"))
        self.assert_rejected(self.tls_config(a.cert, b.key), 14, 7,
                             "(key values mismatch|does not match certificate)")

    def test_a_certificate_that_is_not_pem(self):
        a = make_tls_files(os.path.join(self.dir, "a"))
        with open(self.path("cert.der"), "wb") as f:
            f.write(b"\x30\x82\x01\x0a" + random.Random(1).randbytes(300))
        self.assert_rejected(self.tls_config("cert.der", a.key), 13, 8, "cannot load certificate")

    def test_a_ticket_key_file_that_is_not_keys(self):
        a = make_tls_files(os.path.join(self.dir, "a"))
        with open(self.path("tickets.keys"), "w") as f:
            f.write(base64.b64encode(os.urandom(80)).decode() + "\n" +
                    base64.b64encode(os.urandom(48)).decode() + "\n")
        config = self.write_config(f'[[gateway.listeners]]\naddress = "127.0.0.1:0"\n'
                                   f'[gateway.listeners.tls]\ncert = "{a.cert}"\nkey = "{a.key}"\n'
                                   'ticket_keys = "tickets.keys"\n')
        self.assert_rejected(config, 15, 15, r"ticket key file .*tickets.keys: line 2: a key is 80 bytes")

    def test_a_ca_file_that_is_not_pem(self):
        with open(self.path("ca.pem"), "w") as f:
            f.write("not a certificate\n")
        config = self.write_config()
        with open(config) as f:
            text = f.read()
        text = text.replace('url = "http://127.0.0.1:9"', 'url = "https://127.0.0.1:9"\nca_file = "ca.pem"')
        with open(config, "w") as f:
            f.write(text)
        self.assert_rejected(config, 9, 11, "backend 'b1': cannot load CA certificates")

    def test_good_files_pass(self):
        shutil.copy(CITY_DB, self.path("city.mmdb"))
        a = make_tls_files(os.path.join(self.dir, "a"))
        config = self.write_config(f'[geo]\ndatabase = "city.mmdb"\n'
                                   f'[[gateway.listeners]]\naddress = "127.0.0.1:0"\n'
                                   f'tls = {{ cert = "{a.cert}", key = "{a.key}" }}\n')
        r = self.check(config)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r": ok \(1 regions, 1 backends")

    def test_syntax_only_needs_no_files_and_no_secrets(self):
        config = self.write_config('[geo]\ndatabase = "missing.mmdb"\n'
                                   '[[gateway.listeners]]\naddress = "127.0.0.1:0"\n'
                                   'tls = { cert = "certs/missing.pem", key = "certs/missing.key" }\n'
                                   '[gateway]\naccess_log = "no-such-dir/access.log"\n')
        with open(config) as f:
            text = f.read()
        text = text.replace('models = ["m"]', 'models = ["m"]\napi_key_env = "GEOGATE_TEST_UNSET_KEY"')
        with open(config, "w") as f:
            f.write(text)
        env = {k: v for k, v in os.environ.items() if k != "GEOGATE_TEST_UNSET_KEY"}
        full = subprocess.run([GATEWAY_BIN, "--check", "--config", config], capture_output=True,
                              text=True, timeout=60, env=env)
        self.assertEqual(full.returncode, 1)
        for what in ("missing.mmdb", "missing.pem", "missing.key", "no-such-dir", "GEOGATE_TEST_UNSET_KEY"):
            self.assertIn(what, full.stderr)
        lint = subprocess.run([GATEWAY_BIN, "--check", "--syntax-only", "--config", config],
                              capture_output=True, text=True, timeout=60, env=env)
        self.assertEqual(lint.returncode, 0, lint.stderr)
        self.assertRegex(lint.stdout, r": ok \(1 regions, 1 backends.*syntax only")
        # Schema and value errors are still found.
        with open(config, "a") as f:
            f.write("[health]\ninterval_ms = 0\n")
        lint = subprocess.run([GATEWAY_BIN, "--check", "--syntax-only", "--config", config],
                              capture_output=True, text=True, timeout=60, env=env)
        self.assertEqual(lint.returncode, 1)
        self.assertRegex(lint.stderr, r"geogate\.toml:\d+:15: 'interval_ms' in \[health\] must be")
        # --syntax-only is a mode of --check, not of running.
        run = subprocess.run([GATEWAY_BIN, "--syntax-only", "--config", config], capture_output=True,
                             text=True, timeout=30)
        self.assertEqual(run.returncode, 2)


class GeoReloadFailureMetricTest(unittest.TestCase):
    """Issue #18 item 2: every reload that meets a bad .mmdb counts in
    geogate_geo_database_reload_failures_total, whether the file was
    replaced in place (the loaded database keeps serving) or the config now
    names another, bad, file (the reload is refused)."""

    def test_each_bad_database_counts_once(self):
        work = tempfile.mkdtemp(prefix="geogate-geo-")
        self.addCleanup(shutil.rmtree, work, True)
        db = os.path.join(work, "geo.mmdb")
        shutil.copy(CITY_DB, db)
        eu = sim(self, "eu1")
        cfg = GatewayConfig(residency_header=True).region("eu", "EU").backend(eu, "eu")
        cfg.geo = {"database": db, "client_ip": "x-forwarded-for", "trusted_proxies": ["127.0.0.1/32"]}
        cfg.residency = [{"name": "eu", "continents": ["EU"], "allow_jurisdictions": ["EU"]}]
        gw = Gateway(cfg)
        gw.start(self)
        gw.wait_until_ready()
        failures = lambda: gw.metric("geogate_geo_database_reload_failures_total")  # noqa: E731
        self.assertEqual(failures(), 0)

        # Another file, random bytes: the reload is refused at geo.database.
        bad = os.path.join(work, "random.mmdb")
        with open(bad, "wb") as f:
            f.write(random.Random(7).randbytes(4096))
        cfg.geo = dict(cfg.geo, database=bad)
        gw.write_config(cfg)
        gw.sighup()
        wait_until(lambda: gw.metric("geogate_config_reloads_total", result="failure") >= 1, 10)
        self.assertEqual(failures(), 1)
        status, _, body = gw.admin("POST", "/admin/reload")
        self.assertEqual((status, body["ok"]), (422, False))
        self.assertRegex(body["errors"][0], r"geogate\.toml:\d+:\d+: geo database .*random\.mmdb")
        self.assertEqual(failures(), 2)
        _, headers, _ = post_json(gw.url, "/v1/chat/completions", chat_body(MODEL),
                                  headers={"X-Forwarded-For": "192.0.2.1"})
        self.assertEqual(headers.get("x-geogate-residency-rule"), "eu")  # the old database

        # The same path, overwritten with garbage: the old database keeps
        # serving, the reload is applied, the failure still counts.
        cfg.geo = dict(cfg.geo, database=db)
        gw.write_config(cfg)
        shutil.copy(bad, db + ".new")
        os.replace(db + ".new", db)
        status, _, body = gw.admin("POST", "/admin/reload")
        self.assertEqual((status, body["ok"]), (200, True), body)
        self.assertEqual(failures(), 3)
        self.assertEqual(gw.metric("geogate_config_reloads_total", result="success"), 1)


class DrainTest(unittest.TestCase):
    def test_admin_drain_readyz_then_doors_close_then_exit_zero(self):
        b1 = sim(self, "b1", tokens=30, token_interval_ms=40)
        cfg = GatewayConfig().region("r1").backend(b1, "r1")
        cfg.upstream = {"drain_delay_ms": 500, "drain_timeout_ms": 10000}
        gw = Gateway(cfg)
        gw.start(self)
        gw.wait_until_ready()
        with SseStream(gw.url, "/v1/chat/completions", chat_body(MODEL, stream=True)) as s:
            self.assertIsNotNone(s.next_event(timeout=5))
            status, _, body = gw.admin("POST", "/admin/drain")
            self.assertEqual((status, body["draining"]), (202, True))
            self.assertFalse(gw.ready())
            self.assertEqual(gw.metric("geogate_draining"), 1)
            # Still accepting during drain_delay (the anycast route is being withdrawn)...
            status, _, _ = post_json(gw.url, "/v1/chat/completions", chat_body(MODEL))
            self.assertEqual(status, 200)
            # ...then the doors close while the stream runs on.
            wait_until(lambda: port_refuses("127.0.0.1", gw.port), 5)
            events = [d for _, d in s.events(timeout=10)]
        self.assertEqual(events[-1], "[DONE]")
        self.assertEqual(gw.popen.wait(timeout=10), 0)

    def test_second_sigterm_exits_at_once(self):
        b1 = sim(self, "b1", tokens=200, token_interval_ms=50)
        gw = Gateway(GatewayConfig().region("r1").backend(b1, "r1"))
        gw.start(self)
        gw.wait_until_ready()
        s = SseStream(gw.url, "/v1/chat/completions", chat_body(MODEL, stream=True))
        self.assertIsNotNone(s.next_event(timeout=5))
        gw.signal(signal.SIGTERM)
        time.sleep(0.2)
        gw.signal(signal.SIGTERM)
        self.assertEqual(gw.popen.wait(timeout=5), 1)
        s.close()


if __name__ == "__main__":
    unittest.main()
