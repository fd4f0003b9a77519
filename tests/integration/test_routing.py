"""Backend selection with real processes (DESIGN.md §4 step 7, §7): the
lowest expected time to first token wins, traffic moves when that backend
slows down or fills up, and reserved capacity is used before on-demand.

Every assertion is on counts (which backend answered, gpusim counters,
gateway metrics), never on timings; loops are bounded and bounds generous."""

from __future__ import annotations

import collections
import contextlib
import unittest

from gateway_harness import Gateway, GatewayConfig
from harness import GpuSim, SseStream, chat_body, post_json, wait_until

MODEL = "llama-3.1-8b"


class RoutingTestCase(unittest.TestCase):
    def start_sim(self, name: str, rtt_ms: float, **kw) -> GpuSim:
        kw.setdefault("ttft_ms", 10)
        kw.setdefault("token_interval_ms", 10)
        kw.setdefault("tokens", 2)
        sim = GpuSim(name=name, models=[MODEL], rtt_ms=rtt_ms, **kw)
        sim.start(self)
        return sim

    def start_gateway(self, cfg: GatewayConfig, names: list[str]) -> Gateway:
        gw = Gateway(cfg)
        gw.start(self)
        gw.wait_until_ready()
        for name in names:
            gw.wait_backend(name, healthy=True)
        return gw

    def send(self, gw: Gateway, n: int, stream: bool = True) -> collections.Counter:
        """n short requests one after another -> Counter of answering backends.
        Streams by default: only streams teach the gateway a TTFT."""
        seen: collections.Counter = collections.Counter()
        for _ in range(n):
            if stream:
                with SseStream(gw.url, "/v1/chat/completions",
                               chat_body(MODEL, stream=True, max_tokens=2), timeout=30) as s:
                    self.assertEqual(s.status, 200)
                    data = [d for _, d in s.events(timeout=30)]
                    self.assertEqual(data[-1:], ["[DONE]"], data)
                    seen[s.headers.get("x-geogate-backend")] += 1
                continue
            status, headers, data = post_json(gw.url, "/v1/chat/completions",
                                              chat_body(MODEL, max_tokens=2))
            self.assertEqual(status, 200, data)
            seen[headers.get("x-geogate-backend")] += 1
        return seen

    @contextlib.contextmanager
    def fill(self, gw: Gateway, backend: str, n: int):
        """Long streams kept open until `backend` holds n of them (a stream
        the selector sends elsewhere, e.g. to measure another backend, stays
        open too). Yields the backends the streams went to."""
        streams = []
        try:
            for _ in range(n + 4):
                if sum(s.headers.get("x-geogate-backend") == backend for s in streams) == n:
                    break
                s = SseStream(gw.url, "/v1/chat/completions",
                              chat_body(MODEL, stream=True, max_tokens=2000), timeout=30)
                self.assertEqual(s.status, 200)
                streams.append(s)
            held = [s.headers.get("x-geogate-backend") for s in streams]
            self.assertEqual(held.count(backend), n, held)
            wait_until(lambda: gw.backend(backend)["inflight"] == n, 10,
                       message=f"{n} streams in flight to {backend}")
            yield held
        finally:
            for s in streams:
                s.close(abort=True)

    def wait_idle(self, gw: Gateway, name: str) -> None:
        wait_until(lambda: gw.backend(name)["inflight"] == 0, 10,
                   message=f"{name} to have nothing in flight")


class LatencyTest(RoutingTestCase):
    """Three regions 2, 30 and 90 ms away, no residency."""

    def setUp(self):
        self.near = self.start_sim("near", rtt_ms=2)
        self.mid = self.start_sim("mid", rtt_ms=30)
        self.far = self.start_sim("far", rtt_ms=90)
        cfg = (GatewayConfig().region("r-near").region("r-mid").region("r-far")
               .backend(self.near, "r-near", capacity=3)
               .backend(self.mid, "r-mid").backend(self.far, "r-far"))
        # A slower EWMA than the default so a scheduling hiccup of a loaded CI
        # machine (one slow sample) does not move the traffic by itself.
        cfg.routing = {"ewma_alpha": 0.1}
        self.gw = self.start_gateway(cfg, ["near", "mid", "far"])
        self.send(self.gw, 5)  # warm-up: first TTFT samples

    def test_the_closest_region_takes_the_traffic_until_its_ttft_rises(self):
        for sim in (self.near, self.mid, self.far):
            sim.reset()
        seen = self.send(self.gw, 40)
        self.assertGreaterEqual(seen["near"], 36, seen)
        self.assertGreaterEqual(self.near.stats()["requests_total"], 36)
        self.assertGreater(self.gw.metric("geogate_selections_total", outcome="latency"), 0)
        log = [e for e in self.gw.access_log() if e.get("backend") == "near"]
        self.assertTrue(any("runner-up mid ettft=" in str(e.get("route")) for e in log), log[-1:])

        # Its simulated TTFT rises far above the other regions' RTT: after at
        # most a few slow samples the traffic moves to the next region.
        self.near.control(ttft_ms=600)
        moved = False
        for _ in range(10):
            if self.send(self.gw, 1)["mid"]:
                moved = True
                break
        self.assertTrue(moved, "traffic never left the slowed region")
        seen = self.send(self.gw, 30)
        self.assertGreaterEqual(seen["mid"], 27, seen)

    def test_a_full_region_hands_the_traffic_to_the_next(self):
        with self.fill(self.gw, "near", 3) as held:
            self.assertEqual(held, ["near"] * 3)
            seen = self.send(self.gw, 12)
            self.assertGreaterEqual(seen["mid"], 11, seen)
            self.assertEqual(seen["near"], 0, seen)
            self.assertGreater(
                self.gw.metric("geogate_selections_total", outcome="runner_up_full"), 0)
            routes = [e.get("route") for e in self.gw.access_log() if e.get("backend") == "mid"]
            self.assertTrue(any("runner-up near" in str(r) and "lost on capacity" in str(r)
                                for r in routes), routes[-3:])
        self.wait_idle(self.gw, "near")
        seen = self.send(self.gw, 12)
        self.assertGreaterEqual(seen["near"], 11, seen)


class NonStreamingDurationTest(RoutingTestCase):
    """Two regions 2 and 40 ms away; the near one answers a long
    non-streaming request. Its duration is the whole generation, not a time
    to first token: it must not push streams away (DESIGN.md §8)."""

    def setUp(self):
        self.near = self.start_sim("near", rtt_ms=2, ttft_ms=10, token_interval_ms=5)
        self.far = self.start_sim("far", rtt_ms=40, ttft_ms=10, token_interval_ms=5)
        cfg = (GatewayConfig().region("r-near").region("r-far")
               .backend(self.near, "r-near").backend(self.far, "r-far"))
        self.gw = self.start_gateway(cfg, ["near", "far"])
        self.send(self.gw, 3)  # stream TTFT samples for the near region

    def test_a_long_non_streaming_request_does_not_move_streams(self):
        before = self.gw.backend("near")["ttft_ms"]
        # 300 tokens at 5 ms: 1.5 s before the first byte of the body.
        status, headers, data = post_json(self.gw.url, "/v1/chat/completions",
                                          chat_body(MODEL, max_tokens=300), timeout=30)
        self.assertEqual((status, headers["x-geogate-backend"]), (200, "near"), data)
        self.assertEqual(self.gw.backend("near")["ttft_ms"], before)
        seen = self.send(self.gw, 10)
        self.assertEqual(seen["near"], 10, seen)


class TierTest(RoutingTestCase):
    """A reserved and an on-demand backend at the same latency."""

    def setUp(self):
        self.res = self.start_sim("reserved", rtt_ms=5)
        self.od = self.start_sim("ondemand", rtt_ms=5)
        cfg = (GatewayConfig().region("r1")
               .backend(self.res, "r1", tier="reserved", capacity=3)
               .backend(self.od, "r1", tier="on-demand", capacity=64))
        # The prior for an unmeasured backend close to the real TTFT, so the
        # on-demand one is inside the latency window before its first sample;
        # a wide slack and a slow EWMA so a hiccup of a loaded CI machine
        # cannot make either look faster by more than the slack.
        cfg.routing = {"prior_ttft_ms": 10, "latency_slack_ms": 100, "ewma_alpha": 0.1}
        self.gw = self.start_gateway(cfg, ["reserved", "ondemand"])

    def test_reserved_takes_the_traffic_until_its_capacity_then_on_demand(self):
        # (At most one request goes to on-demand to measure it: exploration.)
        seen = self.send(self.gw, 20)
        self.assertGreaterEqual(seen["reserved"], 18, seen)
        self.assertGreaterEqual(self.gw.metric("geogate_selections_total", outcome="tier"), 17)
        routes = [e.get("route") for e in self.gw.access_log() if e.get("backend") == "reserved"]
        self.assertTrue(any("runner-up ondemand" in str(r) and "lost on tier" in str(r)
                            for r in routes), routes[-3:])

        with self.fill(self.gw, "reserved", 3):
            seen = self.send(self.gw, 12)
            self.assertEqual(seen["ondemand"], 12, seen)
            self.assertGreaterEqual(
                self.gw.metric("geogate_selections_total", outcome="runner_up_full"), 12)
        self.wait_idle(self.gw, "reserved")
        seen = self.send(self.gw, 12)
        self.assertGreaterEqual(seen["reserved"], 11, seen)
        # 18 + 3 held + 11 at least, counted by the backend itself.
        self.assertGreaterEqual(self.res.stats()["requests_total"], 32)


if __name__ == "__main__":
    unittest.main()
