"""Reusable integration-test harness for geogate (Python 3 standard library only).

What is here:
  * binary locations from $GEOGATE_BIN_DIR (bin_path, GPUSIM_BIN, GATEWAY_BIN);
  * free_port(); Process, a child process that announces "listening on HOST:PORT",
    is killed by PID only (never by name) on cleanup, and keeps its stdout and
    stderr lines (stderr also in a file, for diagnostics); GpuSim, the GPU
    backend simulator with its control listener;
  * HTTP helpers: request(), get_json(), post_json(), send_raw(), port_refuses();
  * SSE: SseStream (raw sockets, http and https, per-event arrival times) and
    stream_chat(), a generator of (arrival_time_monotonic, data) pairs;
  * wait_until(), a bounded polling loop;
  * make_tls_files(), a throwaway CA and a localhost/127.0.0.1 server
    certificate made with the openssl CLI.

Tests using Process/GpuSim register cleanup with unittest:
    sim = GpuSim(ttft_ms=5).start(self)      # self.addCleanup(sim.stop) is done for you
or use a with-block:
    with GpuSim() as sim: ...
An atexit hook stops anything still running when the interpreter exits.
"""

from __future__ import annotations

import atexit
import http.client
import json
import os
import re
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Optional

_HERE = os.path.dirname(os.path.abspath(__file__))
_REPO = os.path.dirname(os.path.dirname(_HERE))

#: Build tree holding the binaries (CTest sets it; default: <repo>/build).
BIN_DIR = os.environ.get("GEOGATE_BIN_DIR") or os.path.join(_REPO, "build")


def bin_path(*parts: str) -> str:
    """Path of a built binary, e.g. bin_path("server", "geogate")."""
    return os.path.join(BIN_DIR, *parts)


GPUSIM_BIN = bin_path("bench", "gpusim", "geogate-gpusim")
GATEWAY_BIN = bin_path("server", "geogate")

#: Seconds a process gets to print its "listening on" line.
STARTUP_TIMEOUT = float(os.environ.get("GEOGATE_STARTUP_TIMEOUT", "15"))


# --------------------------------------------------------------------------
# ports and processes


_given_ports: "set[int]" = set()
_given_ports_lock = threading.Lock()


def free_port(host: str = "127.0.0.1") -> int:
    """A port that was free a moment ago and that this process has not handed
    out before (prefer port 0 + the listening line where a child can say).

    bind(0) alone may return a port it returned a moment ago whose taker has
    not bound it yet (a server's listeners picked in a row, upstreams still
    starting): any two calls meet about once in 14,000 (the kernel's odd half
    of the ephemeral range), and the two listeners then collide."""
    with _given_ports_lock:
        for _ in range(1000):
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.bind((host, 0))
                port = s.getsockname()[1]
            if port not in _given_ports:
                _given_ports.add(port)
                return port
    raise RuntimeError(f"no port on {host} that was not handed out before")


class ProcessError(RuntimeError):
    """A child process failed to start or died; the message has its stderr."""


_live: "set[Process]" = set()
_live_lock = threading.Lock()


@atexit.register
def _stop_all() -> None:
    with _live_lock:
        procs = list(_live)
    for p in procs:
        p.stop(timeout=1.0)


def _remove_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


_LISTENING = re.compile(r"^listening on (\S+):(\d+)\s*$")


class Process:
    """A child process that prints `listening on HOST:PORT` once it is ready.

    stdout and stderr are drained by a thread each: stdout lines are kept in
    .lines, stderr lines in .err_lines and in a temp file (stderr_text()).
    Cleanup signals only this process's own PID, and only while the Popen
    object has not reaped it, so the PID cannot be reused.
    """

    def __init__(self, args: list[str], *, name: Optional[str] = None,
                 env: Optional[dict[str, str]] = None, cwd: Optional[str] = None,
                 ready_timeout: float = STARTUP_TIMEOUT, wait_ready: bool = True):
        self.args = [str(a) for a in args]
        self.name = name or os.path.basename(self.args[0])
        self.env = env
        self.cwd = cwd
        self.ready_timeout = ready_timeout
        self.wait_ready = wait_ready
        self.popen: Optional[subprocess.Popen] = None
        self.host: Optional[str] = None
        self.port: Optional[int] = None
        self.lines: list[str] = []
        self.err_lines: list[str] = []
        self._cond = threading.Condition()
        self._closed = {"stdout": False, "stderr": False}
        self._stderr_file = None
        self._drains: list[threading.Thread] = []

    # -- lifecycle ---------------------------------------------------------

    def start(self, testcase=None) -> "Process":
        """Starts the process and waits for its listening line.

        With a unittest.TestCase, registers stop() (and a stderr dump on
        failure) via testcase.addCleanup.
        """
        fd, self.stderr_path = tempfile.mkstemp(prefix=f"{self.name}-", suffix=".stderr")
        if not os.environ.get("GEOGATE_KEEP_LOGS"):
            atexit.register(_remove_quietly, self.stderr_path)
        self._stderr_file = os.fdopen(fd, "w+b")
        env = dict(os.environ)
        if self.env:
            env.update(self.env)
        self.popen = subprocess.Popen(self.args, stdin=subprocess.DEVNULL,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      env=env, cwd=self.cwd, encoding="utf-8",
                                      errors="replace", bufsize=1)
        with _live_lock:
            _live.add(self)
        if testcase is not None:
            testcase.addCleanup(self._cleanup_for, testcase)
        self._drains = [threading.Thread(target=self._drain, args=(stream,), daemon=True,
                                         name=f"{self.name}-{stream}")
                        for stream in ("stdout", "stderr")]
        for t in self._drains:
            t.start()
        if self.wait_ready:
            m = self.wait_for_line(_LISTENING, self.ready_timeout)
            self.host, self.port = m.group(1).strip("[]"), int(m.group(2))
        self._on_started()
        return self

    def _on_started(self) -> None:
        """Hook for subclasses: runs after the listening line."""

    def _cleanup_for(self, testcase) -> None:
        self.stop()
        # unittest keeps the outcome privately; print our stderr when the test failed.
        outcome = getattr(testcase, "_outcome", None)
        if outcome is not None and getattr(outcome, "success", True) is False:
            text = self.stderr_text()
            if text:
                sys.stderr.write(f"\n--- stderr of {self.name} (pid {self.pid}) ---\n"
                                 f"{text[-8000:]}\n--- end ---\n")

    def _drain(self, stream: str) -> None:
        assert self.popen
        pipe = self.popen.stdout if stream == "stdout" else self.popen.stderr
        lines = self.lines if stream == "stdout" else self.err_lines
        for line in pipe:
            with self._cond:
                if stream == "stderr" and not self._stderr_file.closed:
                    self._stderr_file.write(line.encode("utf-8", "replace"))
                    self._stderr_file.flush()
                lines.append(line.rstrip("\n"))
                self._cond.notify_all()
        pipe.close()
        with self._cond:
            self._closed[stream] = True
            self._cond.notify_all()

    def wait_for_line(self, pattern, timeout: float = STARTUP_TIMEOUT,
                      stream: str = "stdout") -> re.Match:
        """Waits for a line of `stream` ("stdout" or "stderr") matching
        `pattern` (regex or compiled)."""
        regex = re.compile(pattern) if isinstance(pattern, str) else pattern
        lines = self.lines if stream == "stdout" else self.err_lines
        deadline = time.monotonic() + timeout
        seen = 0
        with self._cond:
            while True:
                for line in lines[seen:]:
                    m = regex.search(line)
                    if m:
                        return m
                seen = len(lines)
                if self._closed[stream]:
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(min(left, 0.2))
        rc = self.popen.poll() if self.popen else None
        self.stop()
        raise ProcessError(f"{self.name}: no {stream} line matching {regex.pattern!r} within "
                           f"{timeout}s (exit code {rc}); stdout={self.lines!r}\n"
                           f"stderr:\n{self.stderr_text()}")

    @property
    def pid(self) -> int:
        assert self.popen is not None
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def signal(self, sig: int) -> None:
        """Sends `sig` to this process only (no-op once it has exited)."""
        if self.alive():
            os.kill(self.pid, sig)

    def pause(self) -> None:
        """SIGSTOP: the process hangs with its sockets open (a black hole).

        Returns once every thread is stopped: kill() returns before the
        signal has reached them all, and a busy machine can let a request
        through in between."""
        self.signal(signal.SIGSTOP)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not self._all_threads_stopped():
            time.sleep(0.005)

    def _all_threads_stopped(self) -> bool:
        try:
            tasks = os.listdir(f"/proc/{self.pid}/task")
            for tid in tasks:
                with open(f"/proc/{self.pid}/task/{tid}/stat") as f:
                    # The state follows the parenthesised command name.
                    if f.read().rsplit(")", 1)[1].split()[0] not in ("T", "t"):
                        return False
        except (OSError, IndexError):
            return True  # gone: nothing left to wait for
        return True

    def resume(self) -> None:
        self.signal(signal.SIGCONT)

    def kill(self) -> None:
        """SIGKILL, then reap."""
        self.signal(signal.SIGKILL)
        if self.popen is not None:
            try:
                self.popen.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass

    def terminate(self, timeout: float = 10.0) -> Optional[int]:
        """SIGTERM (after SIGCONT, in case it is paused); returns the exit code."""
        if self.popen is None:
            return None
        self.resume()
        self.signal(signal.SIGTERM)
        try:
            rc = self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
        self._join_drains()
        return rc

    def _join_drains(self) -> None:
        """After the process exited: waits until its last output lines are
        in `lines`, `err_lines` and the stderr file. The drain threads copy
        them from the pipes; without this wait, a test that reads stderr
        right after the exit could miss the last lines (its shutdown
        message), as it did under load."""
        for t in self._drains:  # unless a child of the process still holds a pipe
            t.join(timeout=2)

    def stop(self, timeout: float = 5.0) -> Optional[int]:
        """Terminates (then kills) the process; safe to call more than once."""
        if self.popen is None:
            return None
        rc = self.popen.poll()
        if rc is None:
            rc = self.terminate(timeout)
            if rc is None:
                self.kill()
                rc = self.popen.poll()
        with _live_lock:
            _live.discard(self)
        if self._stderr_file is not None and rc is not None:
            self._join_drains()
            with self._cond:
                self._stderr_file.close()  # stderr_text() reads by path
        return rc

    def stderr_text(self) -> str:
        if self._stderr_file is None:
            return ""
        if self.popen is not None and self.popen.poll() is not None:
            self._join_drains()
        try:
            with open(self.stderr_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def __enter__(self) -> "Process":
        if self.popen is None:
            self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


# --------------------------------------------------------------------------
# the GPU backend simulator


class GpuSim(Process):
    """geogate-gpusim on 127.0.0.1 port 0, always with a control listener.

    Keyword options map to flags: ttft_ms=5 -> --ttft-ms 5, models=["a","b"] ->
    --models a,b, log_requests=True -> --log-requests (False/None are left out).
    tls=TlsFiles serves HTTPS with that certificate.
    """

    def __init__(self, *, name: str = "gpusim", region: str = "local",
                 tls: Optional["TlsFiles"] = None, binary: str = GPUSIM_BIN,
                 extra_args: tuple = (), **options: Any):
        args = [binary, "--listen", "127.0.0.1:0", "--control", "127.0.0.1:0",
                "--name", name, "--region", region]
        if tls is not None:
            args += ["--tls-cert", tls.cert, "--tls-key", tls.key]
        for key, value in options.items():
            flag = "--" + key.replace("_", "-")
            if value is None or value is False:
                continue
            if value is True:
                args.append(flag)
            elif isinstance(value, (list, tuple)):
                args += [flag, ",".join(str(v) for v in value)]
            else:
                args += [flag, str(value)]
        args += list(extra_args)
        super().__init__(args, name=f"gpusim-{name}")
        self.backend_name = name
        self.region = region
        self.tls = tls
        self.control_port: Optional[int] = None

    def _on_started(self) -> None:
        m = self.wait_for_line(r"^control on (\S+):(\d+)\s*$")
        self.control_port = int(m.group(2))

    @property
    def url(self) -> str:
        """Base URL of the main listener, e.g. http://127.0.0.1:41234."""
        scheme = "https" if self.tls else "http"
        return f"{scheme}://127.0.0.1:{self.port}"

    @property
    def control_url(self) -> str:
        return f"http://127.0.0.1:{self.control_port}"

    def tls_context(self) -> Optional[ssl.SSLContext]:
        return self.tls.client_context() if self.tls else None

    def control(self, mode: Optional[str] = None, **settings: Any) -> dict:
        """POST /control: mode plus n, factor, rtt_ms, ttft_ms, token_interval_ms."""
        body = dict(settings)
        if mode is not None:
            body["mode"] = mode
        status, _, data = post_json(self.control_url, "/control", body)
        if status != 200:
            raise AssertionError(f"POST /control {body} -> {status} {data}")
        return data

    def settings(self) -> dict:
        return get_json(self.control_url, "/control")[2]

    def stats(self) -> dict:
        status, _, data = get_json(self.control_url, "/control/stats")
        if status != 200:
            raise AssertionError(f"GET /control/stats -> {status} {data}")
        return data

    def reset(self) -> None:
        """POST /control/reset: zeroes the counters, forgets the recorded heads."""
        post_json(self.control_url, "/control/reset", {})

    def received(self) -> list[dict]:
        """GET /control/requests: the heads of the last requests the simulator got
        (not /health), oldest first, each {"method", "target", "headers": [[name,
        value], ...]} with the headers as received. Needs record_requests=N."""
        status, _, data = get_json(self.control_url, "/control/requests")
        if status != 200:
            raise AssertionError(f"GET /control/requests -> {status} {data}")
        if not data["recording"]:
            raise AssertionError("gpusim was started without record_requests=N")
        return data["requests"]

    def health(self, timeout: float = 10.0) -> tuple[int, Any]:
        status, _, data = get_json(self.url, "/health", timeout=timeout,
                                   tls_context=self.tls_context())
        return status, data


# --------------------------------------------------------------------------
# HTTP


class InProcessServer:
    """A socketserver-based server a test runs in a thread of its own
    process (scripted backends): serve(server) once it is built, then
    start(testcase) runs it until the test ends."""

    def serve(self, server) -> None:
        server.daemon_threads = True
        self.server = server
        self.url = f"http://127.0.0.1:{server.server_address[1]}"
        self.thread = threading.Thread(target=server.serve_forever, daemon=True)

    def start(self, case):
        self.thread.start()
        case.addCleanup(self.stop)
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@dataclass
class _Target:
    scheme: str
    host: str
    port: int


def _split(url: str) -> _Target:
    u = urllib.parse.urlsplit(url)
    if u.scheme not in ("http", "https") or not u.hostname:
        raise ValueError(f"not an http(s) URL: {url}")
    port = u.port or (443 if u.scheme == "https" else 80)
    return _Target(u.scheme, u.hostname, port)


def insecure_tls_context() -> ssl.SSLContext:
    """A client context that verifies nothing (for tests that don't care)."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def _decode_body(headers, raw: bytes) -> Any:
    text = raw.decode("utf-8", "replace")
    ctype = (headers.get("content-type") or "").lower()
    if "json" in ctype or text[:1] in ("{", "["):
        try:
            return json.loads(text)
        except ValueError:
            pass
    return text


def request(url: str, method: str, path: str, body: Optional[bytes] = None,
            headers: Optional[dict] = None, timeout: float = 10.0,
            tls_context: Optional[ssl.SSLContext] = None) -> tuple[int, Any, Any]:
    """One request on a fresh connection -> (status, headers, parsed body).

    headers is an http.client.HTTPMessage (case-insensitive .get()); the body
    is parsed JSON when it is JSON, else text.
    """
    t = _split(url)
    if t.scheme == "https":
        conn = http.client.HTTPSConnection(t.host, t.port, timeout=timeout,
                                           context=tls_context or insecure_tls_context())
    else:
        conn = http.client.HTTPConnection(t.host, t.port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=dict(headers or {}))
        resp = conn.getresponse()
        raw = resp.read()
        return resp.status, resp.headers, _decode_body(resp.headers, raw)
    finally:
        conn.close()


def get_json(url: str, path: str, headers: Optional[dict] = None, timeout: float = 10.0,
             tls_context: Optional[ssl.SSLContext] = None) -> tuple[int, Any, Any]:
    """GET -> (status, headers, parsed json or text)."""
    return request(url, "GET", path, None, headers, timeout, tls_context)


def post_json(url: str, path: str, body: Any, headers: Optional[dict] = None,
              timeout: float = 10.0,
              tls_context: Optional[ssl.SSLContext] = None) -> tuple[int, Any, Any]:
    """POST a JSON body (a str/bytes body is sent as is) -> (status, headers, data)."""
    if isinstance(body, (bytes, bytearray)):
        data = bytes(body)
    elif isinstance(body, str):
        data = body.encode()
    else:
        data = json.dumps(body).encode()
    h = {"Content-Type": "application/json"}
    h.update(headers or {})
    return request(url, "POST", path, data, h, timeout, tls_context)


def _connect(url: str, timeout: float, tls_context: Optional[ssl.SSLContext]) -> socket.socket:
    t = _split(url)
    sock = socket.create_connection((t.host, t.port), timeout=timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if t.scheme == "https":
        ctx = tls_context or insecure_tls_context()
        sock = ctx.wrap_socket(sock, server_hostname=t.host)
    return sock


def abort_socket(sock: socket.socket) -> None:
    """Closes with a TCP RST (SO_LINGER 0), like a crashed client."""
    try:
        raw = sock
        if isinstance(sock, ssl.SSLSocket):
            # Skip close_notify: take the TCP socket back and reset it.
            raw = socket.socket(fileno=sock.detach())
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        raw.close()
    except OSError:
        pass


def send_raw(url: str, data: bytes, timeout: float = 5.0,
             tls_context: Optional[ssl.SSLContext] = None) -> bytes:
    """Writes raw bytes, reads until the peer closes or goes quiet; returns what came back."""
    sock = _connect(url, timeout, tls_context)
    out = b""
    try:
        sock.sendall(data)
        while True:
            try:
                chunk = sock.recv(65536)
            except (socket.timeout, ConnectionResetError):
                break
            if not chunk:
                break
            out += chunk
    finally:
        sock.close()
    return out


def port_refuses(host: str, port: int, timeout: float = 2.0) -> bool:
    """True when a TCP connect to host:port is refused (ECONNREFUSED)."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return False
    except ConnectionRefusedError:
        return True


def wait_until(predicate: Callable[[], Any], timeout: float = 10.0, interval: float = 0.05,
               message: str = "condition") -> Any:
    """Polls predicate() until it returns a truthy value (returned) or the time is up.

    Exceptions from the predicate count as "not yet". Raises AssertionError
    on timeout, with the last exception if any.
    """
    deadline = time.monotonic() + timeout
    last_error: Optional[BaseException] = None
    while True:
        try:
            value = predicate()
            if value:
                return value
        except Exception as e:  # noqa: BLE001 - retried until the deadline
            last_error = e
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {message}"
                                 + (f" (last error: {last_error!r})" if last_error else ""))
        time.sleep(interval)


# --------------------------------------------------------------------------
# SSE streaming


class HttpStatusError(Exception):
    """A streaming request answered with a non-200 status."""

    def __init__(self, status: int, headers: dict, body: Any):
        super().__init__(f"HTTP {status}: {body}")
        self.status, self.headers, self.body = status, headers, body


class IncompleteStream(ConnectionError):
    """The connection closed cleanly before the end of the response body."""


class SseStream:
    """A streaming POST over a raw socket (http or https).

    After construction .status and .headers (lower-case keys) are known.
    next_event() / events() give (arrival_time_monotonic, data) per SSE event,
    the time being when the event's last byte was received. A reset raises
    ConnectionResetError; a clean close mid-body raises IncompleteStream.
    """

    def __init__(self, url: str, path: str, body: Any, headers: Optional[dict] = None,
                 tls_context: Optional[ssl.SSLContext] = None, timeout: float = 10.0):
        data = body if isinstance(body, (bytes, bytearray)) else json.dumps(body).encode()
        t = _split(url)
        self.sock = _connect(url, timeout, tls_context)
        h = {"Host": f"{t.host}:{t.port}", "Content-Type": "application/json",
             "Accept": "text/event-stream", "Content-Length": str(len(data))}
        h.update(headers or {})
        head = f"POST {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in h.items())
        self.sock.sendall(head.encode() + b"\r\n" + bytes(data))
        self._raw = b""          # bytes received, not yet decoded
        self._text = b""         # decoded body bytes, not yet split into events
        self._chunked = False
        self._remaining: Optional[int] = None  # content-length left, when not chunked
        self._body_done = False
        self._chunk_left = 0     # bytes left in the current chunk (+2 for its CRLF)
        self._read_head()

    def _recv(self) -> bool:
        chunk = self.sock.recv(65536)
        if not chunk:
            return False
        self._raw += chunk
        return True

    def _read_head(self) -> None:
        while b"\r\n\r\n" not in self._raw:
            if not self._recv():
                raise IncompleteStream("connection closed before the response head")
        head, self._raw = self._raw.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        self.status = int(parts[1])
        self.headers: dict[str, str] = {}
        for line in lines[1:]:
            k, _, v = line.partition(":")
            self.headers[k.strip().lower()] = v.strip()
        self._chunked = "chunked" in self.headers.get("transfer-encoding", "").lower()
        if not self._chunked and "content-length" in self.headers:
            self._remaining = int(self.headers["content-length"])

    def _decode(self) -> None:
        """Moves complete body bytes from _raw to _text."""
        if not self._chunked:
            take = self._raw if self._remaining is None else self._raw[: self._remaining]
            self._text += take
            self._raw = self._raw[len(take):]
            if self._remaining is not None:
                self._remaining -= len(take)
                self._body_done = self._remaining == 0
            return
        while not self._body_done:
            if self._chunk_left == 0:
                if b"\r\n" not in self._raw:
                    return
                size_line, self._raw = self._raw.split(b"\r\n", 1)
                size = int(size_line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self._body_done = True  # trailers are ignored
                    return
                self._chunk_left = size + 2
            take = self._raw[: max(self._chunk_left - 2, 0)]
            self._text += take
            self._raw = self._raw[len(take):]
            self._chunk_left -= len(take)
            if self._chunk_left <= 2:
                if len(self._raw) < self._chunk_left:
                    return
                self._raw = self._raw[self._chunk_left:]
                self._chunk_left = 0

    def _pop_event(self) -> Optional[str]:
        text = self._text.replace(b"\r\n", b"\n")
        if b"\n\n" not in text:
            self._text = text
            return None
        event, self._text = text.split(b"\n\n", 1)
        data = [line[5:].lstrip(b" ") if line.startswith(b"data:") else None
                for line in event.split(b"\n")]
        return b"\n".join(d for d in data if d is not None).decode("utf-8", "replace")

    def next_event(self, timeout: Optional[float] = None) -> Optional[tuple[float, str]]:
        """The next (arrival_time, data), or None at the end of the body.

        `timeout` bounds each wait for bytes (socket.timeout when exceeded;
        the stream stays usable afterwards).
        """
        if timeout is not None:
            self.sock.settimeout(timeout)
        while True:
            self._decode()
            event = self._pop_event()
            if event is not None:
                return time.monotonic(), event
            if self._body_done:
                return None
            if not self._recv():
                if self._remaining is None and not self._chunked:
                    self._body_done = True  # body delimited by the close
                    continue
                raise IncompleteStream("connection closed in the middle of the body")

    def events(self, timeout: Optional[float] = None) -> Iterator[tuple[float, str]]:
        while True:
            ev = self.next_event(timeout)
            if ev is None:
                return
            yield ev

    def read_body(self) -> bytes:
        """The rest of the body (for non-200 answers)."""
        while not self._body_done:
            self._decode()
            if self._body_done or not self._recv():
                break
        self._decode()
        return self._text

    def close(self, abort: bool = False) -> None:
        """Closes the connection; abort=True resets it (RST) like a crashed client."""
        if abort:
            abort_socket(self.sock)
        else:
            try:
                self.sock.close()
            except OSError:
                pass

    def __enter__(self) -> "SseStream":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def stream_chat(url: str, body: Any, headers: Optional[dict] = None,
                tls_context: Optional[ssl.SSLContext] = None, timeout: float = 10.0,
                path: str = "/v1/chat/completions") -> Iterator[tuple[float, str]]:
    """Streams a request; yields (arrival_time_monotonic, event_data) as events arrive.

    `body` gets "stream": true unless it says otherwise. A non-200 answer
    raises HttpStatusError. The connection closes when the generator does.
    """
    if isinstance(body, dict):
        body = {"stream": True, **body}
    s = SseStream(url, path, body, headers, tls_context, timeout)
    try:
        if s.status != 200:
            raw = s.read_body()
            raise HttpStatusError(s.status, s.headers, _decode_body(s.headers, raw))
        yield from s.events()
    finally:
        s.close()


def chat_body(model: str = "llama-3.1-8b", content: str = "hello", **extra: Any) -> dict:
    """A minimal chat completions request body."""
    return {"model": model, "messages": [{"role": "user", "content": content}], **extra}


# --------------------------------------------------------------------------
# TLS


@dataclass
class TlsFiles:
    """A throwaway CA and a server certificate for localhost and 127.0.0.1."""
    directory: str
    ca_cert: str
    cert: str
    key: str

    def client_context(self) -> ssl.SSLContext:
        """A client context that trusts only this CA and checks the host name."""
        ctx = ssl.create_default_context(cafile=self.ca_cert)
        ctx.check_hostname = True
        return ctx

    def cleanup(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)


def make_tls_files(directory: Optional[str] = None, common_name: str = "localhost",
                   dns_names: tuple = ("localhost",),
                   ip_addresses: tuple = ("127.0.0.1",)) -> TlsFiles:
    """Makes ca.pem, server.pem and server.key (EC P-256) with the openssl CLI.

    Without `directory` a temp dir is made and removed at exit.
    """
    if directory is None:
        directory = tempfile.mkdtemp(prefix="geogate-tls-")
        atexit.register(shutil.rmtree, directory, True)
    os.makedirs(directory, exist_ok=True)
    p = lambda name: os.path.join(directory, name)  # noqa: E731
    san = ",".join([f"DNS:{d}" for d in dns_names] + [f"IP:{i}" for i in ip_addresses])
    with open(p("server.ext"), "w") as f:
        f.write(f"subjectAltName={san}\nbasicConstraints=CA:FALSE\n"
                "keyUsage=critical,digitalSignature,keyEncipherment\n"
                "extendedKeyUsage=serverAuth\n")
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]

    def run(*args: str) -> None:
        r = subprocess.run(["openssl", *args], capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            raise RuntimeError(f"openssl {' '.join(args)} failed:\n{r.stderr}")

    run("req", "-x509", *ec, "-keyout", p("ca.key"), "-out", p("ca.pem"), "-days", "2",
        "-subj", "/CN=geogate test CA",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    run("req", *ec, "-keyout", p("server.key"), "-out", p("server.csr"),
        "-subj", f"/CN={common_name}")
    run("x509", "-req", "-in", p("server.csr"), "-CA", p("ca.pem"), "-CAkey", p("ca.key"),
        "-set_serial", str(int.from_bytes(os.urandom(8), "big")), "-days", "2",
        "-extfile", p("server.ext"), "-out", p("server.pem"))
    return TlsFiles(directory, p("ca.pem"), p("server.pem"), p("server.key"))
