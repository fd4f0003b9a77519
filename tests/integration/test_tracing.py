"""OpenTelemetry tracing end to end (docs/tracing.md): a collector stand-in
on loopback receives the gateway's OTLP/HTTP JSON export; the spans' parentage
(request -> routing, request -> attempt), the client's trace kept, the
backend's traceparent naming the attempt span, the routing span's residency
attributes, and a collector that is down costing nothing but counted drops.
The export: one keep-alive connection for batch after batch, a collector
restart survived, an https collector verified against a CA file (SNI
sent), and the spans still queued at SIGTERM flushed within
flush_timeout_ms — a stalled collector does not hold the exit."""

from __future__ import annotations

import http.server
import json
import re
import socket
import ssl
import threading
import time
import unittest

from gateway_harness import Gateway, GatewayConfig
from harness import GpuSim, InProcessServer, SseStream, TlsFiles, chat_body, free_port, \
    make_tls_files, post_json, wait_until

MODEL = "llama-3.1-8b"
CLIENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_PARENT = "00f067aa0ba902b7"
TRACEPARENT_RE = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")


class Collector(InProcessServer):
    """POST /v1/traces: keeps every span of every export request. HTTP/1.1
    with keep-alive; counts the connections it accepted (.connections) and
    can be restarted on the same port, its open connections closed
    (restart()). tls=TlsFiles serves HTTPS and records the SNI names it was
    sent (.sni). stall=True reads requests and never answers them."""

    def __init__(self, status: int = 200, tls: TlsFiles | None = None, stall: bool = False,
                 port: int = 0):
        self.spans: list[dict] = []
        self.requests = 0
        self.connections = 0
        self.sni: list[str | None] = []
        self.lock = threading.Lock()
        self.status = status
        self.tls = tls
        self.stall = stall
        self.released = threading.Event()
        self.open_socks: list = []
        self._build(port)

    def _build(self, port: int) -> None:
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self):
                super().setup()
                with outer.lock:
                    outer.connections += 1
                    outer.open_socks.append(self.connection)

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if outer.stall:
                    outer.released.wait(60)
                    self.close_connection = True
                    return
                ok = self.path == "/v1/traces" and \
                    self.headers.get("Content-Type") == "application/json"
                with outer.lock:
                    outer.requests += 1
                    if ok:
                        doc = json.loads(body)
                        for rs in doc["resourceSpans"]:
                            res = {a["key"]: a["value"] for a in rs["resource"]["attributes"]}
                            for ss in rs["scopeSpans"]:
                                for span in ss["spans"]:
                                    span["_resource"] = res
                                    outer.spans.append(span)
                self.send_response(outer.status if ok else 400)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *args):
                pass

        server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        if self.tls is not None:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(self.tls.cert, self.tls.key)

            def record_sni(sock, name, _ctx):
                with self.lock:
                    self.sni.append(name)
            ctx.sni_callback = record_sni
            server.socket = ctx.wrap_socket(server.socket, server_side=True)
        self.serve(server)
        scheme = "https" if self.tls is not None else "http"
        self.url = f"{scheme}://{'localhost' if self.tls else '127.0.0.1'}:{server.server_address[1]}"

    def close_connections(self) -> None:
        with self.lock:
            socks, self.open_socks = self.open_socks, []
        for sock in socks:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def stop(self) -> None:
        self.released.set()
        super().stop()
        self.close_connections()

    def restart(self) -> None:
        """Down and up again on the same port, as a collector's restart."""
        port = self.server.server_address[1]
        self.server.shutdown()
        self.server.server_close()
        self.close_connections()
        self._build(port)
        self.thread.start()

    def trace(self, trace_id: str) -> list[dict]:
        with self.lock:
            return [s for s in self.spans if s["traceId"] == trace_id]


def attrs(span: dict) -> dict:
    out = {}
    for a in span.get("attributes", []):
        (kind, value), = a["value"].items()
        out[a["key"]] = int(value) if kind == "intValue" else value
    return out


class TracingTest(unittest.TestCase):
    def start_sim(self, name, region, **kw) -> GpuSim:
        kw.setdefault("ttft_ms", 5)
        kw.setdefault("token_interval_ms", 2)
        kw.setdefault("tokens", 4)
        return GpuSim(name=name, region=region, models=[MODEL], record_requests=16, **kw).start(self)

    def config(self, collector_url: str, *sims: GpuSim) -> GatewayConfig:
        cfg = GatewayConfig()
        cfg.region("eu-west", jurisdiction="EU").region("us-east", jurisdiction="US")
        for s in sims:
            cfg.backend(s, s.region)
        # Clients the gateway cannot place (no geo database) are EU-only.
        cfg.residency = [{"name": "eu-only", "allow_jurisdictions": ["EU"]}]
        cfg.geo = {"unknown": "eu-only"}
        cfg.tracing = {"enabled": True, "collector_url": collector_url, "batch_size": 64,
                       "batch_interval_ms": 50, "queue_limit": 64, "export_timeout_ms": 500,
                       "service_name": "geogate-test"}
        return cfg

    def start_gateway(self, cfg: GatewayConfig) -> Gateway:
        gw = Gateway(cfg)
        gw.start(self)
        gw.wait_until_ready()
        return gw

    def test_spans_parentage_and_propagation(self):
        collector = Collector().start(self)
        eu = self.start_sim("eu-1", "eu-west")
        us = self.start_sim("us-1", "us-east")
        gw = self.start_gateway(self.config(collector.url, eu, us))

        incoming = f"00-{CLIENT_TRACE}-{CLIENT_PARENT}-01"
        status, headers, _ = post_json(gw.url, "/v1/chat/completions", chat_body(MODEL),
                                       headers={"traceparent": incoming, "tracestate": "k=v"})
        self.assertEqual(status, 200)
        self.assertEqual(headers["x-geogate-region"], "eu-west")

        self.assertTrue(wait_until(lambda: len(collector.trace(CLIENT_TRACE)) >= 3, timeout=10),
                        f"spans received: {collector.spans}")
        spans = collector.trace(CLIENT_TRACE)
        server = [s for s in spans if s["kind"] == 2]
        routing = [s for s in spans if s["name"] == "geogate.route"]
        attempts = [s for s in spans if s["kind"] == 3]
        self.assertEqual((len(server), len(routing), len(attempts)), (1, 1, 1), spans)
        server, routing, attempt = server[0], routing[0], attempts[0]
        # The client's trace is kept; the request span is the child of its span.
        self.assertEqual(server["parentSpanId"], CLIENT_PARENT)
        self.assertEqual(routing["parentSpanId"], server["spanId"])
        self.assertEqual(attempt["parentSpanId"], server["spanId"])
        self.assertEqual(server["_resource"]["service.name"], {"stringValue": "geogate-test"})
        self.assertEqual(server["name"], "POST /v1/chat/completions")

        sa = attrs(server)
        self.assertEqual(sa["http.request.method"], "POST")
        self.assertEqual(sa["url.path"], "/v1/chat/completions")
        self.assertEqual(sa["http.response.status_code"], 200)
        self.assertEqual(sa["geogate.region"], "eu-west")

        ra = attrs(routing)
        self.assertEqual(ra["geogate.residency.rule"], "eu-only")
        self.assertEqual(ra["geogate.residency.allowed_regions"], "eu-west")
        self.assertEqual(ra["geogate.region"], "eu-west")
        self.assertEqual(ra["geogate.backend"], "eu-1")
        self.assertEqual(ra["geogate.route.outcome"], "route")
        self.assertIn("geogate.route.why", ra)

        aa = attrs(attempt)
        self.assertEqual(aa["geogate.backend"], "eu-1")
        self.assertEqual(aa["geogate.region"], "eu-west")
        self.assertEqual(aa["http.response.status_code"], 200)
        self.assertEqual(aa["server.address"], "127.0.0.1")
        for s in (server, routing, attempt):
            self.assertLessEqual(int(server["startTimeUnixNano"]), int(s["startTimeUnixNano"]))
            self.assertLessEqual(int(s["endTimeUnixNano"]), int(server["endTimeUnixNano"]))

        # The backend got a traceparent of this trace whose parent is the
        # attempt span, the tracestate, and nothing of the client's own.
        heads = eu.received()
        self.assertEqual(len(heads), 1)
        tp = [v for k, v in heads[0]["headers"] if k.lower() == "traceparent"]
        ts = [v for k, v in heads[0]["headers"] if k.lower() == "tracestate"]
        self.assertEqual(len(tp), 1, heads[0]["headers"])
        m = TRACEPARENT_RE.match(tp[0])
        self.assertTrue(m, tp[0])
        self.assertEqual(m.group(1), CLIENT_TRACE)
        self.assertEqual(m.group(2), attempt["spanId"])
        self.assertEqual(m.group(3), "01")
        self.assertEqual(ts, ["k=v"])

    def test_stream_ttft_event_failover_and_new_trace(self):
        collector = Collector().start(self)
        bad = self.start_sim("eu-bad", "eu-west")
        eu = self.start_sim("eu-1", "eu-west")
        cfg = self.config(collector.url, bad, eu)
        # eu-bad is preferred (reserved) and answers 500 once the gateway
        # runs: the first attempt fails, the second serves. It takes ten
        # failed probes to leave rotation, and outlier detection more than
        # the two failures the test causes.
        cfg.backends[0]["tier"] = "reserved"
        cfg.health = {"interval_ms": 500, "timeout_ms": 200, "unhealthy_threshold": 10,
                      "outlier_consecutive_failures": 5}
        # Neither has a TTFT sample and eu-1 may probe a few ms closer: without
        # a tie_ms wider than any loopback rtt difference, one request in 16
        # would go first to eu-1 to measure it (exploration, routing.md step
        # 6) and make one attempt instead of two.
        cfg.routing = {"latency_slack_ms": 1000, "tie_ms": 100}
        gw = self.start_gateway(cfg)
        gw.wait_backend("eu-bad")
        gw.wait_backend("eu-1")
        bad.control("error500")

        # No traceparent, and an invalid one: each starts a new trace, and
        # no garbage goes upstream.
        for extra in ({}, {"traceparent": "00-zz-garbage-01"}):
            with SseStream(gw.url, "/v1/chat/completions", chat_body(MODEL, stream=True),
                           headers=extra) as s:
                self.assertEqual(s.status, 200)
                list(s.events())
        self.assertTrue(wait_until(lambda: sum(1 for s in collector.spans if s["kind"] == 2) >= 2,
                                   timeout=10))
        servers = [s for s in collector.spans if s["kind"] == 2]
        self.assertEqual(len({s["traceId"] for s in servers}), 2)
        for server in servers:
            self.assertNotIn("parentSpanId", server)
            spans = collector.trace(server["traceId"])
            attempts = sorted((s for s in spans if s["kind"] == 3),
                              key=lambda s: attrs(s)["geogate.attempt"])
            self.assertEqual(len(attempts), 2, spans)
            self.assertEqual(attrs(attempts[0])["geogate.backend"], "eu-bad")
            self.assertEqual(attrs(attempts[0])["http.response.status_code"], 500)
            self.assertEqual(attrs(attempts[0])["error.type"], "upstream_5xx")
            self.assertEqual(attempts[0]["status"]["code"], 2)
            self.assertNotEqual(attempts[0]["spanId"], attempts[1]["spanId"])
            served = attempts[-1]
            self.assertEqual(attrs(served)["geogate.backend"], "eu-1")
            events = [e["name"] for e in served.get("events", [])]
            self.assertEqual(events, ["geogate.first_token"])
        for head in bad.received() + eu.received():
            tp = [v for k, v in head["headers"] if k.lower() == "traceparent"]
            self.assertEqual(len(tp), 1)
            self.assertTrue(TRACEPARENT_RE.match(tp[0]), tp[0])
            self.assertNotIn("garbage", tp[0])

    def test_collector_down_keeps_serving_and_counts_drops(self):
        eu = self.start_sim("eu-1", "eu-west")
        down = f"http://127.0.0.1:{free_port()}"
        gw = self.start_gateway(self.config(down, eu))
        for _ in range(40):
            status, _, _ = post_json(gw.url, "/v1/chat/completions", chat_body(MODEL))
            self.assertEqual(status, 200)
        # Failed exports drop their batches; with a queue of 64 and 40
        # requests of 3 spans each, some are dropped at the queue too or
        # by failed exports, and every one is counted.
        def dropped():
            return (gw.metric("geogate_trace_spans_dropped_total", reason="export_failed") +
                    gw.metric("geogate_trace_spans_dropped_total", reason="queue_full"))
        self.assertTrue(wait_until(lambda: dropped() >= 120, timeout=10),
                        f"dropped {dropped()}")
        self.assertEqual(gw.metric("geogate_trace_spans_exported_total"), 0)

    def test_a_stalled_collector_does_not_hold_requests(self):
        # The collector accepts and reads every export and never answers:
        # an export waits export_timeout_ms (5 s here) before it fails. The
        # requests must not wait for it: the exporter runs apart from the
        # workers, and spans it has no room for are dropped and counted.
        collector = Collector(stall=True).start(self)
        self.addCleanup(collector.released.set)
        eu = self.start_sim("eu-1", "eu-west")
        cfg = self.config(collector.url, eu)
        cfg.tracing["export_timeout_ms"] = 5000
        gw = self.start_gateway(cfg)
        slowest = 0.0
        for _ in range(60):
            started = time.monotonic()
            status, _, _ = post_json(gw.url, "/v1/chat/completions", chat_body(MODEL))
            slowest = max(slowest, time.monotonic() - started)
            self.assertEqual(status, 200)
        # A generous bound: a request held by the export would take 5 s.
        self.assertLess(slowest, 2.0)
        self.assertTrue(wait_until(lambda: collector.connections >= 1, timeout=10))
        # 180 spans; at most one batch (64) in the stalled export and 64
        # queued: the rest are dropped at the queue, and counted.
        self.assertGreaterEqual(
            gw.metric("geogate_trace_spans_dropped_total", reason="queue_full"), 180 - 128)
        self.assertEqual(gw.metric("geogate_trace_spans_exported_total"), 0)

    def test_reload_turns_tracing_on_and_sampling_off(self):
        collector = Collector().start(self)
        eu = self.start_sim("eu-1", "eu-west")
        cfg = self.config(collector.url, eu)
        cfg.tracing = {}
        gw = self.start_gateway(cfg)
        post_json(gw.url, "/v1/chat/completions", chat_body(MODEL))
        # Off: the client's traceparent goes through untouched, no span is sent.
        incoming = f"00-{CLIENT_TRACE}-{CLIENT_PARENT}-01"
        post_json(gw.url, "/v1/chat/completions", chat_body(MODEL),
                  headers={"traceparent": incoming})
        tp = [v for k, v in eu.received()[-1]["headers"] if k.lower() == "traceparent"]
        self.assertEqual(tp, [incoming])

        cfg.tracing = {"enabled": True, "collector_url": collector.url, "batch_interval_ms": 50,
                       "sampling_ratio": 1.0}
        gw.write_config(cfg)
        gw.sighup()
        applied = lambda: len(re.findall(r'"component":"reload".*applied', gw.stderr_text()))
        wait_until(lambda: applied() >= 1)
        post_json(gw.url, "/v1/chat/completions", chat_body(MODEL))
        self.assertTrue(wait_until(lambda: len(collector.spans) >= 3, timeout=10))

        cfg.tracing["sampling_ratio"] = 0.0
        gw.write_config(cfg)
        gw.sighup()
        wait_until(lambda: applied() >= 2)
        before = len(collector.spans)
        post_json(gw.url, "/v1/chat/completions", chat_body(MODEL))
        # Unsampled, the context still goes upstream (flag 00) and no span is made.
        tp = [v for k, v in eu.received()[-1]["headers"] if k.lower() == "traceparent"]
        self.assertEqual(len(tp), 1)
        self.assertTrue(tp[0].endswith("-00"), tp[0])
        time.sleep(0.5)  # ten batch intervals: a span would have been exported
        self.assertEqual(len(collector.spans), before)

    # ------------------------------------------------------------- export --
    def traced_request(self, gw: Gateway, n: int) -> str:
        """One chat request in a client trace of its own; @return the trace id."""
        trace_id = f"{n:032x}"
        status, _, _ = post_json(gw.url, "/v1/chat/completions", chat_body(MODEL),
                                 headers={"traceparent": f"00-{trace_id}-{CLIENT_PARENT}-01"})
        self.assertEqual(status, 200)
        return trace_id

    def test_batches_share_one_keep_alive_connection(self):
        collector = Collector().start(self)
        eu = self.start_sim("eu-1", "eu-west")
        gw = self.start_gateway(self.config(collector.url, eu))
        traces = []
        for i in range(1, 6):
            traces.append(self.traced_request(gw, i))
            # Each request's spans go in a batch of their own (50 ms interval).
            self.assertTrue(wait_until(lambda: len(collector.trace(traces[-1])) >= 3, timeout=10))
        self.assertGreaterEqual(collector.requests, 5)
        self.assertEqual(collector.connections, 1)
        self.assertEqual(gw.metric("geogate_trace_spans_dropped_total"), 0)

    def test_export_resumes_after_the_collector_restarts(self):
        collector = Collector().start(self)
        eu = self.start_sim("eu-1", "eu-west")
        gw = self.start_gateway(self.config(collector.url, eu))
        before = self.traced_request(gw, 1)
        self.assertTrue(wait_until(lambda: len(collector.trace(before)) >= 3, timeout=10))
        self.assertEqual(collector.connections, 1)
        # The collector goes down and comes back on the same port: the kept
        # connection is dead, the next batch goes over a new one.
        collector.restart()
        after = [self.traced_request(gw, n) for n in (2, 3)]
        self.assertTrue(wait_until(lambda: all(len(collector.trace(t)) >= 3 for t in after),
                                   timeout=10), f"spans received: {len(collector.spans)}")
        self.assertGreaterEqual(collector.connections, 2)

    def test_https_collector_verified_against_the_ca_file(self):
        tls = make_tls_files()
        collector = Collector(tls=tls).start(self)
        eu = self.start_sim("eu-1", "eu-west")
        cfg = self.config(collector.url, eu)  # https://localhost:PORT
        cfg.tracing["ca_file"] = tls.ca_cert
        gw = self.start_gateway(cfg)
        trace_id = self.traced_request(gw, 1)
        self.assertTrue(wait_until(lambda: len(collector.trace(trace_id)) >= 3, timeout=10),
                        gw.stderr_text()[-2000:])
        self.assertIn("localhost", collector.sni)
        gw.stop()

        # Without the CA file the system's CAs do not know this certificate:
        # nothing is exported, every span is counted as dropped.
        del cfg.tracing["ca_file"]
        gw = self.start_gateway(cfg)
        got = len(collector.spans)
        self.traced_request(gw, 2)
        self.assertTrue(wait_until(
            lambda: gw.metric("geogate_trace_spans_dropped_total", reason="export_failed") >= 3,
            timeout=10))
        self.assertEqual(len(collector.spans), got)
        self.assertIn("certificate verify failed", gw.stderr_text())

    def shutdown_config(self, collector_url: str, sim: GpuSim, flush_ms: int) -> GatewayConfig:
        cfg = self.config(collector_url, sim)
        # Nothing is due before the shutdown: only the flush can send it.
        cfg.tracing.update({"batch_interval_ms": 60000, "flush_timeout_ms": flush_ms,
                            "export_timeout_ms": 30000})
        cfg.upstream = {"drain_delay_ms": 0, "drain_timeout_ms": 1000}
        return cfg

    def test_spans_queued_at_sigterm_are_flushed(self):
        collector = Collector().start(self)
        eu = self.start_sim("eu-1", "eu-west")
        gw = self.start_gateway(self.shutdown_config(collector.url, eu, 5000))
        traces = [self.traced_request(gw, n) for n in (1, 2)]
        time.sleep(0.2)
        self.assertEqual(collector.spans, [])  # still queued
        self.assertEqual(gw.terminate(timeout=15), 0)
        for t in traces:
            self.assertEqual(len(collector.trace(t)), 3, collector.spans)
        self.assertIn("shutdown: sent 6 queued span(s) to the collector", gw.stderr_text())

    def test_a_stalled_collector_does_not_hold_the_exit(self):
        collector = Collector(stall=True).start(self)
        eu = self.start_sim("eu-1", "eu-west")
        gw = self.start_gateway(self.shutdown_config(collector.url, eu, 500))
        self.traced_request(gw, 1)
        started = time.monotonic()
        # The collector would hold the export for 60 s, the export timeout
        # is 30 s: the flush's 500 ms bound is what ends it.
        rc = gw.terminate(timeout=20)
        elapsed = time.monotonic() - started
        self.assertEqual(rc, 0)
        self.assertLess(elapsed, 15)
        self.assertIn("dropped 3 (flush_timeout_ms 500 reached)", gw.stderr_text())

    def test_flush_timeout_zero_drops_at_once(self):
        collector = Collector().start(self)
        eu = self.start_sim("eu-1", "eu-west")
        gw = self.start_gateway(self.shutdown_config(collector.url, eu, 0))
        self.traced_request(gw, 1)
        self.assertEqual(gw.terminate(timeout=15), 0)
        self.assertEqual(collector.spans, [])
        self.assertIn("shutdown: sent 0 queued span(s) to the collector, dropped 3",
                      gw.stderr_text())


if __name__ == "__main__":
    unittest.main()
