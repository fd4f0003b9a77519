#!/usr/bin/env python3
"""Time to first token, as a client sees it: bench/compare's TTFT probe.

    ttft_probe.py --port P [--tls] --duration S [--gap-ms 10] [--model probe]
                  [--header "K: V"]...

Sends streaming chat completions one after another on one keep-alive
connection (reopened if the server closes it) and measures, per request, the
time from just before the request is written to the arrival of the first
`data:` event. The first few probes warm the path and are not counted.
Prints one JSON line: {"samples", "errors", "ttft_us": [...]}.
Bounded by --duration; standard library only.
"""
from __future__ import annotations

import argparse
import json
import socket
import ssl
import sys
import time

WARMUP = 5


class Conn:
    def __init__(self, port: int, tls: bool):
        sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if tls:
            ctx = ssl.create_default_context()
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            sock = ctx.wrap_socket(sock, server_hostname="localhost")
        self.sock = sock
        self.buf = b""

    def _recv(self) -> None:
        data = self.sock.recv(65536)
        if not data:
            raise ConnectionError("closed")
        self.buf += data

    def exchange(self, request: bytes) -> tuple[int, float, bool]:
        """-> (status, seconds to the first data: event or -1, keep-alive)."""
        t0 = time.perf_counter()
        self.sock.sendall(request)
        first = -1.0
        while b"\r\n\r\n" not in self.buf:
            self._recv()
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        headers = {}
        for line in lines[1:]:
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip().lower()
        keep = headers.get("connection") != "close"
        body = b""
        if "chunked" in headers.get("transfer-encoding", ""):
            while True:
                while b"\r\n" not in self.buf:
                    self._recv()
                size_line, rest = self.buf.split(b"\r\n", 1)
                size = int(size_line.split(b";")[0], 16)
                while len(rest) < size + 2:
                    self._recv()
                    size_line, rest = self.buf.split(b"\r\n", 1)
                if size == 0:
                    self.buf = rest[2:]
                    break
                body += rest[:size]
                self.buf = rest[size + 2:]
                if first < 0 and b"data:" in body:
                    first = time.perf_counter() - t0
        else:
            length = int(headers.get("content-length", "0"))
            while len(self.buf) < length:
                self._recv()
                if first < 0 and b"data:" in self.buf:
                    first = time.perf_counter() - t0
            body, self.buf = self.buf[:length], self.buf[length:]
            if first < 0 and b"data:" in body:
                first = time.perf_counter() - t0
        return status, first, keep

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--tls", action="store_true")
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--gap-ms", type=float, default=10.0)
    ap.add_argument("--model", default="probe")
    ap.add_argument("--tokens", type=int, default=8)
    ap.add_argument("--header", action="append", default=[])
    args = ap.parse_args()

    body = json.dumps({"model": args.model, "stream": True, "max_tokens": args.tokens,
                       "messages": [{"role": "user", "content": "ttft probe"}]}).encode()
    head = ["POST /v1/chat/completions HTTP/1.1", f"Host: 127.0.0.1:{args.port}",
            "Content-Type: application/json", "Accept: text/event-stream",
            f"Content-Length: {len(body)}"] + args.header
    request = ("\r\n".join(head) + "\r\n\r\n").encode() + body

    samples: list[int] = []
    errors = 0
    done = 0
    conn = None
    deadline = time.monotonic() + args.duration
    while time.monotonic() < deadline:
        try:
            if conn is None:
                conn = Conn(args.port, args.tls)
            status, first, keep = conn.exchange(request)
            done += 1
            if status != 200 or first < 0:
                errors += 1
            elif done > WARMUP:
                samples.append(int(first * 1e6))
            if not keep:
                conn.close()
                conn = None
        except (OSError, ValueError, IndexError) as e:
            errors += 1
            print(f"ttft_probe: {e!r}", file=sys.stderr)
            if conn is not None:
                conn.close()
            conn = None
            time.sleep(0.05)
        time.sleep(args.gap_ms / 1000.0)
    if conn is not None:
        conn.close()
    print(json.dumps({"samples": len(samples), "errors": errors, "ttft_us": samples}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
