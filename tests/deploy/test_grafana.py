"""deploy/grafana: the dashboard JSON parses, is what render-dashboard
generates, covers the areas it must (traffic, TTFT quantiles, failovers,
health, residency, utilization, cost), lays its panels out without overlap,
uses only metrics and labels in the vocabulary, and every query is valid
PromQL (promtool checks them as recording rules)."""
import json
import re
import subprocess
import tempfile
import unittest

from deploy_common import DEPLOY, need_tool, promql_problems

GRAFANA = DEPLOY / "grafana"
DASHBOARD = GRAFANA / "geogate-dashboard.json"

# Grafana's template variables, as Prometheus would see them expanded.
EXPANSIONS = {"$__rate_interval": "5m", "$__interval": "1m", "$job": ".*", "$instance": ".*", "$region": ".*"}


def expand(expr):
    for var, value in EXPANSIONS.items():
        expr = expr.replace(var, value)
    assert "$" not in expr, f"unexpanded variable in {expr}"
    return expr


class DashboardTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dash = json.loads(DASHBOARD.read_text())
        cls.panels = [p for p in cls.dash["panels"] if p["type"] != "row"]
        cls.exprs = [(p["title"], t["expr"]) for p in cls.panels for t in p["targets"]]

    def test_is_generated(self):
        r = subprocess.run(["python3", str(GRAFANA / "render-dashboard"), "--check"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_rows_cover_the_operator_questions(self):
        rows = {p["title"] for p in self.dash["panels"] if p["type"] == "row"}
        for row in ("Traffic", "Latency", "Failover and errors", "Health", "Residency",
                    "Utilization and capacity", "Cost"):
            self.assertIn(row, rows)
        text = " ".join(e for _, e in self.exprs)
        self.assertIn("histogram_quantile(0.95, sum by (le) (rate(geogate_ttft_seconds_bucket", text)
        self.assertIn("histogram_quantile(0.99", text)
        for metric in ("geogate_failovers_total", "geogate_backend_healthy", "geogate_residency_decisions_total",
                       "geogate_residency_rule_available", "geogate_pool_utilization", "geogate_cost_dollars_total",
                       "geogate_gpu_seconds_total", "geogate_tenant_budget_used_ratio"):
            self.assertIn(metric, text)

    def test_ids_unique_and_layout_without_overlap(self):
        ids = [p["id"] for p in self.dash["panels"]]
        self.assertEqual(len(ids), len(set(ids)))
        cells = {}
        for p in self.dash["panels"]:
            g = p["gridPos"]
            self.assertLessEqual(g["x"] + g["w"], 24, p["title"])
            for x in range(g["x"], g["x"] + g["w"]):
                for y in range(g["y"], g["y"] + g["h"]):
                    self.assertNotIn((x, y), cells, f"{p['title']} overlaps {cells.get((x, y))}")
                    cells[(x, y)] = p["title"]

    def test_queries_use_the_datasource_variable_and_have_refids(self):
        names = {v["name"] for v in self.dash["templating"]["list"]}
        self.assertTrue({"datasource", "job", "instance", "region"} <= names)
        for p in self.panels:
            self.assertEqual(p["datasource"]["uid"], "${datasource}", p["title"])
            refs = [t["refId"] for t in p["targets"]]
            self.assertTrue(refs, p["title"])
            self.assertEqual(len(refs), len(set(refs)), p["title"])

    def test_metrics_and_labels_are_in_the_vocabulary(self):
        queries = list(self.exprs)
        for v in self.dash["templating"]["list"]:
            q = v.get("definition")
            if q:
                queries.append((f"variable {v['name']}", re.sub(r"^label_values\((.*),\s*\w+\)$", r"\1", q)))
        for title, expr in queries:
            with self.subTest(panel=title):
                self.assertEqual(promql_problems(expand(expr)), [])

    def test_queries_are_valid_promql(self):
        promtool = need_tool("promtool")
        rules = {"groups": [{"name": "dashboard", "rules": [
            {"record": f"dashboard:query_{i}", "expr": expand(e)} for i, (_, e) in enumerate(self.exprs)]}]}
        with tempfile.NamedTemporaryFile("w", suffix=".yml") as f:
            json.dump(rules, f)  # JSON is YAML
            f.flush()
            r = subprocess.run([promtool, "check", "rules", f.name], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)


if __name__ == "__main__":
    unittest.main()
