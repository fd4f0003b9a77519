"""The operator docs: relative links in docs/README.md, docs/operations.md
and docs/runbooks/ point at files (and headings) that exist; the runbook
index lists every runbook and every alert; the operator guide links every
other document and every example; the runbooks name only admin endpoints
geogate serves."""
import re
import unittest

from deploy_common import DEPLOY, ROOT, import_yaml

DOCS = ROOT / "docs"
PAGES = [DOCS / "README.md", DOCS / "operations.md", *sorted((DOCS / "runbooks").glob("*.md"))]
# Documents other branches are writing; linked already so the guide is
# complete when they land. Remove a name once its file exists on main.
PENDING: set[str] = set()
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def anchors(text):
    """GitHub's heading anchors of a Markdown text."""
    out = set()
    for heading in re.findall(r"^#{1,6} (.+)$", text, re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        out.add(slug)
    return out


class DocsTest(unittest.TestCase):
    def test_relative_links_resolve(self):
        for page in PAGES:
            text = page.read_text()
            for target in LINK.findall(text):
                if re.match(r"^[a-z]+:", target):
                    continue  # http:, https:, mailto:
                path, _, frag = target.partition("#")
                dest = (page.parent / path).resolve() if path else page
                rel = dest.relative_to(ROOT).as_posix() if dest.is_relative_to(ROOT) else str(dest)
                with self.subTest(page=page.name, link=target):
                    if rel in PENDING and not dest.exists():
                        continue
                    self.assertTrue(dest.exists(), f"{target} does not exist")
                    if frag and dest.suffix == ".md":
                        self.assertIn(frag, anchors(dest.read_text()), f"no heading #{frag} in {rel}")

    def test_runbook_index_lists_every_runbook_and_alert(self):
        index = (DOCS / "runbooks" / "README.md").read_text()
        for page in (DOCS / "runbooks").glob("*.md"):
            if page.name != "README.md":
                self.assertIn(f"({page.name})", index, f"{page.name} is not in the runbook index")
        yaml = import_yaml()
        rules = yaml.safe_load((DEPLOY / "prometheus" / "geogate-alerts.yml").read_text())
        for group in rules["groups"]:
            for rule in group["rules"]:
                if "alert" in rule:
                    self.assertIn(rule["alert"], index)

    def test_the_issue_runbooks_exist(self):
        for name in ("gpu-backend-down", "region-down", "residency-no-compliant-backend", "capacity-exhausted",
                     "spot-reclaimed", "bad-config", "tls-certificate-expiring", "geo-database-stale",
                     "edge-maintenance"):
            self.assertTrue((DOCS / "runbooks" / f"{name}.md").is_file(), name)

    def test_guide_links_every_document_and_example(self):
        guide = (DOCS / "README.md").read_text()
        for doc in DOCS.glob("*.md"):
            if doc.name != "README.md":
                self.assertIn(f"({doc.name})", guide, f"docs/README.md does not link {doc.name}")
        for example in (ROOT / "examples").glob("*.toml"):
            self.assertIn(f"examples/{example.name}", guide, f"docs/README.md does not mention {example.name}")

    def test_admin_endpoints_named_in_runbooks_exist(self):
        src = (ROOT / "server" / "admin.cc").read_text()
        served = set(re.findall(r'path == "(/[\w/]*)"', src))
        for page in PAGES:
            for path in re.findall(r"\$ADMIN(/[\w/]*)", page.read_text()):
                with self.subTest(page=page.name, path=path):
                    self.assertIn(path, served)


if __name__ == "__main__":
    unittest.main()
