"""The harness's own promises, which every integration test and bench/
script leans on."""
from __future__ import annotations

import socket
import unittest

from harness import free_port


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


if __name__ == "__main__":
    unittest.main()
