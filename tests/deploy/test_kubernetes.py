"""deploy/kubernetes: every manifest parses, and the manifests agree with each
other and with geogate. Container ports match the listeners and the admin
address of the ConfigMap's geogate.toml; probes, the preStop hook and the
ServiceMonitor use endpoints that server/admin.cc serves; Services,
ServiceMonitor, PodDisruptionBudget and NetworkPolicy select the gateway pods
and name ports they have; every mounted volume, ConfigMap, Secret and key
exists; every file geogate.toml names is mounted; the grace period outlasts
the drain; and geogate.toml passes `geogate --check` (with throwaway TLS
files, a test geo database and dummy backend keys)."""
import json
import pathlib
import re
import shlex
import subprocess
import tempfile
import tomllib
import unittest

from deploy_common import DEPLOY, ROOT, geo_fixture, import_yaml, make_tls_pair, need_tool, run_check

K8S = DEPLOY / "kubernetes"
WORKLOAD_KINDS = {"DaemonSet", "Deployment"}
GATEWAY = "geogate"  # the gateway container's name in every workload


def admin_endpoints():
    """{(METHOD, path)} the admin listener serves, from server/admin.cc."""
    src = (ROOT / "server" / "admin.cc").read_text()
    return {(m.upper(), p) for p, m in re.findall(r'path == "(/[\w/]*)" && (get|post)', src)}


def port_of(address):
    return int(address.rsplit(":", 1)[1])


def matches(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


class ManifestsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        yaml = import_yaml()
        cls.files = {}
        cls.objects = []
        for path in sorted(K8S.glob("*.yaml")):
            docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
            cls.files[path.name] = docs
            for d in docs:
                cls.objects.append((path.name, d))
        cls.by_kind = {}
        for name, d in cls.objects:
            cls.by_kind.setdefault(d["kind"], []).append(d)
        cms = [d for d in cls.by_kind["ConfigMap"] if "geogate.toml" in d.get("data", {})]
        assert len(cms) == 1, "exactly one ConfigMap carries geogate.toml"
        cls.configmap = cms[0]
        cls.toml_text = cms[0]["data"]["geogate.toml"]
        cls.toml = tomllib.loads(cls.toml_text)
        cls.workloads = [d for d in cls.objects if d[1]["kind"] in WORKLOAD_KINDS]
        cls.admin = admin_endpoints()

    # ------------------------------------------------------------ helpers --
    def find(self, kind, name):
        for d in self.by_kind.get(kind, []):
            if d["metadata"]["name"] == name:
                return d
        self.fail(f"no {kind} named {name!r} in deploy/kubernetes")

    def pod(self, workload):
        return workload["spec"]["template"]["spec"]

    def container(self, workload, name=GATEWAY):
        for c in self.pod(workload)["containers"]:
            if c["name"] == name:
                return c
        self.fail(f"{workload['metadata']['name']}: no container {name!r}")

    def named_ports(self, container):
        return {p["name"]: p["containerPort"] for p in container.get("ports", [])}

    def resolve_port(self, container, port):
        ports = self.named_ports(container)
        if isinstance(port, int):
            self.assertIn(port, ports.values(), f"port {port} is not a port of {container['name']}")
            return port
        self.assertIn(port, ports, f"port name {port!r} is not a port of {container['name']}")
        return ports[port]

    def secret_keys(self, name):
        s = self.find("Secret", name)
        return set(s.get("data", {})) | set(s.get("stringData", {}))

    def toml_admin_port(self):
        return port_of(self.toml.get("gateway", {}).get("admin", {}).get("address", "127.0.0.1:9901"))

    # -------------------------------------------------------------- tests --
    def test_every_object_is_complete_and_in_the_geogate_namespace(self):
        self.assertTrue(self.objects)
        self.find("Namespace", "geogate")
        for fname, d in self.objects:
            if d["kind"] == "Kustomization":
                continue
            with self.subTest(file=fname, kind=d.get("kind")):
                self.assertIn("apiVersion", d)
                self.assertIn("name", d["metadata"])
                if d["kind"] != "Namespace":
                    self.assertEqual(d["metadata"].get("namespace"), "geogate")

    def test_the_expected_objects_exist(self):
        kinds = {d["kind"] for _, d in self.objects}
        for kind in ("DaemonSet", "Deployment", "ConfigMap", "Secret", "Service", "PodDisruptionBudget",
                     "ServiceMonitor", "NetworkPolicy", "PrometheusRule"):
            self.assertIn(kind, kinds)
        self.assertTrue(any(self.pod(w).get("hostNetwork") for _, w in self.workloads),
                        "the hostNetwork DaemonSet variant is missing")

    def test_container_ports_match_the_listeners_and_admin_address(self):
        listeners = {port_of(l["address"]) for l in self.toml["gateway"]["listeners"]}
        admin = self.toml_admin_port()
        self.assertTrue(self.toml["gateway"]["admin"]["address"].startswith("0.0.0.0:"),
                        "the probes and Prometheus reach the admin endpoint on the pod IP")
        for fname, w in self.workloads:
            with self.subTest(file=fname):
                ports = self.named_ports(self.container(w))
                self.assertEqual(ports.get("admin"), admin)
                self.assertEqual({ports.get("http"), ports.get("https")}, listeners)

    def test_probes_use_admin_endpoints(self):
        for fname, w in self.workloads:
            c = self.container(w)
            with self.subTest(file=fname):
                ready = c["readinessProbe"]["httpGet"]
                live = c["livenessProbe"]["httpGet"]
                self.assertEqual(ready["path"], "/readyz")
                self.assertEqual(live["path"], "/healthz")
                for probe in (ready, live):
                    self.assertIn(("GET", probe["path"]), self.admin)
                    self.assertEqual(self.resolve_port(c, probe["port"]), self.toml_admin_port())

    def test_prestop_drains_through_the_admin_endpoint(self):
        admin = self.toml_admin_port()
        self.assertIn(("POST", "/admin/drain"), self.admin)
        for fname, w in self.workloads:
            with self.subTest(file=fname):
                cmd = " ".join(self.container(w)["lifecycle"]["preStop"]["exec"]["command"])
                self.assertRegex(cmd, rf"-X POST [^;]*http://127\.0\.0\.1:{admin}/admin/drain")
                # It waits for geogate to finish (a SIGTERM during the drain
                # would make geogate exit at once).
                self.assertIn(f"http://127.0.0.1:{admin}/healthz", cmd)
                self.assertIn(("GET", "/healthz"), self.admin)

    def test_grace_period_outlasts_the_drain(self):
        up = self.toml.get("gateway", {}).get("upstream", {})
        drain_s = (up.get("drain_delay_ms", 2000) + up.get("drain_timeout_ms", 30000)) / 1000
        for fname, w in self.workloads:
            with self.subTest(file=fname):
                self.assertGreater(self.pod(w)["terminationGracePeriodSeconds"], drain_s)

    def test_volumes_configmaps_secrets_and_keys_exist(self):
        for fname, w in self.workloads:
            pod = self.pod(w)
            volumes = {v["name"]: v for v in pod.get("volumes", [])}
            for c in pod.get("initContainers", []) + pod["containers"]:
                for m in c.get("volumeMounts", []):
                    with self.subTest(file=fname, container=c["name"], mount=m["name"]):
                        self.assertIn(m["name"], volumes)
                        v = volumes[m["name"]]
                        if "configMap" in v or "secret" in v:
                            # subPath mounts never see updates: reload would miss them.
                            self.assertNotIn("subPath", m)
                for ef in c.get("envFrom", []):
                    if "secretRef" in ef:
                        self.find("Secret", ef["secretRef"]["name"])
                    if "configMapRef" in ef:
                        self.find("ConfigMap", ef["configMapRef"]["name"])
                for e in c.get("env", []):
                    ref = e.get("valueFrom", {}).get("secretKeyRef")
                    if ref:
                        self.assertIn(ref["key"], self.secret_keys(ref["name"]))
            for v in volumes.values():
                with self.subTest(file=fname, volume=v["name"]):
                    if "configMap" in v:
                        cm = self.find("ConfigMap", v["configMap"]["name"])
                        for item in v["configMap"].get("items", []):
                            self.assertIn(item["key"], cm["data"])
                    if "secret" in v:
                        keys = self.secret_keys(v["secret"]["secretName"])
                        for item in v["secret"].get("items", []):
                            self.assertIn(item["key"], keys)

    def config_files(self):
        """Files geogate.toml names: TLS certificate and key, geo database, CA files."""
        files = []
        for l in self.toml["gateway"]["listeners"]:
            if "tls" in l:
                files += [l["tls"]["cert"], l["tls"]["key"]]
        if self.toml.get("geo", {}).get("database"):
            files.append(self.toml["geo"]["database"])
        files += [b["ca_file"] for b in self.toml.get("backends", []) if b.get("ca_file")]
        return files

    def test_every_file_the_config_names_is_mounted(self):
        for fname, w in self.workloads:
            c = self.container(w)
            volumes = {v["name"]: v for v in self.pod(w)["volumes"]}
            mounts = {m["mountPath"]: volumes[m["name"]] for m in c["volumeMounts"]}
            self.assertEqual(self.find_mount(mounts, "/etc/geogate/geogate.toml")[1].get("configMap", {}).get("name"),
                             self.configmap["metadata"]["name"], "geogate.toml comes from the ConfigMap")
            for path in self.config_files():
                with self.subTest(file=fname, path=path):
                    self.assertTrue(path.startswith("/"), "relative paths would resolve inside the ConfigMap mount")
                    rel, vol = self.find_mount(mounts, path)
                    if "secret" in vol:
                        self.assertIn(rel, self.secret_keys(vol["secret"]["secretName"]))
                    if "configMap" in vol:
                        self.assertIn(rel, self.find("ConfigMap", vol["configMap"]["name"])["data"])

    def find_mount(self, mounts, path):
        for mount_path, vol in mounts.items():
            if path.startswith(mount_path.rstrip("/") + "/"):
                return path[len(mount_path.rstrip("/")) + 1:], vol
        self.fail(f"{path} is on no volume of the geogate container")

    def test_backend_keys_come_from_the_environment(self):
        needed = {b["api_key_env"] for b in self.toml.get("backends", []) if b.get("api_key_env")}
        self.assertTrue(needed)
        for fname, w in self.workloads:
            c = self.container(w)
            have = {e["name"] for e in c.get("env", [])}
            for ef in c.get("envFrom", []):
                if "secretRef" in ef:
                    have |= self.secret_keys(ef["secretRef"]["name"])
            with self.subTest(file=fname):
                self.assertLessEqual(needed, have, "api_key_env variables the pod does not set")

    def test_reload_sidecar_watches_the_mounted_config(self):
        dockerfile = (ROOT / "Dockerfile").read_text()
        for fname, w in self.workloads:
            with self.subTest(file=fname):
                gw = self.container(w)
                rw = self.container(w, "reload-watch")
                self.assertEqual(rw["image"], gw["image"], "the sidecar runs the geogate image")
                self.assertIn(f"COPY deploy/kubernetes/geogate-reload-watch {rw['command'][0]}", dockerfile)
                env = {e["name"]: e.get("value") for e in rw.get("env", [])}
                self.assertEqual(port_of(env["GEOGATE_ADMIN_URL"]), self.toml_admin_port())
                mounts = {m["mountPath"] for m in rw["volumeMounts"]}
                watched = env["GEOGATE_WATCH"].split()
                self.assertIn("/etc/geogate", watched)
                for p in watched:
                    self.assertIn(p, mounts, f"the sidecar watches {p} but does not mount it")
                gw_mounts = {m["mountPath"] for m in gw["volumeMounts"]}
                self.assertLessEqual(set(watched), gw_mounts)

    def test_pods_run_as_the_image_user(self):
        uid = int(re.search(r"^USER (\d+)", (ROOT / "Dockerfile").read_text(), re.M).group(1))
        for fname, w in self.workloads:
            sc = self.pod(w)["securityContext"]
            with self.subTest(file=fname):
                self.assertTrue(sc["runAsNonRoot"])
                self.assertEqual(sc["runAsUser"], uid)
                for c in self.pod(w)["containers"]:
                    self.assertFalse(c["securityContext"]["allowPrivilegeEscalation"])

    def test_hostnetwork_variant(self):
        for fname, w in self.workloads:
            if self.pod(w).get("hostNetwork"):
                self.assertEqual(self.pod(w)["dnsPolicy"], "ClusterFirstWithHostNet")
                self.assertEqual(w["spec"]["updateStrategy"]["rollingUpdate"].get("maxSurge"), 0,
                                 "host ports cannot be shared by an old and a new pod")

    def test_services_select_the_pods_and_their_ports(self):
        for svc in self.by_kind["Service"]:
            name = svc["metadata"]["name"]
            selected = [w for _, w in self.workloads
                        if matches(svc["spec"]["selector"], w["spec"]["template"]["metadata"]["labels"])]
            with self.subTest(service=name):
                self.assertEqual(len(selected), len(self.workloads), "the Service misses a workload variant")
                for w in selected:
                    for p in svc["spec"]["ports"]:
                        self.resolve_port(self.container(w), p["targetPort"])
                if svc["spec"].get("type") == "LoadBalancer":
                    self.assertNotIn("admin", [p["targetPort"] for p in svc["spec"]["ports"]],
                                     "the unauthenticated admin port must not be public")
                    if self.toml.get("geo", {}).get("client_ip", "peer") == "peer":
                        self.assertEqual(svc["spec"].get("externalTrafficPolicy"), "Local",
                                         "client_ip = peer needs the client's own source address")

    def test_workload_selectors_match_their_templates(self):
        for fname, w in self.workloads:
            with self.subTest(file=fname):
                self.assertTrue(matches(w["spec"]["selector"]["matchLabels"],
                                        w["spec"]["template"]["metadata"]["labels"]))

    def test_servicemonitor_scrapes_metrics_of_the_admin_service(self):
        self.assertIn(("GET", "/metrics"), self.admin)
        for sm in self.by_kind["ServiceMonitor"]:
            svcs = [s for s in self.by_kind["Service"]
                    if matches(sm["spec"]["selector"]["matchLabels"], s["metadata"]["labels"])]
            self.assertEqual(len(svcs), 1, "the ServiceMonitor selects one Service")
            svc = svcs[0]
            self.assertIn(svc["metadata"]["namespace"], sm["spec"]["namespaceSelector"]["matchNames"])
            for ep in sm["spec"]["endpoints"]:
                self.assertIn(ep["port"], [p["name"] for p in svc["spec"]["ports"]])
                self.assertEqual(ep["path"], "/metrics")
            # The alert rules select job="geogate".
            self.assertEqual(svc["metadata"]["labels"][sm["spec"]["jobLabel"]], "geogate")

    def test_pdb_and_networkpolicy_select_the_pods(self):
        for _, w in self.workloads:
            labels = w["spec"]["template"]["metadata"]["labels"]
            for pdb in self.by_kind["PodDisruptionBudget"]:
                self.assertTrue(matches(pdb["spec"]["selector"]["matchLabels"], labels))
            for np in self.by_kind["NetworkPolicy"]:
                self.assertTrue(matches(np["spec"]["podSelector"]["matchLabels"], labels))
                for rule in np["spec"]["ingress"]:
                    for p in rule.get("ports", []):
                        self.resolve_port(self.container(w), p["port"])

    def test_kustomization_lists_existing_files_one_workload_and_no_placeholder_secrets(self):
        k = self.files["kustomization.yaml"][0]
        for res in k["resources"]:
            self.assertTrue((K8S / res).is_file(), res)
        self.assertNotIn("secret.yaml", k["resources"])
        kinds = [d["kind"] for r in k["resources"] for d in self.files[r]]
        self.assertEqual(sum(kind in WORKLOAD_KINDS for kind in kinds), 1)
        images = {c["image"].rsplit(":", 1)[0] for _, w in self.workloads for c in self.pod(w)["containers"]}
        self.assertIn(k["images"][0]["name"], images)

    def test_configmap_passes_geogate_check(self):
        """The ConfigMap's geogate.toml as the pod would load it: its
        absolute paths re-rooted into a temporary directory that holds a
        throwaway certificate and key and a test geo database."""
        with tempfile.TemporaryDirectory() as tmp:
            root = pathlib.Path(tmp)
            text = self.toml_text
            tls = [(l["tls"]["cert"], l["tls"]["key"]) for l in self.toml["gateway"]["listeners"] if "tls" in l]
            for cert, key in tls:
                make_tls_pair(root / cert.lstrip("/"), root / key.lstrip("/"))
            db = self.toml.get("geo", {}).get("database")
            if db:
                target = root / db.lstrip("/")
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(geo_fixture(self.toml["geo"].get("country_field", "country.iso_code")).read_bytes())
            for path in self.config_files():
                self.assertTrue((root / path.lstrip("/")).exists(), f"test does not provide {path}")
                text = text.replace(f'"{path}"', f'"{root / path.lstrip("/")}"')
            config = root / "etc" / "geogate" / "geogate.toml"
            config.parent.mkdir(parents=True, exist_ok=True)
            config.write_text(text)
            env = {b["api_key_env"]: "test-key" for b in self.toml["backends"] if b.get("api_key_env")}
            r = run_check(config, env)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn(": ok (", r.stdout)


class KustomizeTest(unittest.TestCase):
    """`kubectl kustomize deploy/kubernetes` (what `kubectl apply -k`
    applies): it renders, and the result is the listed manifests themselves,
    in the geogate namespace, with the image tag the kustomization pins and
    nothing else changed. Debian 12's kubectl (kubernetes-client, which
    scripts/setup-debian.sh installs) has kustomize built in; no cluster is
    needed."""

    @classmethod
    def setUpClass(cls):
        kubectl = need_tool("kubectl")
        yaml = import_yaml()
        r = subprocess.run([kubectl, "kustomize", str(K8S)], capture_output=True, text=True,
                           timeout=120)
        if r.returncode != 0:
            raise AssertionError(f"kubectl kustomize {K8S} failed:\n{r.stderr}")
        cls.rendered = [d for d in yaml.safe_load_all(r.stdout) if d]
        cls.kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
        cls.sources = [d for f in cls.kustomization["resources"]
                       for d in yaml.safe_load_all((K8S / f).read_text()) if d]

    @staticmethod
    def key(d):
        return (d["kind"], d["metadata"]["name"])

    def expected(self):
        """The listed manifests as kustomize should render them."""
        k = self.kustomization
        pins = {i["name"]: i["newTag"] for i in k.get("images", [])}
        out = {}
        for d in self.sources:
            d = json.loads(json.dumps(d))  # a deep copy
            if d["kind"] != "Namespace":
                d["metadata"]["namespace"] = k["namespace"]
            spec = d.get("spec", {}).get("template", {}).get("spec", {})
            for c in spec.get("containers", []) + spec.get("initContainers", []):
                name = c["image"].rsplit(":", 1)[0] if ":" in c["image"].rsplit("/", 1)[-1] else c["image"]
                if name in pins:
                    c["image"] = f"{name}:{pins[name]}"
            out[self.key(d)] = d
        return out

    def test_renders_exactly_the_listed_objects(self):
        self.assertEqual(sorted(map(self.key, self.rendered)), sorted(self.expected()))
        self.assertNotIn("Secret", {d["kind"] for d in self.rendered})  # secret.yaml stays out

    def test_every_object_is_in_the_namespace_and_images_are_pinned(self):
        for d in self.rendered:
            if d["kind"] != "Namespace":
                self.assertEqual(d["metadata"].get("namespace"), self.kustomization["namespace"],
                                 self.key(d))
        pinned = {f"{i['name']}:{i['newTag']}" for i in self.kustomization["images"]}
        images = {c["image"] for d in self.rendered
                  for c in d.get("spec", {}).get("template", {}).get("spec", {}).get("containers", [])}
        self.assertTrue(images, "no workload rendered")
        self.assertLessEqual(images, pinned)

    def test_nothing_else_changes(self):
        expected = self.expected()
        for d in self.rendered:
            with self.subTest(object=self.key(d)):
                self.assertEqual(d, expected[self.key(d)])


class ReloadWatchScriptTest(unittest.TestCase):
    def test_shell_syntax(self):
        r = subprocess.run(["bash", "-n", str(K8S / "geogate-reload-watch")], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)


if __name__ == "__main__":
    unittest.main()
