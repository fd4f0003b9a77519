"""The harness's own promises, which every integration test and bench/
script leans on."""
from __future__ import annotations

import socket
import sys
import unittest

from harness import Process, free_port


class FreePortTest(unittest.TestCase):
    def test_never_hands_out_a_port_twice(self):
        # Callers take several ports before any is bound (a server's
        # listeners, a row of upstreams still starting). With bind(0) alone
        # any two calls return the same port about once in 14,000 (the
        # kernel's odd half of the ephemeral range): NGINX in bench/compare
        # then rejects its config ("duplicate listen options"), two
        # listeners collide. 3,000 calls made about 300 such pairs.
        ports = [free_port() for _ in range(3000)]
        self.assertEqual(len(ports), len(set(ports)))

    def test_the_port_is_free(self):
        port = free_port()
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", port))
            s.listen(1)


class ProcessOutputTest(unittest.TestCase):
    # A process's last words (the gateway's shutdown message) are what a
    # test reads right after it exits. The drain threads copy its pipes
    # line by line: a terminate() that returned at the exit let a test read
    # the stderr file before they had caught up (integration/tracing failed
    # so in CI, and 1 run in 25 under load).
    SCRIPT = ("import signal, sys\n"
              "def bye(*_):\n"
              "    sys.stderr.write('noise\\n' * 20000 + 'last words\\n')\n"
              "    sys.stderr.flush()\n"
              "    sys.exit(0)\n"
              "signal.signal(signal.SIGTERM, bye)\n"
              "print('ready', flush=True)\n"
              "signal.pause()\n")

    def test_terminate_returns_with_the_last_stderr_line_read(self):
        for _ in range(5):
            p = Process([sys.executable, "-c", self.SCRIPT], name="talker", wait_ready=False)
            p.start(self)
            p.wait_for_line("^ready$")
            self.assertEqual(p.terminate(timeout=10), 0)
            self.assertTrue(p.err_lines and p.err_lines[-1] == "last words", p.err_lines[-1:])
            self.assertTrue(p.stderr_text().endswith("last words\n"))


if __name__ == "__main__":
    unittest.main()
