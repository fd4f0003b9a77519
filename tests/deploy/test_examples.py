"""examples/*.toml: every shipped example passes `geogate --check`.

Each example is copied into a temporary directory; the files it names by
relative path (TLS certificate and key, geo database, CA files, the access
log's directory) are created there (a throwaway self-signed pair, a test
geo database of the schema the example's country_field expects), and every
api_key_env variable is set to a dummy key. An example may not name an
absolute path: it could not be checked anywhere but on its author's host.

`--check` opens those files the way start-up does, so a placeholder of the
wrong kind (a geo database of the wrong schema, a key that does not match its
certificate) fails the check, and so would a real one. Every example and the
Kubernetes ConfigMap's geogate.toml also pass `--check --syntax-only` with
none of their files or secrets present: the CI lint (issue #18, item 4)."""
import os
import pathlib
import shutil
import subprocess
import tempfile
import tomllib
import unittest

from deploy_common import DEPLOY, ROOT, geo_fixture, geogate_bin, import_yaml, make_tls_pair, run_check

EXAMPLES = sorted((ROOT / "examples").glob("*.toml"))


def named_files(cfg):
    """(kind, paths) of every file the config names: a TLS pair is one entry."""
    out = []
    for listener in cfg.get("gateway", {}).get("listeners", []):
        if "tls" in listener:
            out.append(("tls", (listener["tls"]["cert"], listener["tls"]["key"])))
    if cfg.get("geo", {}).get("database"):
        out.append(("mmdb", (cfg["geo"]["database"],)))
    out += [("ca", (b["ca_file"],)) for b in cfg.get("backends", []) if b.get("ca_file")]
    log = cfg.get("gateway", {}).get("access_log", "-")
    if log not in ("-", ""):
        out.append(("log", (log,)))
    return out


class ExamplesTest(unittest.TestCase):
    def test_the_documented_examples_exist(self):
        names = {p.name for p in EXAMPLES}
        for wanted in ("single-region.toml", "three-regions-eu-residency.toml", "multi-provider-fleet.toml"):
            self.assertIn(wanted, names)

    def fill_in(self, example, tmp, country_field=None):
        """Copies `example` under `tmp` with every file it names generated
        beside it; returns (config path, env with every api_key_env set).
        `country_field` overrides the schema of the generated database."""
        cfg = tomllib.loads(example.read_text())
        # examples/NAME.toml under TMP/examples, so "../x" stays inside TMP.
        config = pathlib.Path(tmp) / "examples" / example.name
        config.parent.mkdir()
        shutil.copy(example, config)
        for kind, rels in named_files(cfg):
            targets = []
            for rel in rels:
                self.assertFalse(pathlib.PurePath(rel).is_absolute(),
                                 f"{example.name} names an absolute path: {rel}")
                target = (config.parent / rel).resolve()
                self.assertTrue(str(target).startswith(tmp), f"{rel} leaves the example's tree")
                target.parent.mkdir(parents=True, exist_ok=True)
                targets.append(target)
            if kind == "mmdb":
                field = country_field or cfg["geo"].get("country_field", "country.iso_code")
                shutil.copy(geo_fixture(field), targets[0])
            elif kind == "tls" and not targets[0].exists():
                make_tls_pair(targets[0], targets[1])
            elif kind == "ca" and not targets[0].exists():
                make_tls_pair(targets[0], targets[0].with_name(targets[0].name + ".key"))
        env = {b["api_key_env"]: "test-key" for b in cfg.get("backends", []) if b.get("api_key_env")}
        return config, env

    def test_a_wrong_placeholder_fails_the_check(self):
        """The check opens the files: a geo database of the other schema is
        refused at geo.database, as start-up would refuse it."""
        with_db = [e for e in EXAMPLES if tomllib.loads(e.read_text()).get("geo", {}).get("database")]
        self.assertTrue(with_db)
        for example in with_db:
            with self.subTest(example=example.name), tempfile.TemporaryDirectory() as tmp:
                field = tomllib.loads(example.read_text())["geo"].get("country_field", "country.iso_code")
                other = "country.iso_code" if field == "country_code" else "country_code"
                config, env = self.fill_in(example, tmp, country_field=other)
                r = run_check(config, env)
                self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
                self.assertRegex(r.stderr, rf"{example.name}:\d+:\d+: geo database .*no record has a string")

    def test_every_example_passes_syntax_only_with_nothing_present(self):
        env = dict(os.environ)
        for example in EXAMPLES:
            for b in tomllib.loads(example.read_text()).get("backends", []):
                env.pop(b.get("api_key_env", ""), None)
        for example in EXAMPLES:
            with self.subTest(example=example.name):
                r = subprocess.run([str(geogate_bin()), "--check", "--syntax-only", "--config", str(example)],
                                   capture_output=True, text=True, env=env, timeout=60)
                self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
                self.assertIn("syntax only", r.stdout)

    def test_the_configmap_passes_syntax_only_as_shipped(self):
        yaml = import_yaml()
        docs = list(yaml.safe_load_all((DEPLOY / "kubernetes" / "configmap.yaml").read_text()))
        texts = [d["data"]["geogate.toml"] for d in docs if d and "geogate.toml" in d.get("data", {})]
        self.assertEqual(len(texts), 1)
        with tempfile.TemporaryDirectory() as tmp:
            config = pathlib.Path(tmp) / "geogate.toml"
            config.write_text(texts[0])
            r = subprocess.run([str(geogate_bin()), "--check", "--syntax-only", "--config", str(config)],
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_every_example_passes_check(self):
        for example in EXAMPLES:
            with self.subTest(example=example.name), tempfile.TemporaryDirectory() as tmp:
                config, env = self.fill_in(example, tmp)
                r = run_check(config, env)
                self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
                self.assertIn(": ok (", r.stdout)


if __name__ == "__main__":
    unittest.main()
