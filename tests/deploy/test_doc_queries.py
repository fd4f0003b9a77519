"""The PromQL of docs/observability.md ("Queries worth keeping") parses
(promtool check rules, each query as a recording rule), and the p95 TTFT
per region query gives a number per region on a synthetic scrape: it used
to multiply the buckets by geogate_inflight, which is 0 whenever nothing is
in flight, so it returned NaN (issue #18, item 9)."""
import pathlib
import re
import subprocess
import tempfile
import unittest

from deploy_common import ROOT, import_yaml, need_tool

PAGE = ROOT / "docs" / "observability.md"


def doc_queries() -> dict[str, str]:
    """{comment: expression} of the promql block under "Queries worth keeping"."""
    text = PAGE.read_text()
    section = text.split("## Queries worth keeping", 1)[1]
    block = re.search(r"```promql\n(.*?)```", section, re.S).group(1)
    queries, comment, expr = {}, [], []
    for line in block.splitlines() + [""]:
        if line.startswith("#") or not line.strip():
            if expr:
                queries[" ".join(comment)] = "\n".join(expr)
                comment, expr = [], []
            if line.startswith("#"):
                comment.append(line.lstrip("# ").strip())
        else:
            expr.append(line)
    return queries


# Two backends of one edge in two regions; b2 is unhealthy and nothing is in
# flight, as on a quiet edge. b1: 6 of 10 first tokens per minute under
# 50 ms, all under 100 ms; b2: all between 50 and 100 ms.
SERIES = {
    'geogate_ttft_seconds_bucket{instance="e1",job="geogate",backend="b1",le="0.05"}': "0+6x10",
    'geogate_ttft_seconds_bucket{instance="e1",job="geogate",backend="b1",le="0.1"}': "0+10x10",
    'geogate_ttft_seconds_bucket{instance="e1",job="geogate",backend="b1",le="+Inf"}': "0+10x10",
    'geogate_ttft_seconds_bucket{instance="e1",job="geogate",backend="b2",le="0.05"}': "0+0x10",
    'geogate_ttft_seconds_bucket{instance="e1",job="geogate",backend="b2",le="0.1"}': "0+10x10",
    'geogate_ttft_seconds_bucket{instance="e1",job="geogate",backend="b2",le="+Inf"}': "0+10x10",
    'geogate_inflight{instance="e1",job="geogate",backend="b1",region="eu-west"}': "0x10",
    'geogate_inflight{instance="e1",job="geogate",backend="b2",region="us-east"}': "0x10",
    'geogate_backend_healthy{instance="e1",job="geogate",backend="b1",region="eu-west"}': "1x10",
    'geogate_backend_healthy{instance="e1",job="geogate",backend="b2",region="us-east"}': "0x10",
}


class DocQueriesTest(unittest.TestCase):
    def setUp(self):
        self.promtool = need_tool("promtool")
        self.yaml = import_yaml()
        self.queries = doc_queries()
        self.tmp = pathlib.Path(tempfile.mkdtemp(prefix="geogate-doc-queries-"))

    def test_every_query_parses(self):
        self.assertGreaterEqual(len(self.queries), 5, self.queries)
        rules = {"groups": [{"name": "doc", "rules": [
            {"record": f"doc:query_{i}", "expr": expr} for i, expr in enumerate(self.queries.values())]}]}
        path = self.tmp / "rules.yml"
        path.write_text(self.yaml.safe_dump(rules))
        r = subprocess.run([self.promtool, "check", "rules", str(path)], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_p95_ttft_per_region_is_a_number_per_region(self):
        expr = next(e for c, e in self.queries.items() if "time to first token per region" in c)
        (self.tmp / "rules.yml").write_text("groups: []\n")
        test = {"rule_files": ["rules.yml"], "evaluation_interval": "1m", "tests": [{
            "interval": "1m",
            "input_series": [{"series": s, "values": v} for s, v in SERIES.items()],
            # Linear within the bucket: b1 0.05 + (9.5 - 6) / 4 * 0.05,
            # b2 0.05 + 9.5 / 10 * 0.05.
            "promql_expr_test": [{"expr": expr, "eval_time": "10m", "exp_samples": [
                {"labels": '{region="eu-west"}', "value": 0.09375},
                {"labels": '{region="us-east"}', "value": 0.0975}]}]}]}
        path = self.tmp / "test.yml"
        path.write_text(self.yaml.safe_dump(test))
        r = subprocess.run([self.promtool, "test", "rules", str(path)], capture_output=True, text=True,
                           cwd=self.tmp)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)


if __name__ == "__main__":
    unittest.main()
