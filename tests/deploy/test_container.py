"""The container image, really built and run: the repository's Dockerfile
built with podman (no daemon), then `geogate --check` and the demo config
run inside the image as its non-root user, and a completion curled through
it from the host.

No registry but Debian's mirrors is reachable from CI, so the base image
`debian:12-slim` is made here: `debootstrap --variant=minbase bookworm`
into a directory, imported as localhost/debian:12-slim. The rootfs, the
image store and the base image are kept in the build directory
(GEOGATE_BIN_DIR/container/), so only the first run of a build tree pays
for debootstrap (~40 s).

The build stage is not compiled again inside the image: podman is given
the binary this build tree already made as the `build` stage
(`--build-context build=DIR`, DIR/src/build-release/server/geogate), and
builds the runtime stage of the same Dockerfile on top of it (its Debian
packages, the user, the entrypoint, the health check). Compiling geogate
from scratch inside the image takes 15 minutes and more on a 2-core CI
machine; GEOGATE_CONTAINER_FULL_BUILD=1 builds the build stage too.

Where podman cannot run containers here (not installed, no root and no
subordinate ids, a kernel or sandbox that refuses namespaces or mounts),
the test is skipped with podman's own error; tests/deploy/test_dockerfile.py
keeps checking the Dockerfile statically either way. Labelled `deploy`, so
scripts/test runs it once, in the normal build's phase."""
from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

from deploy_common import ROOT, bin_dir, geo_fixture, geogate_bin, make_tls_pair, need_tool

sys.path.insert(0, str(ROOT / "tests" / "integration"))
from harness import GpuSim, free_port, wait_until  # noqa: E402

BASE = "localhost/debian:12-slim"
IMAGE = "localhost/geogate:ci"
MIRROR = "http://deb.debian.org/debian"
# podman raises RLIMIT_NOFILE/NPROC of a container to the host's maximum by
# default; a runner without CAP_SYS_RESOURCE refuses that. These are plenty
# for the demo and lower than any runner's.
ULIMITS = ["--ulimit", "nofile=4096:4096", "--ulimit", "nproc=4096:4096"]


def log(msg: str) -> None:
    print(f"[container] {msg}", file=sys.stderr, flush=True)


class Podman:
    """podman with its own image store under the build directory, cgroupfs
    (CI has no systemd) and runc when installed (crun 1.8 refuses the hybrid
    cgroup layout some CI sandboxes have)."""

    def __init__(self, work: pathlib.Path):
        self.bin = need_tool("podman")
        self.work = work
        self.args = [self.bin, "--root", str(work / "storage"), "--runroot",
                     str(work / "run"), "--cgroup-manager", "cgroupfs"]
        runc = shutil.which("runc") or ("/usr/sbin/runc" if os.access("/usr/sbin/runc", os.X_OK) else None)
        if runc:
            self.args += ["--runtime", runc]

    def run(self, *args: str, timeout: float = 600, check: bool = True,
            input_bytes: bytes | None = None) -> subprocess.CompletedProcess:
        p = subprocess.run(self.args + list(args), capture_output=True, timeout=timeout,
                           input=input_bytes)
        if check and p.returncode != 0:
            raise AssertionError(f"podman {' '.join(args[:3])}... exited {p.returncode}:\n"
                                 f"{p.stderr.decode(errors='replace')[-4000:]}")
        return p

    def has_image(self, name: str) -> bool:
        return self.run("image", "exists", name, check=False).returncode == 0


def skip_unless_containers_run(podman: Podman) -> None:
    """Skips with podman's own words when this machine cannot run one."""
    if os.geteuid() != 0:
        user = os.environ.get("USER") or str(os.geteuid())
        ids = [l for f in ("/etc/subuid", "/etc/subgid") if os.path.exists(f)
               for l in open(f) if l.split(":")[0] == user]
        if len(ids) < 2:
            raise unittest.SkipTest(
                f"rootless podman needs subordinate ids for {user} in /etc/subuid and "
                "/etc/subgid (usermod --add-subuids/--add-subgids); none are set")
    # The smallest container there is: an empty image with a static shell
    # is not at hand, so the base image itself (built first).
    p = podman.run("run", "--rm", *ULIMITS, "--network", "none", BASE, "true", check=False,
                   timeout=120)
    if p.returncode != 0:
        raise unittest.SkipTest("this machine refuses to run a container: " +
                                p.stderr.decode(errors="replace").strip()[-600:])


def make_base_image(podman: Podman) -> None:
    """localhost/debian:12-slim from debootstrap, unless the store has it."""
    if podman.has_image(BASE):
        return
    if os.geteuid() != 0:
        raise unittest.SkipTest("debootstrap of the base image needs root (CI runs as root)")
    debootstrap = need_tool("debootstrap")
    rootfs = podman.work / "rootfs"
    started = time.monotonic()
    if not (rootfs / "etc" / "debian_version").exists():
        shutil.rmtree(rootfs, ignore_errors=True)
        p = subprocess.run([debootstrap, "--variant=minbase", "bookworm", str(rootfs), MIRROR],
                           capture_output=True, text=True, timeout=900)
        if p.returncode != 0:
            shutil.rmtree(rootfs, ignore_errors=True)
            raise AssertionError(f"debootstrap failed:\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
    tar = subprocess.run(["tar", "-C", str(rootfs), "--numeric-owner", "-c", "."],
                         capture_output=True, check=True, timeout=300).stdout
    podman.run("import", "--change", "CMD [\"bash\"]", "-", BASE, input_bytes=tar)
    log(f"base image {BASE} made in {time.monotonic() - started:.0f}s")


def demo_config(tmp: pathlib.Path, ports: dict, backends: dict) -> str:
    """examples/demo.toml as the container reads it at /etc/geogate: its
    files beside it, its ports free ones, its backends the simulators
    started on the host, the access log on stdout."""
    text = (ROOT / "examples" / "demo.toml").read_text()
    text = text.replace("../.demo/", "")
    text = re.sub(r'access_log = "[^"]*"', 'access_log = "-"', text)
    for old, new in ports.items():
        text = text.replace(f"127.0.0.1:{old}", f"127.0.0.1:{new}")
    for old, url in backends.items():
        text = text.replace(f"http://127.0.0.1:{old}", url)
    (tmp / "geo").mkdir()
    shutil.copy(geo_fixture("country_code"), tmp / "geo" / "demo.mmdb")
    make_tls_pair(tmp / "certs" / "edge.pem", tmp / "certs" / "edge.key")
    (tmp / "geogate.toml").write_text(text)
    # The image runs as 10001: the mounted directory must be readable to it.
    for p in [tmp, *tmp.rglob("*")]:
        p.chmod(0o755 if p.is_dir() else 0o644)
    return text


class ContainerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.work = bin_dir() / "container"
        cls.work.mkdir(parents=True, exist_ok=True)
        cls.podman = Podman(cls.work)
        make_base_image(cls.podman)
        skip_unless_containers_run(cls.podman)
        started = time.monotonic()
        cls.build_image()
        log(f"image {IMAGE} built in {time.monotonic() - started:.0f}s")

    @classmethod
    def build_image(cls):
        args = ["build", *ULIMITS, "--build-arg", f"DEBIAN_IMAGE={BASE}", "-t", IMAGE,
                "-f", str(ROOT / "Dockerfile")]
        with tempfile.TemporaryDirectory(prefix="geogate-image-") as stage:
            if os.environ.get("GEOGATE_CONTAINER_FULL_BUILD") != "1":
                target = pathlib.Path(stage) / "src" / "build-release" / "server"
                target.mkdir(parents=True)
                shutil.copy2(geogate_bin(), target / "geogate")
                args += ["--build-context", f"build={stage}"]
            cls.podman.run(*args, str(ROOT), timeout=3600)

    def test_image_runs_as_its_user_with_the_files_it_promises(self):
        p = self.podman.run("run", "--rm", *ULIMITS, "--network", "none", "--entrypoint", "sh",
                            IMAGE, "-c",
                            "id -u; id -g; geogate --version; test -x /usr/local/bin/geogate-reload-watch"
                            " && ls /usr/share/geogate/examples; command -v curl", timeout=120)
        out = p.stdout.decode().split()
        self.assertEqual(out[:2], ["10001", "10001"])
        self.assertIn("demo.toml", out)
        self.assertIn("/usr/bin/curl", out)
        cfg = json.loads(self.podman.run("image", "inspect", IMAGE).stdout)[0]["Config"]
        self.assertEqual(cfg["Entrypoint"],
                         ["/usr/local/bin/geogate", "--config", "/etc/geogate/geogate.toml"])
        self.assertEqual(cfg.get("StopSignal"), "SIGTERM")

    def test_check_and_the_demo_config_run_inside_the_image(self):
        sims = []
        name = f"geogate-ci-{os.getpid()}"
        with tempfile.TemporaryDirectory(prefix="geogate-container-") as d:
            tmp = pathlib.Path(d)
            try:
                backends = {}
                for old, (sim_name, region, model) in {
                        9101: ("eu-west-l4-1", "eu-west", "llama-3.1-8b"),
                        9102: ("us-east-h100-1", "us-east", "llama-3.1-70b"),
                        9103: ("ap-south-a100-1", "ap-south", "llama-3.1-8b")}.items():
                    sim = GpuSim(name=sim_name, region=region,
                                 models=["llama-3.1-8b", "llama-3.1-70b"], ttft_ms=2,
                                 token_interval_ms=1, tokens=4)
                    sim.start()
                    sims.append(sim)
                    backends[old] = sim.url
                ports = {8080: free_port(), 8443: free_port(), 9901: free_port()}
                demo_config(tmp, ports, backends)
                mount = ["-v", f"{tmp}:/etc/geogate:ro"]

                check = self.podman.run("run", "--rm", *ULIMITS, "--network", "none", *mount,
                                        IMAGE, "--check", check=False, timeout=120)
                self.assertEqual(check.returncode, 0, check.stderr.decode(errors="replace"))

                admin = f"http://127.0.0.1:{ports[9901]}"
                self.podman.run("run", "-d", "--name", name, *ULIMITS, "--network", "host",
                                "-e", f"GEOGATE_ADMIN_URL={admin}", *mount, IMAGE, timeout=120)

                def ready():
                    try:
                        with urllib.request.urlopen(admin + "/readyz", timeout=2) as r:
                            return r.status == 200
                    except OSError:
                        return False

                try:
                    wait_until(ready, 30, message="geogate in the container never became ready")
                except AssertionError:
                    logs = self.podman.run("logs", name, check=False)
                    raise AssertionError("not ready; container log:\n" +
                                         logs.stderr.decode(errors="replace")[-3000:])
                curl = need_tool("curl")
                body = json.dumps({"model": "llama-3.1-8b",
                                   "messages": [{"role": "user", "content": "hi"}]})
                out = subprocess.run(
                    [curl, "-sS", "-i", "--max-time", "10", "-H", "Content-Type: application/json",
                     "-d", body, f"http://127.0.0.1:{ports[8080]}/v1/chat/completions"],
                    capture_output=True, text=True, timeout=30)
                self.assertEqual(out.returncode, 0, out.stderr)
                head, _, payload = out.stdout.replace("\r\n", "\n").partition("\n\n")
                self.assertTrue(head.startswith("HTTP/1.1 200"), head)
                self.assertIn("x-geogate-edge: fra1", head.lower())
                self.assertEqual(json.loads(payload)["object"], "chat.completion", out.stdout)
                # Its HEALTHCHECK command, run where Docker would run it.
                hc = self.podman.run("exec", name, "sh", "-c",
                                     'curl -fsS -o /dev/null --max-time 2 "$GEOGATE_ADMIN_URL/readyz"',
                                     check=False, timeout=60)
                self.assertEqual(hc.returncode, 0, hc.stderr.decode(errors="replace"))
                # SIGTERM drains and exits 0 within the documented stop timeout.
                self.podman.run("stop", "-t", "45", name, timeout=120)
                state = json.loads(self.podman.run("inspect", name).stdout)[0]["State"]
                self.assertEqual(state["ExitCode"], 0, state)
            finally:
                self.podman.run("rm", "-f", name, check=False, timeout=120)
                for sim in sims:
                    sim.stop()


if __name__ == "__main__":
    unittest.main()
