"""deploy/systemd and the anycast unit: the unit files are well formed, run
what the docs install where the docs install it, stop geogate with SIGTERM
and a timeout longer than the default drain, and (when systemd-analyze is
installed; it is not part of the CI package list) pass
`systemd-analyze verify` with their commands pointed at the built files."""
import configparser
import pathlib
import shutil
import subprocess
import tempfile
import unittest

from deploy_common import DEPLOY, ROOT, bin_dir

UNITS = sorted((DEPLOY / "systemd").glob("*.service")) + sorted((DEPLOY / "systemd").glob("*.path")) + [
    DEPLOY / "anycast" / "geogate-anycast-health.service"]
# Where the docs install the programs -> where they are in this checkout.
INSTALLED = {
    "/usr/local/bin/geogate": lambda: bin_dir() / "server" / "geogate",
    "/usr/local/sbin/geogate-anycast-health": lambda: DEPLOY / "anycast" / "geogate-anycast-health",
}


def parse(path):
    cp = configparser.ConfigParser(strict=False, interpolation=None, delimiters=("=",))
    cp.optionxform = str
    cp.read_string(path.read_text())
    return cp


class UnitFilesTest(unittest.TestCase):
    def test_units_parse_with_the_usual_sections(self):
        for unit in UNITS:
            with self.subTest(unit=unit.name):
                cp = parse(unit)
                self.assertIn("Unit", cp)
                kind = unit.suffix[1:].capitalize()
                self.assertIn(kind, cp)
                self.assertTrue(cp["Unit"].get("Description"))

    def test_geogate_service_runs_checks_reloads_and_drains(self):
        svc = parse(DEPLOY / "systemd" / "geogate.service")["Service"]
        self.assertEqual(svc["ExecStart"], "/usr/local/bin/geogate --config /etc/geogate/geogate.toml")
        self.assertEqual(svc["ExecStartPre"], "/usr/local/bin/geogate --check --config /etc/geogate/geogate.toml")
        self.assertIn("-HUP $MAINPID", svc["ExecReload"])
        self.assertEqual(svc["KillSignal"], "SIGTERM")
        self.assertNotEqual(svc["User"], "root")
        # Longer than the default drain_delay_ms + drain_timeout_ms.
        self.assertGreater(int(svc["TimeoutStopSec"]), (2000 + 30000) / 1000)

    def test_geodb_path_unit_reloads_geogate(self):
        path = parse(DEPLOY / "systemd" / "geogate-geodb-reload.path")["Path"]
        self.assertTrue((DEPLOY / "systemd" / path["Unit"]).is_file())
        svc = parse(DEPLOY / "systemd" / path["Unit"])["Service"]
        self.assertIn("reload geogate.service", svc["ExecStart"])

    def test_systemd_analyze_verify(self):
        analyze = shutil.which("systemd-analyze")
        if not analyze:
            raise unittest.SkipTest("systemd-analyze is not installed (optional: the static checks above ran)")
        with tempfile.TemporaryDirectory() as tmp:
            for unit in UNITS:
                text = unit.read_text()
                for installed, here in INSTALLED.items():
                    text = text.replace(installed, str(here()))
                (pathlib.Path(tmp) / unit.name).write_text(text)
            for unit in UNITS:
                with self.subTest(unit=unit.name):
                    r = subprocess.run([analyze, "verify", str(pathlib.Path(tmp) / unit.name)],
                                       capture_output=True, text=True, cwd=tmp, timeout=60)
                    # Units it merely cannot find (bird.service on a host
                    # without BIRD) are not errors in our files.
                    problems = [l for l in (r.stdout + r.stderr).splitlines()
                                if l.strip() and "not found" not in l]
                    self.assertEqual(problems, [], r.stdout + r.stderr)


if __name__ == "__main__":
    unittest.main()
