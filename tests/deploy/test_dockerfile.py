"""The Dockerfile, checked statically (test_container.py builds and runs
the image where podman can run containers; these checks hold everywhere):
every Debian package it installs exists in
Debian 12, every COPY source exists and is not excluded by .dockerignore,
the binary it copies is where the release preset builds it, it runs as a
non-root user, and HEALTHCHECK, STOPSIGNAL, EXPOSE, VOLUME and ENTRYPOINT
agree with geogate's defaults. When the binary is built, its shared
libraries must all come from packages the runtime stage installs."""
import json
import os
import pathlib
import re
import shlex
import shutil
import subprocess
import tempfile
import unittest

from deploy_common import ROOT, bin_dir

DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
SETUP = ROOT / "scripts" / "setup-debian.sh"
# In debian:12-slim already (Essential or pulled in by apt itself).
BASE_IMAGE_PACKAGES = {"libc6", "libgcc-s1", "libstdc++6"}


def instructions(text):
    """[(INSTRUCTION, arguments)] with continuation lines joined and
    comments dropped."""
    out, buf = [], ""
    for line in text.splitlines():
        if not buf and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if buf and line.lstrip().startswith("#"):
            continue  # a comment inside a continued instruction
        if line.rstrip().endswith("\\"):
            buf += line.rstrip()[:-1] + " "
            continue
        buf += line
        word, _, rest = buf.strip().partition(" ")
        out.append((word.upper(), rest.strip()))
        buf = ""
    return out


def stages(instrs):
    """[[(INSTRUCTION, args)], ...] split at FROM."""
    out = []
    for ins in instrs:
        if ins[0] == "FROM":
            out.append([])
        if out:
            out[-1].append(ins)
    return out


def shell_commands(run_args):
    """Split a RUN's shell text into simple commands (at && ; ||)."""
    return [shlex.split(c) for c in re.split(r"&&|\|\||;", run_args) if c.strip()]


def dockerignore_patterns():
    pats = []
    for line in DOCKERIGNORE.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        neg = line.startswith("!")
        pat = line[1:] if neg else line
        pats.append((neg, pat.strip("/")))
    return pats


def _pattern_regex(pat):
    rx = ""
    i = 0
    while i < len(pat):
        if pat.startswith("**/", i):
            rx += "(?:.*/)?"
            i += 3
        elif pat.startswith("**", i):
            rx += ".*"
            i += 2
        elif pat[i] == "*":
            rx += "[^/]*"
            i += 1
        elif pat[i] == "?":
            rx += "[^/]"
            i += 1
        else:
            rx += re.escape(pat[i])
            i += 1
    return re.compile(rx + "$")


def ignored(path, patterns):
    """Docker's rule: the last pattern matching the path or one of its
    parent directories decides."""
    parts = path.strip("/").split("/")
    result = False
    for neg, pat in patterns:
        rx = _pattern_regex(pat)
        if any(rx.match("/".join(parts[:n])) for n in range(1, len(parts) + 1)):
            result = not neg
    return result


class DockerfileTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.text = DOCKERFILE.read_text()
        cls.instrs = instructions(cls.text)
        cls.stages = stages(cls.instrs)
        cls.args = dict(a.split("=", 1) for w, a in cls.instrs if w == "ARG" and "=" in a)
        cls.final_stage = cls.stages[-1]

    def final(self, word):
        return [a for w, a in self.final_stage if w == word]

    def test_multi_stage_on_debian_12(self):
        self.assertGreaterEqual(len(self.stages), 2)
        for stage in self.stages:
            image = stage[0][1].split()[0]
            image = re.sub(r"\$\{(\w+)\}", lambda m: self.args.get(m.group(1), m.group(0)), image)
            self.assertRegex(image, r"^debian:(12|bookworm)(-slim)?$")

    def test_build_stage_uses_the_setup_script_and_the_release_preset(self):
        build = " ".join(a for w, a in self.stages[0] if w == "RUN")
        self.assertIn("setup-debian.sh --build-only", build)
        self.assertIn("cmake --preset release", build)
        self.assertIn("--target geogate", build)
        runtime = " ".join(self.final("RUN"))
        self.assertIn("setup-debian.sh --runtime", runtime)

    def packages(self):
        """Every package a RUN installs: the setup script's lists for the
        flags it is run with (asked from the script itself), and apt-get
        install arguments."""
        pkgs = {}
        for stage in self.stages:
            for word, args in stage:
                if word != "RUN":
                    continue
                for cmd in shell_commands(args):
                    script = next((c for c in cmd if c.endswith("setup-debian.sh")), None)
                    if script:
                        flags = [c for c in cmd[cmd.index(script) + 1:] if c.startswith("--")]
                        out = subprocess.run(["bash", str(SETUP), *flags, "--print"], check=True,
                                             capture_output=True, text=True).stdout
                        for p in out.split():
                            pkgs.setdefault(p, f"setup-debian.sh {' '.join(flags)}")
                    if "apt-get" in cmd and "install" in cmd:
                        for p in cmd[cmd.index("install") + 1:]:
                            if not p.startswith("-"):
                                pkgs.setdefault(p, "apt-get install")
        return pkgs

    def test_every_installed_package_exists_in_debian_12(self):
        apt_cache = shutil.which("apt-cache")
        os_release = pathlib.Path("/etc/os-release")
        if not apt_cache or not os_release.exists() or 'VERSION_ID="12"' not in os_release.read_text():
            raise unittest.SkipTest("needs a Debian 12 machine with apt-cache (CI is one)")
        pkgs = self.packages()
        self.assertIn("curl", pkgs, "HEALTHCHECK uses curl")
        # One call: apt-cache prints a record per package it knows.
        r = subprocess.run([apt_cache, "show", "--no-all-versions", *sorted(pkgs)], capture_output=True, text=True)
        known = set(re.findall(r"^Package: (\S+)$", r.stdout, re.M))
        if not known:
            self.fail("apt-cache knows no package at all: run apt-get update (scripts/setup-debian.sh does)")
        missing = {p: src for p, src in pkgs.items() if p not in known}
        self.assertEqual(missing, {}, "not Debian 12 packages (name: where installed)")

    def test_copy_sources_exist_and_are_in_the_build_context(self):
        patterns = dockerignore_patterns()
        copies = [a for w, a in self.instrs if w in ("COPY", "ADD")]
        self.assertTrue(copies)
        for args in copies:
            words = shlex.split(args)
            if any(w.startswith("--from=") for w in words):
                continue
            sources = [w for w in words if not w.startswith("--")][:-1]
            for src in sources:
                with self.subTest(src=src):
                    self.assertTrue((ROOT / src).exists(), f"COPY {src}: no such path in the repository")
                    self.assertFalse(ignored(src, patterns), f"COPY {src}: excluded by .dockerignore")

    def test_build_stage_sources_configure_on_their_own(self):
        """Only what the build stage COPYs, laid out as in the image, must be
        enough for `cmake --preset release` (a new add_subdirectory that the
        Dockerfile does not copy fails here). Configure only: no compile."""
        cmake = shutil.which("cmake")
        if not cmake:
            raise unittest.SkipTest("cmake is not installed")
        patterns = dockerignore_patterns()
        workdir = next(a for w, a in self.stages[0] if w == "WORKDIR")
        with tempfile.TemporaryDirectory() as tmp:
            root = pathlib.Path(tmp)
            for word, args in self.stages[0]:
                if word != "COPY":
                    continue
                *sources, dest = [w for w in shlex.split(args) if not w.startswith("--")]
                for src in sources:
                    target = root / (dest if dest not in (".", "./") else "")
                    if dest.endswith("/") or len(sources) > 1:
                        target = target / pathlib.Path(src).name
                    target.parent.mkdir(parents=True, exist_ok=True)
                    if (ROOT / src).is_dir():
                        shutil.copytree(ROOT / src, target, dirs_exist_ok=True,
                                        ignore=lambda d, names: [n for n in names if ignored(
                                            str((pathlib.Path(d) / n).relative_to(ROOT)), patterns)])
                    else:
                        shutil.copy(ROOT / src, target)
            self.assertTrue(workdir.startswith("/"))
            r = subprocess.run([cmake, "--preset", "release"], cwd=root, capture_output=True, text=True,
                               timeout=120)
            self.assertEqual(r.returncode, 0, r.stdout[-3000:] + r.stderr[-3000:])

    def test_dockerignore_keeps_build_trees_and_git_out(self):
        patterns = dockerignore_patterns()
        for path in (".git/config", "build/server/geogate", "build-release/x", "build-asan/x",
                     "tests/e2e/node_modules/openai/package.json", ".demo/geo/demo.mmdb"):
            self.assertTrue(ignored(path, patterns), f"{path} would be sent to the Docker daemon")

    def test_binary_comes_from_where_the_release_preset_builds_it(self):
        presets = json.loads((ROOT / "CMakePresets.json").read_text())
        release = next(p for p in presets["configurePresets"] if p["name"] == "release")
        workdir = next(a for w, a in self.stages[0] if w == "WORKDIR")
        build_dir = release["binaryDir"].replace("${sourceDir}", workdir)
        copied = [shlex.split(a) for w, a in self.final_stage if w == "COPY" and "--from=build" in a]
        self.assertIn([f"--from=build", f"{build_dir}/server/geogate", "/usr/local/bin/geogate"], copied)
        self.assertIn("add_executable(geogate", (ROOT / "server" / "CMakeLists.txt").read_text())

    def test_runs_as_a_non_root_user(self):
        users = self.final("USER")
        self.assertEqual(len(users), 1)
        user = users[0].split(":")[0]
        self.assertNotIn(user, ("root", "0", ""))
        if user.isdigit():
            run = " ".join(self.final("RUN"))
            self.assertRegex(run, rf"useradd [^&]*--uid {user}\b", "USER's uid is not created")

    def test_healthcheck_asks_readyz_on_the_default_admin_address(self):
        snapshot = (ROOT / "config" / "snapshot.h").read_text()
        admin = re.search(r'std::string address = "([\d.]+:\d+)"', snapshot).group(1)
        checks = self.final("HEALTHCHECK")
        self.assertEqual(len(checks), 1)
        self.assertIn("/readyz", checks[0])
        env = " ".join(self.final("ENV"))
        self.assertIn(f"http://{admin}", env + checks[0])
        self.assertIn('path == "/readyz" && get', (ROOT / "server" / "admin.cc").read_text())

    def test_stopsignal_expose_volumes_entrypoint(self):
        self.assertEqual(self.final("STOPSIGNAL"), ["SIGTERM"])
        exposed = set(" ".join(self.final("EXPOSE")).split())
        self.assertTrue({"8080", "8443", "9901"} <= exposed, exposed)
        volumes = json.loads(self.final("VOLUME")[0])
        self.assertEqual(set(volumes), {"/etc/geogate", "/var/lib/geogate"})
        entry = json.loads(self.final("ENTRYPOINT")[0])
        self.assertEqual(entry, ["/usr/local/bin/geogate", "--config", "/etc/geogate/geogate.toml"])

    def test_runtime_stage_has_every_library_geogate_links(self):
        binary = bin_dir() / "server" / "geogate"
        if not (os.access(binary, os.X_OK) and shutil.which("ldd") and shutil.which("dpkg")):
            raise unittest.SkipTest("needs the built geogate, ldd and dpkg")
        runtime = set(subprocess.run(["bash", str(SETUP), "--runtime", "--print"], check=True,
                                     capture_output=True, text=True).stdout.split())
        libs = re.findall(r"=> (/\S+)", subprocess.run(["ldd", str(binary)], capture_output=True,
                                                        text=True, check=True).stdout)
        self.assertTrue(libs)
        # One dpkg call for all of them (it is slow to start): "pkg:arch: path" lines.
        paths = sorted({p for lib in libs for p in (lib, os.path.realpath(lib))})
        out = subprocess.run(["dpkg", "-S", *paths], capture_output=True, text=True).stdout
        owner_of = {}
        for line in out.splitlines():
            pkg, _, path = line.partition(": ")
            owner_of[path.strip()] = pkg.split(":")[0]
        for lib in libs:
            owner = owner_of.get(os.path.realpath(lib)) or owner_of.get(lib)
            with self.subTest(lib=lib):
                self.assertIsNotNone(owner, f"{lib} belongs to no Debian package")
                self.assertIn(owner, runtime | BASE_IMAGE_PACKAGES,
                              f"{lib} is in {owner}, which setup-debian.sh --runtime does not install")

if __name__ == "__main__":
    unittest.main()
