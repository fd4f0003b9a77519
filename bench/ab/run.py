#!/usr/bin/env python3
"""A/B of the gateway's performance tricks (issue #19): per request, the
instructions (callgrind), heap allocations (callgrind's call counts of
malloc) and syscalls (strace -c) of the gateway process alone, for the
baseline build and one build per trick switched off.

Each trick has its switch in its own file, a compile definition:

  NO_TRY_SEND     proxy/stream.h       no sendmsg fast path before a write
  NO_BLOCK_CACHE  common/block_cache.h block-cache users go to malloc
  NO_BULK_QUEUE   common/bulk_queue.h  relays run from the ready queue

and one variant that is not a trick switched off but another reactor
(issue #20): Asio's io_uring backend for every socket, timer and
descriptor instead of epoll (BOOST_ASIO_HAS_IO_URING with
BOOST_ASIO_DISABLE_EPOLL, linked with liburing: Debian's liburing-dev). It
is no build option of geogate: with Boost 1.81 it breaks streams (see
bench/RESULTS.md, "io_uring backend A/B"), so only this A/B builds it.

  IO_URING        (Asio's config)      io_uring instead of epoll

Every variant is a Release build of `geogate` in build-ab/<variant>
(ccache, if CMAKE_CXX_COMPILER_LAUNCHER says so). The workload is fixed:
`--posts` non-streaming chat completions and `--streams` 64-token SSE
streams, each spread over `--conns` keep-alive connections that each send
their next request when the last answer is in, against gpusim with no
delays, one worker; phase `burst` is `--streams` more 64-token streams
from geogate-responder, each in one write (the client asks for the usage
chunk, as the wrk tool's burst row does); phase `tls` is `--tls-conns` new TLS
1.3 connections to the gateway's TLS listener, one small POST each
(Connection: close), each resuming the session of the one before it on
its client thread, as wrk --close does (it keeps its session through
SSL_clear): the cost of a resumed handshake, the row "new TLS
connections" of bench/compare. Counting instructions and syscalls, not time, makes the
figures independent of how loaded the machine is; the upstream's speed
does not enter them (only the gateway process is counted). Both phases
follow a warm-up, so start-up and first-touch costs are left out.

The `clock` tool counts the gateway's calls of libc's clock_gettime (how
often it reads the time; steady_clock and system_clock both come there)
with a perf uprobe, `perf stat -e probe_libc:clock_gettime`; the probe is
made once with `perf probe` if it is missing, which needs root.

callgrind counts user space only, and strace counts calls, not what each
costs in the kernel: an io_uring build moves work into the kernel (one
io_uring_enter submits and reaps many operations). The `wrk` tool measures
time instead: wrk (one thread, CPU 0) against the gateway and
geogate-responder upstreams (CPU 1), `--wrk-rows` rows (`post`: small
POSTs, 16-token answers; `burst`: 64-token SSE streams that arrive in one
write), `--wrk-conns` connections, `--duration` seconds after a 2 s
warm-up, in a fresh gateway per variant and round, the variants
interleaved (A, B, A, B, ...) for `--rounds` rounds. Per request: the
gateway's user and system CPU time (/proc/PID/stat utime and stime, every
thread), its time on CPU (/proc/PID/task/*/schedstat), and req/s; the
table gives the median over rounds of each. CPU per request moves least
when the machine is shared; req/s is what wrk saw and moves with the load.

  bench/ab/run.py                  # build what is missing, measure all
  bench/ab/run.py --variants base,NO_TRY_SEND --tools callgrind
  bench/ab/run.py --variants base,IO_URING --tools callgrind,strace,wrk
  bench/ab/run.py --variants base,commit:82b3d02   # this tree against a commit
  bench/ab/run.py --variants base,commit:82b3d02 --tools clock --phases post

A `commit:REV` variant is the Release build of another commit, checked out
in a git worktree under build-ab/ (the before/after A/B of a refactor).
"""

import argparse
import asyncio
import contextlib
import json
import os
import re
import statistics
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VARIANTS = ("base", "NO_TRY_SEND", "NO_BLOCK_CACHE", "NO_BULK_QUEUE", "IO_URING")
# Variants that are not a GEOGATE_AB_ compile definition: their CMake flags.
CMAKE_VARIANTS = {"IO_URING": ["-DCMAKE_CXX_FLAGS=-DBOOST_ASIO_HAS_IO_URING -DBOOST_ASIO_DISABLE_EPOLL",
                               "-DCMAKE_CXX_STANDARD_LIBRARIES=-luring"]}
WRK_DIR = os.path.join(ROOT, "bench", "wrk")
sys.path.insert(0, os.path.join(ROOT, "bench"))
from gatewaylib import LogJanitor, free_port, gateway_config, self_signed_cert, stop, wait_port  # noqa: E402  bench/gatewaylib.py
SSE_TOKENS = 64
#: Seconds a process may take until it listens (under callgrind, a while).
START_S = 120
#: Client threads of the tls phase, each with its own session to resume.
TLS_THREADS = 8


def config(port: int, admin: int, backends: dict[str, int],
           tls: tuple[int, str, str] | None = None) -> str:
    # Probes run on their own clock: rare, so that a slower variant does not
    # pay for more of them.
    return gateway_config("ab", port, admin, backends, upstream={"drain_delay_ms": 0}, tls=tls,
                          health={"interval_ms": 2000, "changing_interval_ms": 20, "healthy_threshold": 1})


def build_dir(variant: str) -> str:
    return os.path.join(ROOT, "build-ab", variant.lower().replace("_", "-").replace(":", "-"))


def gateway_binary(variant: str) -> str:
    d = build_dir(variant)
    for rel in (("server", "geogate"), ("gateway", "geogate")):  # gateway/: before the split
        if os.path.exists(os.path.join(d, *rel)):
            return os.path.join(d, *rel)
    return os.path.join(d, "server", "geogate")


def build(variant: str) -> None:
    d = build_dir(variant)
    src, flags = ROOT, []
    if variant.startswith("commit:"):
        src = d + "-src"
        if not os.path.exists(src):
            subprocess.run(["git", "-C", ROOT, "worktree", "add", "--detach", src,
                            variant.split(":", 1)[1]], check=True)
    elif variant in CMAKE_VARIANTS:
        flags = CMAKE_VARIANTS[variant]
    elif variant != "base":
        flags = [f"-DCMAKE_CXX_FLAGS=-DGEOGATE_AB_{variant}"]
    if not os.path.exists(os.path.join(d, "build.ninja")):
        subprocess.run(["cmake", "-S", src, "-B", d, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
                        "-DGEOGATE_TESTS=OFF", *flags], check=True, stdout=subprocess.DEVNULL)
    targets = ["geogate"] + (["geogate-gpusim", "geogate-responder"] if variant == "base" else [])
    subprocess.run(["cmake", "--build", d, "-j2", "--target", *targets], check=True)


def wait_healthy(port: int, proc: subprocess.Popen, timeout: float = 120) -> None:
    """Until both backends answer through the gateway (after their first probe)."""
    end = time.time() + timeout
    while True:
        try:
            drive(port, "fast", False, 1, 1)
            drive(port, "sse", True, 1, 1)
            drive(port, "burst", True, 1, 1)
            return
        except (RuntimeError, OSError):
            if time.time() > end or proc.poll() is not None:
                raise
            time.sleep(0.5)


# ---------------------------------------------------------------------------
# the client: `conns` keep-alive connections, requests one after the other


def body(model: str, stream: bool) -> bytes:
    b = {"model": model, "stream": stream, "max_tokens": 16 if not stream else SSE_TOKENS,
         "messages": [{"role": "user", "content": "Count."}]}
    if model == "burst":  # as the wrk tool's burst row: the client asks for the usage chunk too
        b["stream_options"] = {"include_usage": True}
    return json.dumps(b).encode()


async def one_conn(port: int, model: str, stream: bool, count: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    payload = body(model, stream)
    head = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: ab\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(payload)}\r\n\r\n").encode()
    for _ in range(count):
        writer.write(head + payload)
        status = await reader.readline()
        if b" 200 " not in status:
            raise RuntimeError(f"unexpected answer: {status!r}")
        length, chunked = None, False
        while (line := await reader.readline()) not in (b"\r\n", b""):
            k, _, v = line.decode().partition(":")
            if k.lower() == "content-length":
                length = int(v)
            elif k.lower() == "transfer-encoding" and "chunked" in v:
                chunked = True
        data = b""
        if chunked:
            while True:
                size = int((await reader.readline()).split(b";")[0], 16)
                chunk = await reader.readexactly(size + 2)
                if size == 0:
                    break
                data += chunk[:-2]
        else:
            data = await reader.readexactly(length)
        if stream and data.count(b"data:") < SSE_TOKENS:
            raise RuntimeError(f"short stream: {data[:200]!r}")
    writer.close()


def spread(total: int, parts: int) -> list[int]:
    """`total` requests over `parts` clients, as evenly as they go (none empty)."""
    return [n for n in (total // parts + (1 if i < total % parts else 0) for i in range(parts)) if n]


def drive(port: int, model: str, stream: bool, total: int, conns: int) -> None:
    async def run():
        await asyncio.gather(*(one_conn(port, model, stream, n) for n in spread(total, conns)))
    asyncio.run(run())


def tls_conns(port: int, total: int, threads: int) -> int:
    """`total` new TLS 1.3 connections with one POST each, over `threads`
    client threads that each resume their previous session; returns how many
    handshakes resumed one."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    payload = body("fast", False)
    head = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: ab\r\nContent-Type: application/json\r\n"
            f"Connection: close\r\nContent-Length: {len(payload)}\r\n\r\n").encode()
    resumed, errors = [0], []

    def one_thread(count: int) -> None:
        session = None
        try:
            for _ in range(count):
                with socket.create_connection(("127.0.0.1", port), timeout=60) as raw:
                    with ctx.wrap_socket(raw, server_hostname="localhost", session=session) as s:
                        s.sendall(head + payload)
                        answer = b""
                        while chunk := s.recv(65536):  # the gateway closes after the answer
                            answer += chunk
                        if not answer.startswith(b"HTTP/1.1 200"):
                            raise RuntimeError(f"unexpected answer: {answer[:100]!r}")
                        resumed[0] += s.session_reused
                        session = s.session  # the ticket came with the answer
        except (OSError, RuntimeError) as e:
            errors.append(e)

    ts = [threading.Thread(target=one_thread, args=(n,)) for n in spread(total, threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        raise RuntimeError(f"TLS client: {errors[0]}")
    return resumed[0]


# ---------------------------------------------------------------------------
# measuring


def parse_callgrind(path: str) -> tuple[int, int]:
    """(instructions, calls of malloc) of one callgrind dump."""
    names: dict[str, str] = {}
    total = mallocs = 0
    cfn = None
    with open(path, errors="replace") as f:
        for line in f:
            if line.startswith(("summary:", "totals:")):
                total = int(line.split()[1])
            elif line.startswith("cfn="):
                m = re.match(r"cfn=\((\d+)\)(?: (.*))?", line.strip())
                if m:
                    if m.group(2):
                        names[m.group(1)] = m.group(2)
                    cfn = names.get(m.group(1))
                else:
                    cfn = line.strip()[4:]
            elif line.startswith("fn="):
                m = re.match(r"fn=\((\d+)\)(?: (.*))?", line.strip())
                if m and m.group(2):
                    names[m.group(1)] = m.group(2)
            elif line.startswith("calls=") and cfn in ("malloc", "calloc", "realloc"):
                mallocs += int(line.split("=")[1].split()[0])
    return total, mallocs


def callgrind_control(*args: str) -> None:
    subprocess.run(["callgrind_control", *args], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)


def strace_attach(pid: int, out: str) -> subprocess.Popen:
    tids = ",".join(os.listdir(f"/proc/{pid}/task"))
    p = subprocess.Popen(["strace", "-c", "-f", "-o", out, "-p", tids], stderr=subprocess.DEVNULL)
    time.sleep(1.0)  # attached to every thread
    return p


def strace_total(path: str) -> int:
    with open(path) as f:
        for line in f:
            if line.rstrip().endswith("total"):
                return int(line.split()[3])
    raise RuntimeError(f"no total in {path}")


CLOCK_EVENT = "probe_libc:clock_gettime"


def libc_path(binary: str) -> str:
    out = subprocess.run(["ldd", binary], check=True, capture_output=True, text=True).stdout
    m = re.search(r"libc\.so\.6 => (\S+)", out)
    if not m:
        raise RuntimeError(f"{binary} links no libc.so.6: {out}")
    return os.path.realpath(m.group(1))


def clock_probe(binary: str) -> None:
    """The uprobe on libc's clock_gettime, made if missing (needs root)."""
    listed = subprocess.run(["perf", "probe", "-l"], capture_output=True, text=True).stdout
    if CLOCK_EVENT in listed:
        return
    subprocess.run(["perf", "probe", "-q", "-x", libc_path(binary), "clock_gettime"], check=True)


def perf_attach(pid: int, out: str) -> subprocess.Popen:
    p = subprocess.Popen(["perf", "stat", "-x", ",", "-e", CLOCK_EVENT, "-o", out, "-p", str(pid)],
                         stderr=subprocess.DEVNULL)
    time.sleep(1.0)  # attached to every thread
    return p


def perf_total(path: str) -> int:
    with open(path) as f:
        for line in f:
            fields = line.strip().split(",")
            if len(fields) > 2 and fields[2] == CLOCK_EVENT:
                return int(fields[0])
    raise RuntimeError(f"no {CLOCK_EVENT} count in {path}")


def measure(variant: str, tool: str, args, gpusim: str, work: str, tls: tuple[str, str]) -> dict:
    port, admin, up_fast, up_sse, up_burst, tls_port = (free_port() for _ in range(6))
    responder = os.path.join(build_dir("base"), "bench", "responder", "geogate-responder")
    sims = [subprocess.Popen([gpusim, "--listen", f"127.0.0.1:{p}", "--name", name, "--threads", "1",
                              "--rtt-ms", "0", "--idle-timeout-ms", "600000", "--models", name,
                              "--ttft-ms", "0", "--token-interval-ms", "0", "--tokens", str(tokens)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for p, name, tokens in ((up_fast, "fast", 16), (up_sse, "sse", SSE_TOKENS))]
    # The burst phase's upstream: the whole 64-token stream in one write.
    sims.append(subprocess.Popen([responder, "--listen", f"127.0.0.1:{up_burst}", "--name", "burst",
                                  "--model", "burst", "--answer", "stream", "--tokens", str(SSE_TOKENS),
                                  "--chunk-shape", args.chunk_shape],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    d = tempfile.mkdtemp(dir=work, prefix=f"{variant}-{tool}-")
    conf = os.path.join(d, "geogate.toml")
    with open(conf, "w") as f:
        f.write(config(port, admin, {"fast": up_fast, "sse": up_sse, "burst": up_burst},
                       (tls_port, *tls)))
    gw = [gateway_binary(variant), "--config", conf]
    if tool == "callgrind":
        gw = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={d}/cg.out",
              "--dump-instr=no", "--compress-strings=yes", *gw]
    log = open(os.path.join(d, "gateway.log"), "w")
    proc = subprocess.Popen(gw, cwd=d, stdout=log, stderr=log)
    rows = {}
    try:
        for p, sim in zip((up_fast, up_sse, up_burst), sims):
            wait_port(p, sim, timeout=START_S)
        wait_port(port, proc, timeout=START_S)
        wait_healthy(port, proc)
        # Warm-up: pools, caches and lazily built state, then counting starts.
        drive(port, "fast", False, args.conns * 4, args.conns)
        drive(port, "sse", True, args.conns * 2, args.conns)
        drive(port, "burst", True, args.conns * 2, args.conns)
        if "tls" in args.phases.split(","):
            tls_conns(tls_port, TLS_THREADS * 4, TLS_THREADS)
        for phase, model, stream, n in (("post", "fast", False, args.posts),
                                        ("sse", "sse", True, args.streams),
                                        ("burst", "burst", True, args.streams),
                                        ("tls", "fast", False, args.tls_conns)):
            if phase not in args.phases.split(","):
                continue

            def work_phase() -> None:
                if phase != "tls":
                    return drive(port, model, stream, n, args.conns)
                resumed = tls_conns(tls_port, n, TLS_THREADS)
                # Each client thread's first handshake is a full one; any
                # other would mix full handshakes into the figure.
                if resumed < n - len(spread(n, TLS_THREADS)):
                    raise RuntimeError(f"only {resumed} of {n} TLS handshakes resumed a session")
            if tool == "callgrind":
                callgrind_control("-z", str(proc.pid))
                work_phase()
                for f in os.listdir(d):
                    if f.startswith("cg.out."):
                        os.remove(os.path.join(d, f))
                callgrind_control("-d", str(proc.pid))
                dump = sorted(f for f in os.listdir(d) if f.startswith("cg.out."))[-1]
                ir, mallocs = parse_callgrind(os.path.join(d, dump))
                rows[phase] = {"instructions": ir / n, "allocations": mallocs / n}
            else:  # strace or clock: a counter attached for the phase
                attach, total, key = ((perf_attach, perf_total, "clock_reads") if tool == "clock"
                                      else (strace_attach, strace_total, "syscalls"))
                out = os.path.join(d, f"{tool}-{phase}.txt")
                counter = attach(proc.pid, out)
                work_phase()
                counter.send_signal(signal.SIGINT)
                counter.wait(timeout=30)
                rows[phase] = {key: total(out) / n}
    finally:
        stop(proc, timeout=60)  # SIGTERM, SIGKILL after a minute
        for s in sims:
            s.terminate()
            s.wait()
    return rows


# ---------------------------------------------------------------------------
# time: wrk against geogate-responder upstreams

WRK_ROWS = {  # row -> (backend, wrk script, request body)
    "post": ("fast", "post", {"model": "fast", "max_tokens": 16,
                              "messages": [{"role": "user", "content": "Count."}]}),
    "burst": ("sse", "sse", {"model": "sse", "stream": True, "max_tokens": SSE_TOKENS,
                             "stream_options": {"include_usage": True},
                             "messages": [{"role": "user", "content": "Count."}]}),
}


def proc_times(pid: int) -> tuple[float, float, int]:
    """(user s, system s) of the whole process, and its threads' time on CPU (ns)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    on_cpu = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                on_cpu += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    # fields[0] is the state (field 3): utime is field 14, stime 15
    return int(fields[11]) / tick, int(fields[12]) / tick, on_cpu


def busy_s() -> float:
    """CPU time (s, all cores) the machine spent not idle, from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (sum(v) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")


def run_wrk(port: int, row: str, seconds: float, conns: int, bodies: dict) -> dict:
    """One wrk run of `row` ("post", "burst", or either with ":CONNS")."""
    row, _, c = row.partition(":")
    conns = int(c) if c else conns
    _, script, _ = WRK_ROWS[row]
    cmd = ["taskset", "-c", "0", "wrk", "-t1", "-c", str(conns), "-d", f"{seconds}s", "--timeout", "10s",
           "-s", os.path.join(WRK_DIR, f"{script}.lua"), f"http://127.0.0.1:{port}/v1/chat/completions",
           "--", "--body", bodies[row]]
    if script == "sse":
        cmd += ["--min-events", str(SSE_TOKENS)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    m = re.search(r"^WRK_JSON (\{.*\})$", out, re.M)
    if not m:
        raise RuntimeError(f"no WRK_JSON line: {out[-2000:]}")
    r = json.loads(m.group(1))
    # Counted, not fatal: a variant that breaks answers is a result too.
    r["failed"] = r["status_errors"] + r["read_errors"] + r["write_errors"] + r["timeouts"] + r["short"]
    if r["requests"] == 0:
        raise RuntimeError(f"wrk {row}: no answer at all")
    return r


def measure_wrk(variant: str, args, work: str, up: dict, bodies: dict) -> dict:
    port, admin = free_port(), free_port()
    d = tempfile.mkdtemp(dir=work, prefix=f"{variant}-wrk-")
    conf = os.path.join(d, "geogate.toml")
    with open(conf, "w") as f:
        f.write(config(port, admin, {"fast": up["fast"], "sse": up["sse"], "burst": up["sse"]}))
    gw = ["taskset", "-c", "1", os.path.join(build_dir(variant), "server", "geogate"), "--config", conf]
    log = open(os.path.join(d, "gateway.log"), "w")
    proc = subprocess.Popen(gw, cwd=d, stdout=log, stderr=log)
    rows = {}
    try:
        wait_port(port, proc, timeout=START_S)
        wait_healthy(port, proc)
        for row in args.wrk_rows.split(","):
            warm = run_wrk(port, row, 2, args.wrk_conns, bodies)
            if proc.poll() is not None:
                rows[row] = {"crashed": 1.0, "failed": float(warm["failed"])}
                break
            u0, s0, c0 = proc_times(proc.pid)
            b0, t0 = busy_s(), time.monotonic()
            r = run_wrk(port, row, args.duration, args.wrk_conns, bodies)
            if proc.poll() is not None:  # died during the run: its times are gone
                rows[row] = {"crashed": 1.0, "failed": float(warm["failed"] + r["failed"])}
                break
            u1, s1, c1 = proc_times(proc.pid)
            b1, wall = busy_s(), time.monotonic() - t0
            n = r["requests"]
            rows[row] = {"user_us": (u1 - u0) / n * 1e6, "sys_us": (s1 - s0) / n * 1e6,
                         "cpu_us": (c1 - c0) / n / 1e3, "rps": n / (r["duration_us"] / 1e6),
                         "util": (c1 - c0) / 1e9 / wall, "machine_busy": (b1 - b0) / wall,
                         "failed": float(warm["failed"] + r["failed"]), "crashed": 0.0}
    finally:
        stop(proc, timeout=60)  # SIGTERM, SIGKILL after a minute
    return rows


def wrk_rounds(variants: list[str], args, work: str) -> dict:
    """Every variant once per round, in turn; per variant and row the list of rounds."""
    responder = os.path.join(build_dir("base"), "bench", "responder", "geogate-responder")
    up = {"fast": free_port(), "sse": free_port()}
    bodies = {}
    for row, (_, _, b) in WRK_ROWS.items():
        bodies[row] = os.path.join(work, f"body-{row}.json")
        with open(bodies[row], "w") as f:
            json.dump(b, f)
    ups = [subprocess.Popen(["taskset", "-c", "1", responder, "--listen", f"127.0.0.1:{up[name]}",
                             "--name", name, "--model", name, *flags],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
           for name, flags in (("fast", ["--answer", "json", "--tokens", "16"]),
                               ("sse", ["--answer", "stream", "--tokens", str(SSE_TOKENS),
                                        "--chunk-shape", args.chunk_shape]))]
    out = {v: {} for v in variants}
    out["load_average"] = [os.getloadavg()[0]]
    try:
        for p, u in zip(up.values(), ups):
            wait_port(p, u, timeout=START_S)
        # No access log grows the page cache (LogJanitor says why), unless
        # --logs-grow asks to see what that costs.
        with contextlib.nullcontext() if args.logs_grow else LogJanitor(work):
            for rnd in range(args.rounds):
                for v in variants:
                    for row, figs in measure_wrk(v, args, work, up, bodies).items():
                        out[v].setdefault(row, []).append(figs)
                        print(f"round {rnd + 1} {v} {row}: " + ", ".join(f"{k} {x:.2f}" for k, x in figs.items()),
                              file=sys.stderr, flush=True)
                out["load_average"].append(os.getloadavg()[0])
    finally:
        for u in ups:
            u.terminate()
            u.wait()
    return out


def print_wrk_table(variants: list[str], rounds: dict) -> None:
    base = variants[0]
    print(f"| variant | row | CPU µs/req (on CPU) | Δ | user µs/req | sys µs/req | Δ user+sys | req/s | Δ | "
          f"gateway CPU % | machine busy (cores) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    # Medians over the rounds the gateway survived; failures and crashes summed.
    med, broken = {}, {}
    for v in variants:
        med[v], broken[v] = {}, {}
        for row, rs in rounds[v].items():
            ok = [r for r in rs if not r["crashed"]]
            broken[v][row] = (sum(r["failed"] for r in rs), sum(r["crashed"] for r in rs), len(rs))
            if ok:
                med[v][row] = {k: statistics.median(r[k] for r in ok) for k in ok[0]}
    for v in variants:
        for row, m in med[v].items():
            if row not in med[base]:
                continue
            b = med[base][row]
            delta = (lambda k: "" if v == base else f"{(m[k] - b[k]) / b[k] * 100:+.1f} %")
            us = m["user_us"] + m["sys_us"]
            bus = b["user_us"] + b["sys_us"]
            dus = "" if v == base else f"{(us - bus) / bus * 100:+.1f} %"
            print(f"| {v} | {row} | {m['cpu_us']:.2f} | {delta('cpu_us')} | {m['user_us']:.2f} | "
                  f"{m['sys_us']:.2f} | {dus} | {m['rps']:,.0f} | {delta('rps')} | {m['util'] * 100:.0f} | "
                  f"{m['machine_busy']:.2f} |")
    print()
    for v in variants:
        for row, (failed, crashed, n) in broken[v].items():
            if failed or crashed:
                print(f"{v} {row}: {failed:.0f} failed or short answers, crashed in {crashed:.0f} of {n} rounds")
    la = rounds.get("load_average", [])
    if la:
        print("1-minute load average at the start and after each round: " + ", ".join(f"{x:.1f}" for x in la))
    print("Spread over rounds (min-max), CPU µs/req on CPU:")
    for v in variants:
        for row, rs in rounds[v].items():
            rs = [r for r in rs if not r["crashed"]]
            if not rs:
                continue
            xs = [r["cpu_us"] for r in rs]
            print(f"  {v} {row}: {min(xs):.2f}-{max(xs):.2f} ({(max(xs) - min(xs)) / statistics.median(xs) * 100:.1f} % "
                  f"of the median), req/s {min(r['rps'] for r in rs):,.0f}-{max(r['rps'] for r in rs):,.0f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--tools", default="callgrind,strace",
                    help="callgrind, strace, clock (clock_gettime calls, a perf uprobe), wrk")
    ap.add_argument("--posts", type=int, default=2000)
    ap.add_argument("--streams", type=int, default=500)
    ap.add_argument("--conns", type=int, default=64)
    ap.add_argument("--tls-conns", type=int, default=400, help="tls phase: new TLS connections")
    ap.add_argument("--rounds", type=int, default=3, help="wrk tool: rounds, the variants interleaved")
    ap.add_argument("--duration", type=int, default=10, help="wrk tool: seconds per run")
    ap.add_argument("--phases", default="post,sse,burst",
                    help="callgrind, strace and clock: phases (post, sse; burst: the sse phase's streams "
                    "from geogate-responder in one write, the client asking for usage too; tls: "
                    "new TLS connections that resume a session, not run by default)")
    ap.add_argument("--wrk-rows", default="post,burst",
                    help="wrk tool: rows (post, burst; ROW:N for N connections instead of --wrk-conns)")
    ap.add_argument("--wrk-conns", type=int, default=64, help="wrk tool: connections")
    ap.add_argument("--chunk-shape", choices=("vllm", "openai"), default="vllm",
                    help="the burst streams' chunks (geogate-responder --chunk-shape): vllm, or "
                         "openai's with \"usage\":null in every chunk before the usage chunk")
    ap.add_argument("--no-build", action="store_true", help="use the build-ab/ binaries as they are")
    ap.add_argument("--logs-grow", action="store_true",
                    help="wrk tool: let the gateways' access logs grow for the whole run instead of "
                         "emptying them past 4 MiB (bench/gatewaylib.py LogJanitor)")
    ap.add_argument("--json", help="also write the figures to this file")
    ap.add_argument("--keep", action="store_true", help="keep the run directories (logs, dumps)")
    ap.add_argument("--without-base", action="store_true",
                    help="measure only the named variants (for --json, then --table)")
    ap.add_argument("--table", help="only print the table of these --json files (comma-separated), "
                    "measured one variant at a time")
    args = ap.parse_args()
    if args.table:
        results = {}
        for path in args.table.split(","):
            with open(path) as f:
                results.update(json.load(f))
        print_table([v for v in VARIANTS if v in results] +
                    [v for v in results if v not in VARIANTS], results)
        return 0
    variants = args.variants.split(",")
    if "base" not in variants and not args.without_base:
        variants.insert(0, "base")
    if not args.no_build:
        for v in variants:
            build(v)
    gpusim = os.path.join(build_dir("base"), "bench", "gpusim", "geogate-gpusim")
    work = tempfile.mkdtemp(prefix="geogate-ab-")
    tls = self_signed_cert(work)  # the tls phase's listener, one for every variant
    results = {}
    tools = args.tools.split(",")
    counting = [t for t in tools if t != "wrk"]
    if "clock" in counting:
        clock_probe(gateway_binary(variants[0]))
    if counting:
        for v in variants:
            results[v] = {p: {} for p in args.phases.split(",")}
            for tool in counting:
                for phase, figs in measure(v, tool, args, gpusim, work, tls).items():
                    results[v][phase].update(figs)
                print(f"{v} {tool}: {results[v]}", file=sys.stderr, flush=True)
    wrk = wrk_rounds(variants, args, work) if "wrk" in tools else None
    if args.json:
        with open(args.json, "w") as f:
            json.dump({**results, **({"wrk": wrk} if wrk else {})}, f, indent=1)
    if "base" in results:
        print_table(variants, results)
    if wrk:
        print()
        print_wrk_table(variants, wrk)
    if args.keep:
        print(f"run directories: {work}", file=sys.stderr)
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def print_table(variants: list[str], results: dict) -> None:
    base = results["base"]
    print(f"| variant | row | instructions/req | Δ | allocations/req | Δ | syscalls/req | Δ | "
          f"clock reads/req | Δ |")
    print(f"|---|---|---|---|---|---|---|---|---|---|")
    for v in variants:
        for phase in results[v]:
            cells = []
            for k in ("instructions", "allocations", "syscalls", "clock_reads"):
                x, b = results[v][phase].get(k), base[phase].get(k)
                if x is None:
                    cells += ["—", ""]
                    continue
                delta = "" if v == "base" or not b else f"{(x - b) / b * 100:+.1f} %"
                cells += [f"{x:,.0f}" if k == "instructions" else f"{x:.2f}", delta]
            print(f"| {v} | {phase} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    sys.exit(main())
