"""Every YAML file under deploy/ (Kubernetes manifests, alert rules and their
tests) passes yamllint with the repository's .yamllint, warnings included."""
import subprocess
import unittest

from deploy_common import ROOT, need_tool


class YamllintTest(unittest.TestCase):
    def test_deploy_yaml_is_clean(self):
        yamllint = need_tool("yamllint")
        r = subprocess.run([yamllint, "--strict", "--format", "parsable", "deploy", ".yamllint"],
                           cwd=ROOT, capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_there_is_yaml_to_lint(self):
        files = list((ROOT / "deploy").rglob("*.yaml")) + list((ROOT / "deploy").rglob("*.yml"))
        self.assertGreater(len(files), 10)


if __name__ == "__main__":
    unittest.main()
