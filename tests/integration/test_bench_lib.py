"""bench/gatewaylib.py's LogJanitor: what bench/compare and bench/ab rely on
to keep access logs from growing the page cache during a measurement."""
from __future__ import annotations

import os
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
from gatewaylib import LogJanitor  # noqa: E402


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


if __name__ == "__main__":
    unittest.main()
