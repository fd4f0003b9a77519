"""The processes bench/compare measures: the upstreams (gpusim instances,
geogate-responder and the static NGINX responder) and the contenders
(upstream direct, geogate, HAProxy, NGINX), each started pinned to a CPU set
with a config rendered from the templates next to this file.

Every contender exposes one port per *lane* (fast, tls, sse, burst, paced,
probe, long); a lane is one upstream. HAProxy and NGINX get one
frontend/server per lane, so they do no routing work the test does not
need; geogate serves all lanes on one plain and one TLS listener and routes
by model, with its geo database, residency rule, access log and metrics on.

Processes are stopped by their own PID only (never by name).
"""
from __future__ import annotations

import json
import os
import signal
import string
import subprocess
import sys
import time
import urllib.request
from typing import Optional

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import gatewaylib  # noqa: E402  bench/gatewaylib.py
from gatewaylib import free_port  # noqa: E402

LANES = ("fast", "tls", "sse", "burst", "paced", "probe", "long")
#: The model each lane's requests name; geogate routes on it.
MODELS = {"fast": "llama-3.1-8b", "tls": "llama-3.1-8b", "sse": "sse", "burst": "burst",
          "paced": "paced", "probe": "probe", "long": "long"}
#: Tokens per SSE response in the sse and burst lanes.
SSE_TOKENS = 64
#: The paced lane's decode step: every stream gets its next token on the next
#: tick of one grid shared by all of them.
PACED_STEP_MS = 2
#: NGINX's idle upstream keep-alive connections per worker (`keepalive`,
#: off unless set). geogate's pool is at its default (a backend's capacity,
#: unbounded in these configs) and HAProxy's is unbounded by default.
POOL = 1024
#: What every client sends: a documentation address the geo fixture puts in
#: DE (EU), so geogate looks it up and applies the EU residency rule.
CLIENT_XFF = "192.0.2.1"


class StartError(RuntimeError):
    pass


def render(template: str, dest: str, **values) -> str:
    with open(os.path.join(HERE, template)) as f:
        text = string.Template(f.read()).substitute({k: str(v) for k, v in values.items()})
    with open(dest, "w") as f:
        f.write(text)
    return dest


def nofile() -> int:
    """The open-file limit every server gets (bench/compare raises it first)."""
    import resource
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def user_line() -> str:
    # As root, NGINX workers would switch to `nobody` and lose access to the
    # run directory; keep them as the invoking user.
    return "user root root;" if os.geteuid() == 0 else ""


# ---------------------------------------------------------------------------
# /proc accounting


def process_tree(pid: int) -> list[int]:
    """pid and all its descendants (NGINX master + workers)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for tid in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{tid}/children") as f:
                    todo += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return out


def cpu_ns(pids: list[int]) -> int:
    """Time on CPU (ns) of every thread of `pids`, from /proc/PID/task/TID/schedstat."""
    total = 0
    for p in pids:
        try:
            tids = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{p}/task/{tid}/schedstat") as f:
                    total += int(f.read().split()[0])
            except (OSError, ValueError, IndexError):
                pass
    return total


def rss_kib(pids: list[int]) -> int:
    total = 0
    for p in pids:
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
        except OSError:
            pass
    return total


# ---------------------------------------------------------------------------
# processes


class Proc:
    """One child process pinned with `taskset -c CPUS`, output to a log file."""

    def __init__(self, name: str, args: list[str], cpus: str, log: str, cwd: Optional[str] = None):
        self.name, self.args, self.cpus, self.log_path, self.cwd = name, args, cpus, log, cwd
        self.popen: Optional[subprocess.Popen] = None

    @property
    def command(self) -> list[str]:
        return ["taskset", "-c", self.cpus] + self.args

    def start(self) -> "Proc":
        log = open(self.log_path, "ab")
        self.popen = subprocess.Popen(self.command, stdin=subprocess.DEVNULL, stdout=log,
                                      stderr=subprocess.STDOUT, cwd=self.cwd)
        log.close()
        return self

    @property
    def pid(self) -> int:
        assert self.popen is not None
        return self.popen.pid

    def tail(self, n: int = 20) -> str:
        try:
            with open(self.log_path, "rb") as f:
                return b"\n".join(f.read().splitlines()[-n:]).decode("utf-8", "replace")
        except OSError:
            return ""

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 10.0) -> None:
        if self.popen is not None:
            gatewaylib.stop(self.popen, sig, timeout)


def wait_port(port: int, proc: Proc, timeout: float = 20.0) -> None:
    try:
        gatewaylib.wait_port(port, proc.popen, timeout)
    except RuntimeError as e:
        raise StartError(f"{proc.name}: {e}:\n{proc.tail()}") from None


def make_tls(directory: str) -> tuple[str, str, str]:
    """A self-signed EC P-256 certificate for localhost/127.0.0.1: (cert, key, bundle)."""
    cert, key = gatewaylib.self_signed_cert(directory)
    bundle = os.path.join(directory, "bundle.pem")
    with open(bundle, "w") as out:
        out.write(open(cert).read() + open(key).read())
    return cert, key, bundle


# ---------------------------------------------------------------------------
# upstreams


#: A non-streamed chat.completion of the size gpusim sends for 16 tokens.
STATIC_BODY = ('{"id":"chatcmpl-static","object":"chat.completion","created":0,'
               '"model":"llama-3.1-8b","choices":[{"index":0,"message":{"role":"assistant",'
               '"content":"tok0 tok1 tok2 tok3 tok4 tok5 tok6 tok7 tok8 tok9 tok10 tok11 tok12 '
               'tok13 tok14 tok15"},"finish_reason":"length"}],"usage":{"prompt_tokens":6,'
               '"completion_tokens":16,"total_tokens":22}}')


class Upstreams:
    """The upstream of every lane, all pinned to `cpus`:
    fast  - non-streaming answers: geogate-responder (bench/responder/), gpusim
            with no delays, or the static NGINX responder (`fast_kind`);
    tls   - the same answers over TLS (only the "upstream direct" row uses
            it): the static NGINX responder, or gpusim when `fast_kind` is
            gpusim (geogate-responder has no TLS);
    sse   - 64-token SSE streams with no delays (gpusim: one write per token);
    burst - the same 64-token stream, whole, in one write: geogate-responder
            `--answer stream` (gpusim's bytes, built once), so the proxies and
            not the upstream are the limit;
    paced - 64 tokens on a shared 2 ms decode grid, one write each:
            geogate-responder `--answer events --step-ms 2` (gpusim with
            --decode-step-ms 2 delivered only half the grid's rate to 256
            streams on a slow VM, so every contender measured gpusim);
    probe - first token at once, then 5 ms apart (gpusim), for TTFT probes;
    long  - one token a second for a long time (gpusim), for the memory test.
    """

    def __init__(self, build: str, run_dir: str, cpus: str, fast_kind: str, tls: tuple,
                 chunk_shape: str = "vllm"):
        # chunk_shape: the sse and burst streams' chunks (--chunk-shape of
        # gpusim and geogate-responder): vllm's, or openai's with
        # "usage":null in every chunk before the usage chunk.
        self.chunk_shape = chunk_shape
        self.gpusim = os.path.join(build, "bench", "gpusim", "geogate-gpusim")
        self.responder = os.path.join(build, "bench", "responder", "geogate-responder")
        self.dir, self.cpus, self.fast_kind, self.tls = run_dir, cpus, fast_kind, tls
        self.ports: dict[str, int] = {}
        self.procs: dict[str, Proc] = {}

    def _sim(self, lane: str, *flags: str) -> None:
        port = free_port()
        args = [self.gpusim, "--listen", f"127.0.0.1:{port}", "--name", lane, "--threads", "1",
                "--rtt-ms", "0", "--idle-timeout-ms", "120000", "--models", MODELS[lane], *flags]
        self.procs[lane] = Proc(f"gpusim-{lane}", args, self.cpus,
                                os.path.join(self.dir, f"gpusim-{lane}.log")).start()
        self.ports[lane] = port

    def _responder(self, lane: str, *flags: str) -> None:
        port = free_port()
        args = [self.responder, "--listen", f"127.0.0.1:{port}", "--name", lane,
                "--model", MODELS[lane], *flags]
        self.procs[lane] = Proc(f"responder-{lane}", args, self.cpus,
                                os.path.join(self.dir, f"responder-{lane}.log")).start()
        self.ports[lane] = port

    def start(self) -> "Upstreams":
        cert, key, _ = self.tls
        if self.fast_kind == "gpusim":
            self._sim("fast", "--ttft-ms", "0", "--token-interval-ms", "0", "--tokens", "16")
            self._sim("tls", "--ttft-ms", "0", "--token-interval-ms", "0", "--tokens", "16",
                      "--tls-cert", cert, "--tls-key", key)
        elif self.fast_kind == "responder":
            self._responder("fast", "--answer", "json", "--tokens", "16")
        self._responder("burst", "--answer", "stream", "--tokens", str(SSE_TOKENS),
                        "--chunk-shape", self.chunk_shape)
        self._sim("sse", "--ttft-ms", "0", "--token-interval-ms", "0", "--tokens", str(SSE_TOKENS),
                  "--chunk-shape", self.chunk_shape)
        self._responder("paced", "--answer", "events", "--tokens", str(SSE_TOKENS),
                        "--step-ms", str(PACED_STEP_MS))
        self._sim("probe", "--ttft-ms", "0", "--token-interval-ms", "5", "--tokens", "8")
        self._sim("long", "--ttft-ms", "0", "--token-interval-ms", "1000", "--tokens", "100000",
                  "--max-tokens-cap", "1000000")
        for lane, port in self.ports.items():
            wait_port(port, self.procs[lane])
        if self.fast_kind != "gpusim":
            # The static NGINX responder: the TLS lane, and the fast lane
            # when it is its upstream.
            sdir = os.path.join(self.dir, "static")
            os.makedirs(sdir, exist_ok=True)
            static_ports = {"fast": free_port(), "tls": free_port()}
            conf = render("static-upstream.conf.in", os.path.join(sdir, "nginx.conf"),
                          user_line=user_line(), nofile=nofile(), dir=sdir,
                          port=static_ports["fast"], port_tls=static_ports["tls"],
                          tls_cert=cert, tls_key=key, body=STATIC_BODY)
            self.procs["static"] = Proc("static", ["nginx", "-p", sdir, "-c", conf, "-e",
                                                   os.path.join(sdir, "nginx-error.log")],
                                        self.cpus, os.path.join(sdir, "stdout.log")).start()
            self.ports["tls"] = static_ports["tls"]
            if self.fast_kind == "static":
                self.ports["fast"] = static_ports["fast"]
            for port in static_ports.values():
                wait_port(port, self.procs["static"])
        self._check_burst()
        return self

    def _check_burst(self) -> None:
        """The burst upstream must send what the proxies are meant to relay:
        SSE_TOKENS token events, then finish, usage and [DONE]."""
        body = json.dumps({"model": MODELS["burst"], "stream": True, "max_tokens": SSE_TOKENS,
                           "messages": [{"role": "user", "content": "Count to sixty-four."}]})
        req = urllib.request.Request(f"http://127.0.0.1:{self.ports['burst']}/v1/chat/completions",
                                     data=body.encode(), headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as r:
            text = r.read().decode()
        if text.count("data:") != SSE_TOKENS + 3 or not text.endswith("data: [DONE]\n\n"):
            raise StartError(f"the burst upstream sent an unexpected stream:\n{text[:500]}")

    def _proc(self, lane: str) -> Proc:
        return self.procs.get(lane) or self.procs["static"]

    def pids(self, lane: str) -> list[int]:
        return process_tree(self._proc(lane).pid)

    def all_pids(self) -> list[int]:
        return [p for proc in self.procs.values() for p in process_tree(proc.pid)]

    def commands(self) -> list[str]:
        return [" ".join(p.command) for p in self.procs.values()]

    def stop(self) -> None:
        for p in self.procs.values():
            p.stop(signal.SIGTERM if p.name != "static" else signal.SIGQUIT)


# ---------------------------------------------------------------------------
# contenders


class Contender:
    """Something wrk talks to. ports: lane -> port; pids(): what its CPU and RSS are."""
    key = ""
    label = ""

    def __init__(self) -> None:
        self.ports: dict[str, int] = {}
        self.procs: list[Proc] = []

    def url(self, lane: str) -> str:
        scheme = "https" if lane == "tls" else "http"
        return f"{scheme}://127.0.0.1:{self.ports[lane]}"

    def pids(self, lane: str = "fast") -> list[int]:
        return [p for proc in self.procs for p in process_tree(proc.pid)]

    def commands(self) -> list[str]:
        return [" ".join(p.command) for p in self.procs]

    def start(self) -> "Contender":
        return self

    def stop(self) -> None:
        for p in self.procs:
            p.stop()


class Direct(Contender):
    """The upstream itself: the physical limit. Its CPU is the lane's upstream."""
    key, label = "direct", "upstream direct"

    def __init__(self, upstreams: Upstreams):
        super().__init__()
        self.up = upstreams
        self.ports = dict(upstreams.ports)

    def pids(self, lane: str = "fast") -> list[int]:
        return self.up.pids(lane)

    def commands(self) -> list[str]:
        return []


class _Proxy(Contender):
    def __init__(self, run_dir: str, cpus: str, threads: int, upstreams: Upstreams, tls: tuple):
        super().__init__()
        self.dir = os.path.join(run_dir, f"{self.key}-{threads}")
        os.makedirs(self.dir, exist_ok=True)
        self.cpus, self.threads, self.up, self.tls = cpus, threads, upstreams, tls

    def _values(self) -> dict:
        cert, key, bundle = self.tls
        v = {"threads": self.threads, "dir": self.dir, "pool": POOL, "tls_cert": cert,
             "tls_key": key, "tls_bundle": bundle, "user_line": user_line(), "nofile": nofile()}
        for lane in LANES:
            v[f"up_{lane}"] = self.up.ports["fast" if lane == "tls" else lane]
            v[f"model_{lane}"] = MODELS[lane]
        return v


class Geogate(_Proxy):
    key, label = "geogate", "geogate"

    def __init__(self, *args, binary: str, geo_db: Optional[str], baseline: bool = False, **kw):
        if baseline:  # another build of geogate, the "before" of an A/B
            self.key, self.label = "geogate-before", "geogate before"
        super().__init__(*args, **kw)
        self.binary, self.geo_db = binary, geo_db

    def start(self) -> "Geogate":
        plain, tls, admin = free_port(), free_port(), free_port()
        self.ports = {lane: plain for lane in LANES}
        self.ports["tls"] = tls
        self.admin_port = admin
        if self.geo_db:
            geo = ("[geo]\n" f'database = "{self.geo_db}"\n' 'client_ip = "x-forwarded-for"\n'
                   'trusted_proxies = ["127.0.0.0/8"]\n' 'unknown = "anywhere"')
        else:
            geo = '[geo]\nunknown = "anywhere"'
        conf = render("geogate.toml.in", os.path.join(self.dir, "geogate.toml"), **self._values(),
                      port_fast=plain, port_tls=tls, port_admin=admin, geo_block=geo)
        proc = Proc("geogate", [self.binary, "--config", conf], self.cpus,
                    os.path.join(self.dir, "geogate.log")).start()
        self.procs = [proc]
        try:
            gatewaylib.wait_ready(admin, proc.popen, 30)
        except RuntimeError as e:
            self.stop()
            raise StartError(f"geogate: {e}:\n{proc.tail()}") from None
        return self


class Haproxy(_Proxy):
    """HAProxy; bare=True: no access log, X-Forwarded-For or request id."""
    key, label = "haproxy", "HAProxy"

    def __init__(self, *args, bare: bool = False, **kw):
        if bare:
            self.key, self.label = "haproxy-bare", "HAProxy bare"
        super().__init__(*args, **kw)
        self.bare = bare

    def _mode(self) -> dict:
        if self.bare:
            return {"log_global": "", "log_defaults": "", "forwardfor": "",
                    "request_id_defaults": "", "request_id_frontend": ""}
        return {"log_global": "log stdout format raw local0",
                "log_defaults": "log global\n    option httplog",
                "forwardfor": "option forwardfor",
                "request_id_defaults": "unique-id-format %{+X}o%ci:%cp_%fi:%fp_%Ts_%rt:%pid\n"
                                       "    unique-id-header X-Request-ID",
                "request_id_frontend": "http-response set-header X-Request-ID %[unique-id]"}

    def start(self) -> "Haproxy":
        self.ports = {lane: free_port() for lane in LANES}
        conf = render("haproxy.cfg.in", os.path.join(self.dir, "haproxy.cfg"), **self._values(),
                      **self._mode(), **{f"port_{lane}": p for lane, p in self.ports.items()})
        check = subprocess.run(["haproxy", "-c", "-f", conf], capture_output=True, text=True)
        if check.returncode != 0:
            raise StartError(f"haproxy -c rejected {conf}:\n{check.stdout}{check.stderr}")
        # -db: stay in the foreground; the access log (stdout) goes to a file.
        proc = Proc("haproxy", ["haproxy", "-db", "-f", conf], self.cpus,
                    os.path.join(self.dir, "access.log")).start()
        self.procs = [proc]
        for port in self.ports.values():
            wait_port(port, proc)
        return self


class Nginx(_Proxy):
    """NGINX; bare=True: no access log, X-Forwarded-For or request id."""
    key, label = "nginx", "NGINX"

    def __init__(self, *args, bare: bool = False, **kw):
        if bare:
            self.key, self.label = "nginx-bare", "NGINX bare"
        super().__init__(*args, **kw)
        self.bare = bare

    def _mode(self) -> dict:
        if self.bare:
            return {"access_log": "access_log off;", "request_id_headers": ""}
        return {"access_log": f"access_log {self.dir}/access.log combined buffer=64k flush=1s;",
                "request_id_headers": "proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;\n"
                                      "    proxy_set_header X-Request-ID $request_id;\n"
                                      "    add_header X-Request-ID $request_id always;"}

    def start(self) -> "Nginx":
        self.ports = {lane: free_port() for lane in LANES}
        conf = render("nginx.conf.in", os.path.join(self.dir, "nginx.conf"), **self._values(),
                      **self._mode(), **{f"port_{lane}": p for lane, p in self.ports.items()})
        args = ["nginx", "-p", self.dir, "-c", conf, "-e", os.path.join(self.dir, "nginx-error.log")]
        check = subprocess.run(args + ["-t", "-q"], capture_output=True, text=True)
        if check.returncode != 0:
            raise StartError(f"nginx -t rejected {conf}:\n{check.stdout}{check.stderr}")
        proc = Proc("nginx", args, self.cpus, os.path.join(self.dir, "stdout.log")).start()
        self.procs = [proc]
        for port in self.ports.values():
            wait_port(port, proc)
        # Wait for every worker to be up, so the first run does not time their start.
        deadline = time.monotonic() + 10
        while len(process_tree(proc.pid)) < 1 + self.threads and time.monotonic() < deadline:
            time.sleep(0.05)
        return self

    def stop(self) -> None:
        for p in self.procs:
            p.stop(signal.SIGQUIT)  # graceful: the master stops its workers


def versions(geogate_bin: str) -> dict[str, str]:
    def run(args: list[str]) -> str:
        try:
            r = subprocess.run(args, capture_output=True, text=True, timeout=10)
        except OSError:
            return "not installed"
        return ((r.stdout or "") + (r.stderr or "")).strip()

    def grab(text: str, pattern: str) -> str:
        import re
        m = re.search(pattern, text)
        return m.group(1) if m else (text.splitlines() or ["?"])[0]

    return {"geogate": grab(run([geogate_bin, "--version"]), r"geogate\s+(\S+)"),
            "HAProxy": grab(run(["haproxy", "-v"]), r"version\s+(\S+)"),
            "NGINX": grab(run(["nginx", "-v"]), r"nginx/(\S+)"),
            "wrk": grab(run(["wrk", "-v"]), r"wrk\s+(\S+)"),
            "OpenSSL": grab(run(["openssl", "version"]), r"OpenSSL\s+(\S+)"),
            "Linux": os.uname().release}
