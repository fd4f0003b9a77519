"""A client that stops reading slows the backend down instead of filling the
gateway's memory (DESIGN.md: streams are relayed without buffering). The
gateway reads the next upstream bytes only once the client's socket took
the last ones, so a stalled reader stalls the generation behind it, within
what the kernel's socket buffers hold; when the client reads again, the
stream resumes and arrives whole."""

from __future__ import annotations

import json
import os
import socket
import time
import unittest

from gateway_harness import Gateway, GatewayConfig
from harness import GpuSim, wait_until

MODEL = "llama-3.1-8b"
# About 40 MB of SSE: far more than the socket buffers on the way
# (loopback's autotuned maximum is a few MB per socket), so a gateway that
# kept reading for a stalled client would have to hold most of it.
TOKENS = 300_000


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


class BackPressureTest(unittest.TestCase):

    def test_a_stalled_reader_stalls_the_backend_not_the_gateways_memory(self):
        sim = GpuSim(name="b1", models=[MODEL], ttft_ms=1, token_interval_ms=0,
                     tokens=TOKENS, max_tokens_cap=TOKENS).start(self)
        cfg = GatewayConfig(workers=1).region("r1")
        cfg.backends.append({"name": "b1", "region": "r1", "url": sim.url, "models": [MODEL],
                             "gpu": "L4", "provider": "p1", "tier": "on-demand",
                             "capacity": 64})
        gw = Gateway(cfg)
        gw.start(self)
        gw.wait_until_ready()
        rss_before = rss_bytes(gw.pid)

        body = json.dumps({"model": MODEL, "stream": True, "max_tokens": TOKENS,
                           "messages": [{"role": "user", "content": "go"}]}).encode()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.addCleanup(sock.close)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8192)  # before connect: no autotuning
        sock.settimeout(30)
        sock.connect(("127.0.0.1", gw.port))
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\n"
                     b"Content-Type: application/json\r\n"
                     + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        first = sock.recv(1024)
        self.assertTrue(first.startswith(b"HTTP/1.1 200 "), first)

        # Stop reading. The generation runs until the buffers on the way are
        # full, then stands still.
        def generated() -> int:
            return int(sim.stats()["tokens_generated"])

        last = [-1]

        def settled() -> bool:
            now = generated()
            still = now == last[0] and now > 0
            last[0] = now
            return still

        wait_until(settled, 20, interval=0.5, message="the generation to stand still")
        stalled_at = generated()
        self.assertLess(stalled_at, TOKENS // 2, "the backend ran on for a client that reads nothing")
        self.assertEqual(sim.stats()["streams_completed"], 0)
        if os.environ.get("GEOGATE_ALLOCATOR", "glibc") == "glibc":
            grown = rss_bytes(gw.pid) - rss_before
            self.assertLess(grown, 8 << 20, f"the gateway grew by {grown} bytes meanwhile")

        # Reading again: the rest of the stream comes, every token once, in order.
        # The 8 KiB buffer that made the stall quick would make the rest slow:
        # the gateway waits for each window update, which the client's kernel
        # delays, and on a loaded machine 40 MB did not arrive within the
        # deadline. The window scale was fixed at connect, so a larger buffer
        # now gives at most a 64 KiB window, enough.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        sock.setblocking(True)
        sock.settimeout(30)
        data = bytearray(first)
        deadline = time.monotonic() + 120
        while not data.endswith(b"0\r\n\r\n") and time.monotonic() < deadline:
            chunk = sock.recv(1 << 16)
            if not chunk:
                break
            data += chunk
        text = bytes(data)
        self.assertIn(b"data: [DONE]", text)
        self.assertEqual(text.count(b'"content":"'), TOKENS)
        self.assertGreater(generated(), stalled_at)
        wait_until(lambda: sim.stats()["streams_completed"] == 1, 10,
                   message="the backend to finish the stream")


if __name__ == "__main__":
    unittest.main()
