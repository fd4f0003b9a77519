#!/usr/bin/env python3
"""Holds many connections open against a server: bench/compare's memory client.

    hold.py --port P --count N --mode idle|stream [--model M] [--header "K: V"]...
            [--timeout S] [--tls]

idle:   every connection makes one non-streaming request, reads the whole
        answer and then stays open, idle (a keep-alive client between requests).
stream: every connection starts one streaming request and keeps reading it;
        it counts once its first `data:` event has arrived.

Prints `READY {"ok": n, "failed": m}` once every connection is counted, then
holds them until stdin is closed (or says anything), or --timeout passes,
and exits after closing them all. Raises its own open-file limit.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from gatewaylib import raise_nofile  # noqa: E402  bench/gatewaylib.py


async def one(args, request: bytes, ready: asyncio.Event, state: dict, sem: asyncio.Semaphore):
    writer = None
    try:
        async with sem:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection("127.0.0.1", args.port, ssl=args.ssl), 30)
            writer.write(request)
            await writer.drain()
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 60)
            if b" 200 " not in head.split(b"\r\n", 1)[0] + b" ":
                raise ConnectionError(head.split(b"\r\n", 1)[0].decode("latin-1"))
            lower = head.lower()
            if args.mode == "idle":
                if b"transfer-encoding: chunked" in lower:
                    while True:
                        size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
                        await reader.readexactly(size + 2)
                        if size == 0:
                            break
                else:
                    length = int(lower.split(b"content-length:", 1)[1].split(b"\r\n", 1)[0])
                    await reader.readexactly(length)
            else:
                seen = b""
                while b"data:" not in seen:
                    chunk = await asyncio.wait_for(reader.read(65536), 60)
                    if not chunk:
                        raise ConnectionError("closed before the first token")
                    seen += chunk
        state["ok"] += 1
    except Exception as e:  # noqa: BLE001 - counted, the rest go on
        state["failed"] += 1
        if state["failed"] <= 3:
            print(f"hold: {e!r}", file=sys.stderr)
        if writer is not None:
            writer.close()
        writer = None
    finally:
        state["pending"] -= 1
        if state["pending"] == 0:
            ready.set()
    if writer is None:
        return
    try:
        while True:  # keep draining (a stream's tokens; nothing, when idle)
            if not await reader.read(65536):
                break
    except (OSError, asyncio.CancelledError):
        pass
    finally:
        writer.close()


async def main_async(args) -> int:
    body = {"model": args.model, "messages": [{"role": "user", "content": "hold"}]}
    if args.mode == "stream":
        body.update(stream=True, max_tokens=100000)
    else:
        body.update(max_tokens=16)
    data = json.dumps(body).encode()
    head = ["POST /v1/chat/completions HTTP/1.1", f"Host: 127.0.0.1:{args.port}",
            "Content-Type: application/json", f"Content-Length: {len(data)}"] + args.header
    request = ("\r\n".join(head) + "\r\n\r\n").encode() + data
    state = {"ok": 0, "failed": 0, "pending": args.count}
    ready = asyncio.Event()
    sem = asyncio.Semaphore(args.parallel)
    tasks = [asyncio.create_task(one(args, request, ready, state, sem)) for _ in range(args.count)]
    try:
        await asyncio.wait_for(ready.wait(), args.timeout)
    except asyncio.TimeoutError:
        pass
    print("READY " + json.dumps({"ok": state["ok"], "failed": state["failed"]}), flush=True)
    loop = asyncio.get_running_loop()
    try:
        await asyncio.wait_for(loop.run_in_executor(None, sys.stdin.readline), args.timeout)
    except asyncio.TimeoutError:
        pass
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--count", type=int, required=True)
    ap.add_argument("--mode", choices=("idle", "stream"), required=True)
    ap.add_argument("--model", default="llama-3.1-8b")
    ap.add_argument("--header", action="append", default=[])
    ap.add_argument("--parallel", type=int, default=256, help="connections being set up at once")
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--tls", action="store_true", help="TLS, the certificate not checked")
    args = ap.parse_args()
    args.ssl = None
    if args.tls:
        import ssl
        args.ssl = ssl.create_default_context()
        args.ssl.check_hostname = False
        args.ssl.verify_mode = ssl.CERT_NONE
    raise_nofile(args.count + 256)
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    sys.exit(main())
