"""What the bench scripts share: the config of a benchmark gateway (one
region, one backend per model, the residency rule "anywhere") and the
helpers that start, wait for and stop their processes.

Scripts in bench/*/ import it after `sys.path.insert(0, <repo>/bench)`, as
they do bench/results.py. Processes are stopped by their own PID only.
"""
from __future__ import annotations

import os
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from typing import Optional

# The TOML value writer of the integration tests' config builder (as
# bench/failover and bench/reload use that harness whole).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "integration"))
from gateway_harness import toml_value as _value  # noqa: E402
# One port picker for tests and benches: never the same port twice.
from harness import free_port  # noqa: E402,F401

# ---------------------------------------------------------------------------
# the gateway's config


def _table(header: str, keys: dict) -> str:
    return f"{header}\n" + "".join(f"{k} = {_value(v)}\n" for k, v in keys.items())


def gateway_config(edge: str, port: int, admin: int, backends: dict[str, int], *,
                   tls: Optional[tuple[int, str, str]] = None, limits: Optional[dict] = None,
                   upstream: Optional[dict] = None, health: Optional[dict] = None) -> str:
    """A one-worker gateway with its access log on and no geo database:
    a plain listener on `port`, with `tls` = (port, cert, key) a TLS listener
    too, the admin listener on `admin`, and per `backends` entry (name ->
    upstream port) a backend that serves the model of its name. `limits`,
    `upstream` and `health` are the keys of [gateway.limits],
    [gateway.upstream] and [health]."""
    parts = [_table("[gateway]", {"edge": edge, "workers": 1, "access_log": "access.log"}),
             _table("[[gateway.listeners]]", {"address": f"127.0.0.1:{port}"})]
    if tls:
        tls_port, cert, key = tls
        parts.append(_table("[[gateway.listeners]]", {"address": f"127.0.0.1:{tls_port}",
                                                      "tls": {"cert": cert, "key": key}}))
    parts.append(_table("[gateway.admin]", {"address": f"127.0.0.1:{admin}"}))
    for header, keys in (("[gateway.limits]", limits), ("[gateway.upstream]", upstream),
                         ("[health]", health)):
        if keys:
            parts.append(_table(header, keys))
    parts.append(_table("[geo]", {"unknown": "anywhere"}))
    parts.append(_table("[[regions]]", {"name": "r", "jurisdiction": "LOCAL",
                                        "location": {"lat": 50.11, "lon": 8.68}}))
    for name, up in backends.items():
        parts.append(_table("[[backends]]", {"name": name, "region": "r", "url": f"http://127.0.0.1:{up}",
                                             "models": [name], "gpu": "L4", "capacity": 1000000}))
    parts.append(_table("[[residency]]", {"name": "anywhere", "allow_regions": ["r"]}))
    return "\n".join(parts)


# ---------------------------------------------------------------------------
# processes


def self_signed_cert(directory: str) -> tuple[str, str]:
    """A self-signed EC P-256 certificate for localhost/127.0.0.1 in
    `directory`: (cert.pem, key.pem)."""
    cert, key = os.path.join(directory, "cert.pem"), os.path.join(directory, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key, "-out", cert,
                    "-days", "2", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                   check=True, capture_output=True, timeout=60)
    return cert, key


def _wait(ready, proc: subprocess.Popen, timeout: float, who: str, pause: float) -> bool:
    """Polls `ready()` until it holds (True) or `timeout` passes (False);
    RuntimeError if `proc` exits first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{who} exited during start-up (status {proc.returncode})")
        if ready():
            return True
        time.sleep(pause)
    return False


def wait_port(port: int, proc: subprocess.Popen, timeout: float = 20.0) -> None:
    """Until something accepts on 127.0.0.1:`port`; RuntimeError if `proc` exits first."""
    def accepts() -> bool:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return True
        except OSError:
            return False

    if not _wait(accepts, proc, timeout, proc.args[0], 0.05):
        raise RuntimeError(f"nothing listens on port {port} after {timeout:g} s")


def wait_ready(admin: int, proc: subprocess.Popen, timeout: float = 30.0) -> None:
    """Until the gateway's /readyz on admin port `admin` answers 200."""
    def ready() -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{admin}/readyz", timeout=1) as r:
                return r.status == 200
        except OSError:  # refused, or an HTTPError (503: not ready yet)
            return False

    if not _wait(ready, proc, timeout, "the gateway", 0.1):
        raise RuntimeError(f"the gateway did not become ready in {timeout:g} s")


def stop(proc: subprocess.Popen, sig: int = signal.SIGTERM, timeout: float = 20.0) -> None:
    """`sig` (SIGTERM), then SIGKILL if it has not exited within `timeout` s."""
    if proc.poll() is not None:
        return
    proc.send_signal(sig)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


def raise_nofile(want: int) -> int:
    """This process's open-file limit raised to `want` (or, not root, as far as
    the hard limit goes); the limit it now has."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= want:
        return soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, max(hard, want)))
        return want
    except (ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        return hard


# ---------------------------------------------------------------------------
# access logs during a measurement


class LogJanitor:
    """Keeps the access logs of a benchmark from growing the page cache: a
    thread that empties every file named `name` under `root` once it holds
    more than `limit` bytes, checking every `period` seconds.

    Why: on this project's 2-core machine (a Firecracker guest whose balloon
    reports freed memory to the host), a page cache that grows into pages it
    never had costs the writing thread up to 11 x more CPU per MiB than one
    whose pages are reused, and how much more depends on what the memory
    went through before; a host fault per such page is the mechanism that
    fits (bench/RESULTS.md, "Why geogate's CPU per request moved between
    runs").
    A long-running server's page cache does not grow: it reuses pages it
    reclaims. Emptied files give the same steady state to every contender.

    Only for files their writers opened with O_APPEND (geogate, NGINX, the
    HAProxy stdout that bench/peers' Proc opens), so that the next line lands
    at the new end instead of behind a hole. Use as a context manager."""

    def __init__(self, root: str, name: str = "access.log", limit: int = 4 << 20,
                 period: float = 0.25):
        self.root, self.name, self.limit, self.period = root, name, limit, period
        self.emptied = 0  # how many times a file was emptied
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="log-janitor", daemon=True)

    def _files(self) -> list[str]:
        return [os.path.join(d, self.name) for d, _, files in os.walk(self.root)
                if self.name in files]

    def sweep(self) -> None:
        """One pass: empty every file over the limit (gone or unreadable: skipped)."""
        for path in self._files():
            try:
                if os.path.getsize(path) > self.limit:
                    os.truncate(path, 0)
                    self.emptied += 1
            except OSError:
                pass

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            self.sweep()

    def __enter__(self) -> "LogJanitor":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
