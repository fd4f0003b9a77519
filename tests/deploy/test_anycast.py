"""deploy/anycast: the example BIRD configuration parses (`bird -p -c`), and
geogate-anycast-health announces and withdraws the anycast routes in a real
BIRD as a fake /readyz says: after RISE good answers, after FALL bad ones,
at once on "draining", not on a single blip, while the maintenance file
exists, again after someone disabled the protocols behind its back (a BIRD
restart), and never left announced when the script stops. The systemd unit
and the BIRD config agree with the script's settings."""
import http.server
import os
import pathlib
import re
import signal
import subprocess
import tempfile
import threading
import time
import unittest

from deploy_common import DEPLOY, need_tool

ANYCAST = DEPLOY / "anycast"
SCRIPT = ANYCAST / "geogate-anycast-health"
V4, V6 = "192.0.2.10/32", "2001:db8:ffff::10/128"


class BirdConfigTest(unittest.TestCase):
    def test_bird_parses_the_example(self):
        bird = need_tool("bird")
        r = subprocess.run([bird, "-p", "-c", str(ANYCAST / "bird.conf")], capture_output=True, text=True,
                           timeout=30)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_config_script_and_unit_agree(self):
        script = SCRIPT.read_text()
        protocols = re.search(r"GEOGATE_BIRD_PROTOCOLS:-([\w ]+)\}", script).group(1).split()
        anycast = (ANYCAST / "geogate-anycast.conf").read_text()
        bird = (ANYCAST / "bird.conf").read_text()
        for proto in protocols:
            # Each is a static protocol that starts disabled (withdrawn after a
            # BIRD restart until the script has seen /readyz) and is exported.
            block = re.search(rf"protocol static {proto} \{{(.*?)\n\}}", anycast, re.S)
            self.assertIsNotNone(block, proto)
            self.assertIn("disabled;", block.group(1))
            self.assertIn(f'proto = "{proto}"', bird)
        unit = (ANYCAST / "geogate-anycast-health.service").read_text()
        self.assertIn("ExecStart=/usr/local/sbin/geogate-anycast-health", unit)
        for var in re.findall(r"Environment=\"?(GEOGATE_\w+)=", unit):
            self.assertIn(var, script, f"the unit sets {var}, which the script does not read")
        self.assertIn(re.search(r"GEOGATE_WITHDRAW_FILE:-(\S+)\}", script).group(1), unit)

    def test_shell_syntax(self):
        r = subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)


class FakeReadyz(http.server.ThreadingHTTPServer):
    """Answers /readyz from a script of (status, body), then with `default`."""

    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.lock = threading.Lock()
        self.script = []
        self.default = (503, "not ready: no healthy backend yet\n")
        self.requests = 0

    def next_answer(self):
        with self.lock:
            self.requests += 1
            return self.script.pop(0) if self.script else self.default

    def set(self, default=None, script=None):
        with self.lock:
            if default is not None:
                self.default = default
            if script is not None:
                self.script = list(script)


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802
        status, body = self.server.next_answer()
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


READY = (200, "ready\n")
NOT_READY = (503, "not ready: no healthy backend yet\n")
DRAINING = (503, "not ready: draining\n")


class HealthScriptWithBirdTest(unittest.TestCase):
    """The script against a real BIRD (static protocols only, private control
    socket) and a fake /readyz."""

    @classmethod
    def setUpClass(cls):
        cls.bird = need_tool("bird")
        cls.birdc = need_tool("birdc")
        need_tool("curl")
        cls.tmp = tempfile.TemporaryDirectory()
        tmp = pathlib.Path(cls.tmp.name)
        cls.sock = tmp / "bird.ctl"
        conf = tmp / "bird.conf"
        conf.write_text(f'router id 192.0.2.1;\nprotocol device {{ scan time 10; }}\n'
                        f'include "{ANYCAST / "geogate-anycast.conf"}";\n')
        cls.bird_proc = subprocess.Popen([cls.bird, "-f", "-c", str(conf), "-s", str(cls.sock)],
                                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 10
        while not cls.sock.exists():
            if cls.bird_proc.poll() is not None or time.monotonic() > deadline:
                err = cls.bird_proc.stderr.read().decode() if cls.bird_proc.poll() is not None else "timeout"
                cls.tearDownClass()
                raise AssertionError(f"BIRD did not start: {err}")
            time.sleep(0.05)

    @classmethod
    def tearDownClass(cls):
        if getattr(cls, "bird_proc", None) and cls.bird_proc.poll() is None:
            cls.bird_proc.terminate()
            cls.bird_proc.wait(timeout=10)
        cls.tmp.cleanup()

    def setUp(self):
        self.readyz = FakeReadyz()
        threading.Thread(target=self.readyz.serve_forever, daemon=True).start()
        self.withdraw_file = pathlib.Path(self.tmp.name) / f"withdraw-{self.id().rsplit('.', 1)[-1]}"
        self.birdc_cmd("disable", "geogate_anycast4")
        self.birdc_cmd("disable", "geogate_anycast6")
        # Appended to by the script, read by name here: sharing one file
        # offset with the child would let reads and writes trample each other.
        self.log_path = pathlib.Path(self.tmp.name) / f"{self.id().rsplit('.', 1)[-1]}.log"
        self.log = open(self.log_path, "ab")
        env = dict(os.environ,
                   GEOGATE_READYZ_URL=f"http://127.0.0.1:{self.readyz.server_address[1]}/readyz",
                   GEOGATE_BIRDC=f"{self.birdc} -s {self.sock}",
                   GEOGATE_INTERVAL="0.05", GEOGATE_TIMEOUT="1", GEOGATE_RISE="3", GEOGATE_FALL="2",
                   GEOGATE_RESYNC="10", GEOGATE_WITHDRAW_FILE=str(self.withdraw_file))
        self.proc = subprocess.Popen(["bash", str(SCRIPT)], env=env, stdout=self.log, stderr=self.log)

    def tearDown(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.readyz.shutdown()
        self.readyz.server_close()
        self.log.close()

    def birdc_cmd(self, *args):
        return subprocess.run([self.birdc, "-s", str(self.sock), *args], capture_output=True, text=True,
                              timeout=10).stdout

    def announced(self):
        """True when both prefixes are in BIRD, False when neither, None in
        between (the script switches the two protocols one after the other)."""
        routes = self.birdc_cmd("show", "route")
        has4, has6 = V4 in routes, V6 in routes
        return has4 if has4 == has6 else None

    def wait_for(self, want, timeout=10.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.announced() == want:
                return
            time.sleep(0.05)
        self.fail(f"routes {'not ' if want else 'still '}announced after {timeout}s; log:\n{self.script_log()}")

    def wait_requests(self, n, timeout=10.0):
        target = self.readyz.requests + n
        deadline = time.monotonic() + timeout
        while self.readyz.requests < target:
            self.assertLess(time.monotonic(), deadline, "the script stopped polling")
            time.sleep(0.02)

    def script_log(self):
        return self.log_path.read_text()

    def assert_logged(self, text, timeout=5.0):
        """The script logs a change after making it: wait for the line."""
        deadline = time.monotonic() + timeout
        while text not in self.script_log():
            if time.monotonic() > deadline:
                self.fail(f"{text!r} not logged:\n{self.script_log()}")
            time.sleep(0.02)

    def test_announce_withdraw_with_hysteresis(self):
        # Not ready at start: stays withdrawn.
        self.wait_requests(5)
        self.assertIs(self.announced(), False)
        # Ready: announced after RISE answers.
        self.readyz.set(default=READY)
        self.wait_for(True)
        # One bad answer is a blip, not a reason to withdraw.
        withdrawals = self.script_log().count("withdrawn")
        self.readyz.set(script=[NOT_READY])
        self.wait_requests(6)
        self.assertIs(self.announced(), True)
        self.assertEqual(self.script_log().count("withdrawn"), withdrawals)
        # FALL bad answers in a row withdraw.
        self.readyz.set(default=NOT_READY)
        self.wait_for(False)
        self.assert_logged("/readyz answered 503 2 times in a row")

    def test_draining_withdraws_at_once(self):
        self.readyz.set(default=READY)
        self.wait_for(True)
        self.readyz.set(script=[DRAINING], default=READY)
        self.wait_for(False, timeout=5)
        self.assert_logged("geogate is draining")
        # ...and it comes back once ready again (RISE good answers).
        self.wait_for(True)

    def test_unreachable_readyz_withdraws(self):
        self.readyz.set(default=READY)
        self.wait_for(True)
        self.readyz.shutdown()
        self.readyz.server_close()
        self.wait_for(False)
        self.assert_logged("unreachable")

    def test_maintenance_file(self):
        self.readyz.set(default=READY)
        self.wait_for(True)
        self.withdraw_file.touch()
        try:
            self.wait_for(False)
            self.assert_logged("maintenance")
        finally:
            self.withdraw_file.unlink()
        self.wait_for(True)

    def test_resync_after_bird_lost_the_state(self):
        self.readyz.set(default=READY)
        self.wait_for(True)
        # What a BIRD restart does: the protocols come back disabled.
        self.birdc_cmd("disable", "geogate_anycast4")
        self.birdc_cmd("disable", "geogate_anycast6")
        self.wait_for(True)

    def test_stopping_the_script_withdraws(self):
        self.readyz.set(default=READY)
        self.wait_for(True)
        self.proc.send_signal(signal.SIGTERM)
        self.assertEqual(self.proc.wait(timeout=10), 0)
        self.assertIs(self.announced(), False)
        self.assert_logged("health check stopped")


if __name__ == "__main__":
    unittest.main()
