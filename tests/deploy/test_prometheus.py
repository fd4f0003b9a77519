"""deploy/prometheus: the alert rules are valid (promtool check rules), behave
as their unit tests say (promtool test rules), use only metrics and labels
geogate exports, link an existing runbook, and the Kubernetes PrometheusRule
carries the same groups. Also: the metric vocabulary of these tests matches
server/metrics_exporter.cc."""
import re
import subprocess
import unittest

from deploy_common import (DEPLOY, EXPORTED, PLANNED, ROOT, VOCABULARY, import_yaml, need_tool,
                           promql_problems)

RULES = DEPLOY / "prometheus" / "geogate-alerts.yml"
RULE_TESTS = sorted((DEPLOY / "prometheus" / "tests").glob("*.yml"))
EXPORTER = ROOT / "server" / "metrics_exporter.cc"


def exporter_families():
    """{name: (type, labels)} as server/metrics_exporter.cc writes them."""
    src = EXPORTER.read_text()
    families = {name: (kind, set()) for name, kind in re.findall(r'w\.Family\(\s*"(\w+)",\s*"(\w+)"', src)}
    # Counter/Histogram vectors: the label names are in a std::array.
    for name, labels in re.findall(r'w\.(?:Counter|Histogram)\(\s*"(\w+)",\s*std::array<const char\*,\s*\d+>\{([^}]*)\}',
                                   src):
        families[name][1].update(re.findall(r'"(\w+)"', labels))
    # Single samples: {{"label", value}, ...} up to the end of the call.
    for m in re.finditer(r'w\.Sample\(\s*"(\w+)",', src):
        name = m.group(1)
        call = src[m.end(): src.index(");", m.end())]
        labels = set(re.findall(r'\{"(\w+)",', call)) - {"le"}
        for suffix in ("_bucket", "_sum", "_count"):
            if name.endswith(suffix) and name[: -len(suffix)] in families:
                name = name[: -len(suffix)]
        families.setdefault(name, ("untyped", set()))[1].update(labels)
    return families


class VocabularyTest(unittest.TestCase):
    def test_vocabulary_matches_the_exporter(self):
        exported = exporter_families()
        self.assertGreater(len(exported), 30, "the exporter parse found too few families")
        for name, (kind, labels) in exported.items():
            self.assertIn(name, EXPORTED, f"{name} is exported but missing from tests/deploy/deploy_common.py")
            self.assertEqual((kind, labels), EXPORTED[name], f"type or labels of {name} differ from the exporter")
        for name in EXPORTED:
            self.assertIn(name, exported, f"{name} is in the vocabulary but no longer exported")

    def test_planned_metrics_keep_their_contract(self):
        # Once the gateway exports an issue-7 metric, it must have the
        # labels the rules and the dashboard were written against.
        exported = exporter_families()
        for name, spec in PLANNED.items():
            if name in exported:
                self.assertEqual(exported[name], spec, f"{name} is exported with other labels than planned")


class RulesTest(unittest.TestCase):
    def setUp(self):
        self.promtool = need_tool("promtool")

    def test_promtool_check_rules(self):
        r = subprocess.run([self.promtool, "check", "rules", str(RULES)], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_promtool_unit_tests(self):
        self.assertTrue(RULE_TESTS, "no rule tests in deploy/prometheus/tests")
        r = subprocess.run([self.promtool, "test", "rules", *map(str, RULE_TESTS)], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)


class RuleContentTest(unittest.TestCase):
    def setUp(self):
        yaml = import_yaml()
        self.groups = yaml.safe_load(RULES.read_text())["groups"]
        self.alerts = [r for g in self.groups for r in g["rules"] if "alert" in r]
        self.tests = [yaml.safe_load(p.read_text()) for p in RULE_TESTS]

    def test_every_alert_has_a_unit_test_that_fires_it(self):
        fired = set()
        for doc in self.tests:
            for t in doc["tests"]:
                for case in t.get("alert_rule_test", []):
                    if case.get("exp_alerts"):
                        fired.add(case["alertname"])
        for a in self.alerts:
            self.assertIn(a["alert"], fired, f"no promtool test expects {a['alert']} to fire")

    def test_expressions_use_known_metrics_and_labels(self):
        for a in self.alerts:
            with self.subTest(alert=a["alert"]):
                self.assertEqual(promql_problems(a["expr"]), [])

    def test_every_alert_names_severity_summary_and_an_existing_runbook(self):
        names = [a["alert"] for a in self.alerts]
        self.assertEqual(len(names), len(set(names)), "alert names repeat")
        for a in self.alerts:
            with self.subTest(alert=a["alert"]):
                self.assertIn(a["labels"].get("severity"), {"critical", "warning", "info"})
                self.assertTrue(a["annotations"].get("summary"))
                runbook = a["annotations"].get("runbook_url", "")
                self.assertTrue(runbook.startswith("docs/runbooks/"), runbook)
                page = ROOT / runbook.split("#")[0]
                self.assertTrue(page.is_file(), f"{runbook} does not exist")
                self.assertIn(a["alert"], page.read_text(), f"{runbook} does not mention {a['alert']}")

    def test_the_issue_alerts_exist(self):
        # What the rules must cover (issue 7): each by the metric it watches.
        wanted = {
            "backend down": "geogate_backend_healthy",
            "residency rule without backends": "geogate_residency_rule_available",
            "failover rate": "geogate_failovers_total",
            "residency rejections": 'geogate_residency_decisions_total{outcome="denied"}',
            "utilization": "geogate_pool_utilization",
            "reload failing": "geogate_config_last_reload_failure_timestamp_seconds",
            "certificate expiry": "geogate_tls_certificate_expiry_timestamp_seconds",
            "geo database age": "geogate_geo_database_build_timestamp_seconds",
            "readiness": "geogate_ready",
        }
        exprs = " ".join(a["expr"] for a in self.alerts)
        for what, needle in wanted.items():
            self.assertIn(needle, exprs, f"no alert for {what}")
        self.assertIn("> 0.9", exprs)  # saturation
        self.assertIn("< 0.7", exprs)  # waste

    def test_metrics_in_vocabulary_are_real_names(self):
        for name in VOCABULARY:
            self.assertRegex(name, r"^(geogate_[a-z0-9_]+|up)$")

    def test_prometheusrule_is_rendered_from_the_rules(self):
        r = subprocess.run(["python3", str(DEPLOY / "kubernetes" / "render-prometheusrule"), "--check"],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        yaml = import_yaml()
        wrapped = yaml.safe_load((DEPLOY / "kubernetes" / "prometheusrule.yaml").read_text())
        self.assertEqual(wrapped["kind"], "PrometheusRule")
        self.assertEqual(wrapped["spec"]["groups"], self.groups)


if __name__ == "__main__":
    unittest.main()
