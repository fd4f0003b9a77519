"""bench/gatewaylib.py's LogJanitor: what bench/compare and bench/ab rely on
to keep access logs from growing the page cache during a measurement; and
bench/compare's geo database, which geogate must always run with; and its
paced rows' grid rule."""
from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import subprocess
import sys
import tempfile
import time
import types
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
from gatewaylib import LogJanitor  # noqa: E402

SOURCE_ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def load_compare():
    """bench/compare as a module (it is a script without a .py suffix)."""
    path = os.path.join(SOURCE_ROOT, "bench", "compare")
    loader = importlib.machinery.SourceFileLoader("bench_compare", path)
    spec = importlib.util.spec_from_loader("bench_compare", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def write(path: str, size: int) -> None:
    with open(path, "wb") as f:
        f.write(b"x" * size)


class LogJanitorTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.root = self.dir.name
        for sub in ("a", "b", "c"):
            os.mkdir(os.path.join(self.root, sub))

    def tearDown(self):
        self.dir.cleanup()

    def test_empties_only_the_named_files_over_the_limit(self):
        big, small = os.path.join(self.root, "a", "access.log"), os.path.join(self.root, "b", "access.log")
        other = os.path.join(self.root, "c", "geogate.log")
        write(big, 5000)
        write(small, 1000)
        write(other, 5000)
        janitor = LogJanitor(self.root, limit=4096)
        janitor.sweep()
        self.assertEqual(os.path.getsize(big), 0)
        self.assertEqual(os.path.getsize(small), 1000)
        self.assertEqual(os.path.getsize(other), 5000)
        self.assertEqual(janitor.emptied, 1)

    def test_a_writer_that_appends_goes_on_at_the_new_end(self):
        # As geogate, NGINX and the HAProxy stdout of bench/peers open their logs.
        path = os.path.join(self.root, "a", "access.log")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, b"y" * 8192)
            LogJanitor(self.root, limit=4096).sweep()
            os.write(fd, b"line\n")
        finally:
            os.close(fd)
        with open(path, "rb") as f:
            self.assertEqual(f.read(), b"line\n")  # no hole where the old lines were

    def test_the_thread_sweeps_until_it_is_stopped(self):
        path = os.path.join(self.root, "b", "access.log")
        with LogJanitor(self.root, limit=4096, period=0.01) as janitor:
            for _ in range(3):
                write(path, 8192)
                deadline = time.monotonic() + 5
                while os.path.getsize(path) and time.monotonic() < deadline:
                    time.sleep(0.01)
                self.assertEqual(os.path.getsize(path), 0)
        self.assertEqual(janitor.emptied, 3)
        write(path, 8192)
        time.sleep(0.1)  # stopped: no more sweeps
        self.assertEqual(os.path.getsize(path), 8192)


class CompareGeoDatabaseTest(unittest.TestCase):
    """bench/compare once ran geogate without geo when no build held the
    fixture (a run from a Release build alone), which is less work per
    request than geogate's defaults: a run that flattered geogate."""

    def test_without_a_built_fixture_the_run_writes_one(self):
        compare = load_compare()
        with tempfile.TemporaryDirectory() as root, tempfile.TemporaryDirectory() as run_dir:
            # A source tree with the fixture's sources and no build directory.
            os.symlink(os.path.join(SOURCE_ROOT, "tests"), os.path.join(root, "tests"))
            compare.ROOT = root
            db = compare.find_geo_db(os.path.join(root, "build-release"), run_dir)
            self.assertEqual(os.path.dirname(db), run_dir)
            self.assertTrue(os.path.getsize(db) > 0)
            # mmdb-bin's reader (scripts/setup-debian.sh installs it): the
            # address every bench/compare client sends is placed in DE, so the
            # EU residency rule decides.
            out = subprocess.run(["mmdblookup", "--file", db, "--ip", compare.CLIENT_XFF,
                                  "country", "iso_code"], capture_output=True, text=True)
            self.assertIn('"DE"', out.stdout)

    def test_a_built_fixture_is_used(self):
        compare = load_compare()
        with tempfile.TemporaryDirectory() as build, tempfile.TemporaryDirectory() as run_dir:
            geo = os.path.join(build, "tests", "fixtures", "geo")
            os.makedirs(geo)
            write(os.path.join(geo, "geo-city.mmdb"), 10)
            self.assertEqual(compare.find_geo_db(build, run_dir), os.path.join(geo, "geo-city.mmdb"))
            self.assertEqual(os.listdir(run_dir), [])


class ComparePacedGridTest(unittest.TestCase):
    """A paced row's tokens/s measure the proxies only when the upstream keeps
    its decode grid: gpusim once delivered half of it to 256 streams, and
    every contender's tokens/s then measured gpusim."""

    @staticmethod
    def rows(compare, direct_tps: float) -> list[str]:
        def run(tps: float, cpu: float) -> dict:
            return {"tps": tps, "cpu_per_token_us": cpu,
                    "ttft": {"p50_us": 3000.0, "p99_us": 9000.0}}
        results = {}
        for key, tps, cpu in (("direct", direct_tps, 1.0), ("geogate", 100_000.0, 10.0),
                              ("haproxy-bare", 80_000.0, 8.0)):
            results[(1, "paced-256", key)] = [run(tps, cpu) for _ in range(3)]
        suite = types.SimpleNamespace(
            results=results,
            args=types.SimpleNamespace(contenders=["direct", "geogate", "haproxy-bare"],
                                       max_conns=100_000))
        return compare.Report(suite).test_rows(1, "paced-256")

    def test_the_grid_rate_is_a_token_per_stream_per_step(self):
        compare = load_compare()
        self.assertEqual(compare.paced_grid_rate(256), 256 * 1000 / compare.PACED_STEP_MS)
        self.assertFalse(compare.paced_below_grid(None, 256))

    def rows_at(self, share: float) -> tuple[str, str]:
        """The tokens/s and CPU rows of paced-256 when the upstream, directly,
        delivers `share` of its grid."""
        compare = load_compare()
        rows = self.rows(compare, direct_tps=share * compare.paced_grid_rate(256))
        return (next(r for r in rows if "| tokens/s |" in r),
                next(r for r in rows if "CPU µs/token" in r))

    def test_an_upstream_below_its_grid_gives_no_tokens_ratio(self):
        tokens, cpu = self.rows_at(0.5)
        self.assertIn("upstream below its grid", tokens)
        self.assertIn("50% of the grid", tokens)
        self.assertTrue(tokens.rstrip(" |").endswith("upstream-bound"))
        # The cost per token still compares: 10 against 8 µs.
        self.assertTrue(cpu.rstrip(" |").endswith("1.25"))

    def test_an_upstream_on_its_grid_gives_the_ratio(self):
        tokens, _ = self.rows_at(0.97)
        self.assertNotIn("below its grid", tokens)
        self.assertIn("97% of the grid", tokens)
        self.assertTrue(tokens.rstrip(" |").endswith("1.25"))

if __name__ == "__main__":
    unittest.main()
