"""deploy/kubernetes/geogate-reload-watch: the config-reload sidecar. Against a
fake admin endpoint and a directory laid out the way the kubelet lays out a
ConfigMap volume (visible names -> ..data -> ..<timestamp>/), it must: not
reload at start; reload once when ..data is swapped; log and not retry a
rejected (422) reload; retry while geogate cannot be reached; notice a geo
database renamed over the old one; and exit at once on SIGTERM."""
import http.server
import os
import pathlib
import signal
import subprocess
import tempfile
import threading
import time
import unittest

from deploy_common import DEPLOY, need_tool

SCRIPT = DEPLOY / "kubernetes" / "geogate-reload-watch"


class FakeAdmin(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.lock = threading.Lock()
        self.answers = []  # status codes to give, then 200
        self.reloads = 0

    def answer(self):
        with self.lock:
            self.reloads += 1
            return self.answers.pop(0) if self.answers else 200


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802
        if self.path != "/admin/reload":
            self.send_error(404)
            return
        status = self.server.answer()
        body = (b'{"ok":true,"generation":2,"errors":[],"warnings":[]}' if status == 200 else
                b'{"ok":false,"generation":0,"errors":["geogate.toml:3:1: bad"],"warnings":[]}')
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class ReloadWatchTest(unittest.TestCase):
    def setUp(self):
        need_tool("curl")
        self.tmp = tempfile.TemporaryDirectory()
        root = pathlib.Path(self.tmp.name)
        self.config = root / "config"
        self.geo = root / "geo"
        self.config.mkdir()
        self.geo.mkdir()
        self.generation = 0
        self.publish("gateway.edge = 'one'\n")
        (self.config / "geogate.toml").symlink_to("..data/geogate.toml")
        (self.geo / "GeoLite2-City.mmdb").write_bytes(b"db-1")
        self.admin = FakeAdmin()
        threading.Thread(target=self.admin.serve_forever, daemon=True).start()
        self.log_path = root / "watch.log"
        env = dict(os.environ, GEOGATE_WATCH=f"{self.config} {self.geo}",
                   GEOGATE_ADMIN_URL=f"http://127.0.0.1:{self.admin.server_address[1]}",
                   GEOGATE_WATCH_INTERVAL="0.05")
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(["bash", str(SCRIPT)], env=env, stdout=log, stderr=log)
        self.wait_log("watching")

    def tearDown(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.admin.shutdown()
        self.admin.server_close()
        self.tmp.cleanup()

    def publish(self, text):
        """What the kubelet does on a ConfigMap update: a new timestamped
        directory, then an atomic swap of the ..data symlink."""
        self.generation += 1
        new = self.config / f"..2024_01_01_00_00_0{self.generation}"
        new.mkdir()
        (new / "geogate.toml").write_text(text)
        tmp_link = self.config / "..data_tmp"
        tmp_link.symlink_to(new.name)
        os.replace(tmp_link, self.config / "..data")

    def log(self):
        return self.log_path.read_text()

    def wait_log(self, text, timeout=5.0):
        deadline = time.monotonic() + timeout
        while text not in self.log():
            self.assertLess(time.monotonic(), deadline, f"{text!r} not logged:\n{self.log()}")
            time.sleep(0.02)

    def wait_reloads(self, n, timeout=5.0):
        deadline = time.monotonic() + timeout
        while self.admin.reloads < n:
            self.assertLess(time.monotonic(), deadline, f"{self.admin.reloads} reloads, wanted {n}:\n{self.log()}")
            time.sleep(0.02)

    def test_reloads_once_per_configmap_update(self):
        time.sleep(0.5)
        self.assertEqual(self.admin.reloads, 0, "reloaded without a change")
        self.publish("gateway.edge = 'two'\n")
        self.wait_reloads(1)
        self.wait_log("reload applied")
        time.sleep(0.5)
        self.assertEqual(self.admin.reloads, 1, "reloaded more than once for one change")

    def test_rejected_reload_is_logged_and_not_repeated(self):
        self.admin.answers = [422]
        self.publish("not = valid = toml\n")
        self.wait_log("REJECTED")
        self.assertIn("geogate.toml:3:1: bad", self.log())
        time.sleep(0.5)
        self.assertEqual(self.admin.reloads, 1)

    def test_unreachable_gateway_is_retried(self):
        self.admin.answers = [503, 503]
        self.publish("gateway.edge = 'three'\n")
        self.wait_reloads(3)
        self.wait_log("reload applied")
        self.assertIn("will retry", self.log())

    def test_geo_database_renamed_over_the_old_one(self):
        new = self.geo / ".GeoLite2-City.mmdb.tmp"
        new.write_bytes(b"db-2, a little longer")
        os.replace(new, self.geo / "GeoLite2-City.mmdb")
        self.wait_reloads(1)

    def test_sigterm_exits_at_once(self):
        start = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        self.assertEqual(self.proc.wait(timeout=5), 0)
        self.assertLess(time.monotonic() - start, 2)


if __name__ == "__main__":
    unittest.main()
