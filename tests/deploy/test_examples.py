"""examples/*.toml: every shipped example passes `geogate --check`.

Each example is copied into a temporary directory; the files it names by
relative path (TLS certificate and key, geo database, CA files, the access
log's directory) are created there (a throwaway self-signed pair, a test
geo database of the schema the example's country_field expects), and every
api_key_env variable is set to a dummy key. An example may not name an
absolute path: it could not be checked anywhere but on its author's host."""
import pathlib
import shutil
import tempfile
import tomllib
import unittest

from deploy_common import ROOT, geo_fixture, make_tls_pair, run_check

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

    def test_every_example_passes_check(self):
        for example in EXAMPLES:
            with self.subTest(example=example.name), tempfile.TemporaryDirectory() as tmp:
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
                        shutil.copy(geo_fixture(cfg["geo"].get("country_field", "country.iso_code")), targets[0])
                    elif kind == "tls" and not targets[0].exists():
                        make_tls_pair(targets[0], targets[1])
                    elif kind == "ca" and not targets[0].exists():
                        make_tls_pair(targets[0], targets[0].with_name(targets[0].name + ".key"))
                env = {b["api_key_env"]: "test-key" for b in cfg.get("backends", []) if b.get("api_key_env")}
                r = run_check(config, env)
                self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
                self.assertIn(": ok (", r.stdout)


if __name__ == "__main__":
    unittest.main()
