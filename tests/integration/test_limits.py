"""Limits that keep one client (or one stray process) from hurting the others,
against the real gateway over loopback: a second instance on a listener's
address refuses to start; a slow or stalled request body ends in 408 within
gateway.limits.body_timeout_ms; idle keep-alive connections make room for new
clients under max_connections; max_connections_per_ip; half-open TLS
handshakes are closed in bounded time."""

from __future__ import annotations

import http.client
import json
import select
import socket
import subprocess
import time
import unittest

from gateway_harness import Gateway, GatewayConfig
from harness import (GATEWAY_BIN, GpuSim, SseStream, chat_body, free_port, make_tls_files,
                     post_json, wait_until)

MODEL = "llama-3.1-8b"


def read_until_close(sock: socket.socket, timeout: float) -> bytes:
    """Everything the peer sends until it closes (or `timeout` passes)."""
    deadline = time.monotonic() + timeout
    out = b""
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return out
        sock.settimeout(left)
        try:
            chunk = sock.recv(65536)
        except socket.timeout:
            return out
        except ConnectionResetError:
            return out
        if not chunk:
            return out
        out += chunk


def error_of(reply: bytes) -> tuple[int, str]:
    head, _, body = reply.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    return status, json.loads(body)["error"]["code"]


class LimitsTestCase(unittest.TestCase):
    def start_sim(self, name="b1", **kw) -> GpuSim:
        kw.setdefault("ttft_ms", 2)
        kw.setdefault("token_interval_ms", 1)
        kw.setdefault("tokens", 4)
        sim = GpuSim(name=name, models=[MODEL], **kw)
        sim.start(self)
        return sim

    def start_gateway(self, cfg: GatewayConfig) -> Gateway:
        gw = Gateway(cfg)
        gw.start(self)
        gw.wait_until_ready()
        return gw

    def completion(self, conn: http.client.HTTPConnection) -> int:
        conn.request("POST", "/v1/chat/completions", json.dumps(chat_body(MODEL)),
                     {"Content-Type": "application/json"})
        r = conn.getresponse()
        r.read()
        return r.status


class SecondInstanceTest(LimitsTestCase):
    def config_on(self, sim: GpuSim, port: int) -> GatewayConfig:
        cfg = GatewayConfig().region("r1").backend(sim, "r1")
        cfg.listeners[0]["address"] = f"127.0.0.1:{port}"
        return cfg

    def test_a_second_gateway_on_the_same_address_exits_with_a_clear_error(self):
        sim = self.start_sim()
        port = free_port()
        first = self.start_gateway(self.config_on(sim, port))
        # Same listener address, its own admin port (0): it must not start.
        second = Gateway(self.config_on(sim, port))
        proc = subprocess.Popen([GATEWAY_BIN, "--config", second.config_path],
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        try:
            out, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            self.fail(f"the second gateway kept running on 127.0.0.1:{port}; stdout={out!r}")
        self.assertNotEqual(proc.returncode, 0, err)
        self.assertIn(f"127.0.0.1:{port}", err)
        self.assertIn("already listening", err)
        self.assertNotIn("admin on", out)
        # The first one still serves every new connection.
        for _ in range(10):
            status, _, body = post_json(first.url, "/v1/chat/completions", chat_body(MODEL))
            self.assertEqual(status, 200, body)

    def test_a_restart_on_the_same_address_starts(self):
        # Connections the first process closed leave TIME_WAIT entries: they
        # must not count as "another process listens".
        sim = self.start_sim()
        port = free_port()
        first = self.start_gateway(self.config_on(sim, port))
        for _ in range(5):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            self.assertEqual(self.completion(conn), 200)
            conn.close()
        self.assertEqual(first.stop(), 0)
        again = self.start_gateway(self.config_on(sim, port))
        status, _, body = post_json(again.url, "/v1/chat/completions", chat_body(MODEL))
        self.assertEqual(status, 200, body)


if __name__ == "__main__":
    unittest.main()
