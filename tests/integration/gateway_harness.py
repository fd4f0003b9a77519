"""The geogate gateway as a test fixture: a config builder that writes
geogate.toml from Python values, and a Process wrapper that learns the
listener and admin ports from the gateway's operational log on stderr (all
listeners use port 0): one JSON line per listener, component "listener",
and one for the admin listener, component "admin", each with "port"."""

from __future__ import annotations

import json
import os
import re
import signal
import tempfile
import unittest
import urllib.request
from typing import Any, Optional

from harness import (GATEWAY_BIN, GpuSim, Process, TlsFiles, request, wait_until)

# The admin listener's line comes after every data-plane listener's.
_ADMIN_LINE = re.compile(r'^\{.*"component":"admin"')


def toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(f"no TOML form for {v!r}")


def _table(header: str, values: dict) -> str:
    lines = [header]
    lines += [f"{k} = {toml_value(v)}" for k, v in values.items() if v is not None]
    return "\n".join(lines) + "\n"


class GatewayConfig:
    """Builds a geogate.toml. Sections are plain dicts; backends can be
    declared from running GpuSim instances."""

    def __init__(self, edge: str = "test", workers: int = 2, tls: Optional[TlsFiles] = None,
                 proxy_protocol: bool = False, **gateway: Any):
        self.gateway = {"edge": edge, "workers": workers, "location": {"lat": 50.11, "lon": 8.68},
                        "access_log": "-"}
        self.gateway.update(gateway)
        self.listeners: list[dict] = [{"address": "127.0.0.1:0", "proxy_protocol": proxy_protocol}]
        if tls is not None:
            self.listeners.append({"address": "127.0.0.1:0",
                                   "tls": {"cert": tls.cert, "key": tls.key},
                                   "proxy_protocol": proxy_protocol})
        self.admin = {"address": "127.0.0.1:0"}
        self.limits: dict = {}
        self.upstream: dict = {}
        # Fast probes so tests see state changes quickly.
        self.health: dict = {"interval_ms": 50, "timeout_ms": 200}
        self.routing: dict = {}
        self.geo: dict = {"unknown": "anywhere"}
        self.regions: list[dict] = []
        self.backends: list[dict] = []
        self.models: list[dict] = []
        self.residency: list[dict] = [{"name": "anywhere", "allow_regions": []}]
        self.tenants: list[dict] = []
        self.tracing: dict = {}

    def region(self, name: str, jurisdiction: str = "EU", lat: float = 50.0,
               lon: float = 8.0) -> "GatewayConfig":
        self.regions.append({"name": name, "jurisdiction": jurisdiction,
                             "location": {"lat": lat, "lon": lon}})
        return self

    def backend(self, sim: GpuSim, region: str, models: Optional[list[str]] = None,
                name: Optional[str] = None, **extra: Any) -> "GatewayConfig":
        entry = {"name": name or sim.backend_name, "region": region, "url": sim.url,
                 "models": models or ["llama-3.1-8b"], "gpu": extra.pop("gpu", "L4"),
                 "provider": extra.pop("provider", "p1"), "tier": extra.pop("tier", "on-demand"),
                 "capacity": extra.pop("capacity", 64)}
        entry.update(extra)
        self.backends.append(entry)
        return self

    def render(self) -> str:
        anywhere = [r for r in self.residency if r["name"] == "anywhere"]
        for r in anywhere:  # the default rule allows every declared region
            if not r.get("allow_regions") and not r.get("allow_jurisdictions"):
                r["allow_regions"] = [reg["name"] for reg in self.regions]
        out = [_table("[gateway]", self.gateway)]
        for listener in self.listeners:
            out.append(_table("[[gateway.listeners]]", listener))
        out.append(_table("[gateway.admin]", self.admin))
        for header, values in (("[gateway.limits]", self.limits),
                               ("[gateway.upstream]", self.upstream), ("[health]", self.health),
                               ("[routing]", self.routing), ("[geo]", self.geo),
                               ("[tracing]", self.tracing)):
            if values:
                out.append(_table(header, values))
        for header, items in (("[[regions]]", self.regions), ("[[backends]]", self.backends),
                              ("[[models]]", self.models), ("[[residency]]", self.residency),
                              ("[[tenants]]", self.tenants)):
            for item in items:
                out.append(_table(header, item))
        return "\n".join(out)


class Gateway(Process):
    """geogate with a config written to a temp dir. After start():
    .url (first plain listener), .tls_url (first TLS listener, if any),
    .admin_url; metrics(), metric(), backends(), wait_ready(), sighup()."""

    def __init__(self, config: GatewayConfig | str, *, directory: Optional[str] = None,
                 env: Optional[dict[str, str]] = None, binary: str = GATEWAY_BIN):
        self.dir = directory or tempfile.mkdtemp(prefix="geogate-test-")
        self.config_path = os.path.join(self.dir, "geogate.toml")
        self.write_config(config)
        super().__init__([binary, "--config", self.config_path], name="geogate", env=env,
                         wait_ready=False)
        self.listeners: list[tuple[int, bool]] = []
        self.admin_port: Optional[int] = None

    def write_config(self, config: GatewayConfig | str) -> None:
        text = config.render() if isinstance(config, GatewayConfig) else config
        tmp = self.config_path + ".tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, self.config_path)  # atomic, as an operator's tooling would

    def _on_started(self) -> None:
        m = self.wait_for_line(_ADMIN_LINE, stream="stderr")
        self.admin_port = int(json.loads(m.string)["port"])
        for rec in self.log_records():
            if rec.get("component") == "listener" and "port" in rec:
                self.listeners.append((int(rec["port"]), bool(rec["tls"])))
        plain = [p for p, tls in self.listeners if not tls]
        self.port = plain[0] if plain else self.listeners[0][0]
        self.host = "127.0.0.1"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def tls_port(self) -> int:
        return next(p for p, tls in self.listeners if tls)

    @property
    def tls_url(self) -> str:
        return f"https://localhost:{self.tls_port}"

    @property
    def admin_url(self) -> str:
        return f"http://127.0.0.1:{self.admin_port}"

    def admin(self, method: str, path: str, timeout: float = 10.0):
        return request(self.admin_url, method, path, timeout=timeout)

    def ready(self) -> bool:
        status, _, _ = self.admin("GET", "/readyz")
        return status == 200

    def wait_until_ready(self, timeout: float = 15.0) -> None:
        wait_until(self.ready, timeout, message="gateway never became ready")

    def metrics(self) -> str:
        with urllib.request.urlopen(self.admin_url + "/metrics", timeout=10) as r:
            return r.read().decode()

    def metric(self, name: str, **labels: str) -> float:
        """Sum of the samples of `name` whose labels include `labels`."""
        total = 0.0
        for line in self.metrics().splitlines():
            if not line.startswith(name) or line.startswith("#"):
                continue
            m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$", line)
            if not m or m.group(1) != name:
                continue
            have = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(3) or ""))
            if all(have.get(k) == v for k, v in labels.items()):
                total += float(m.group(4))
        return total

    def backends(self) -> list[dict]:
        status, _, data = self.admin("GET", "/admin/backends")
        assert status == 200, data
        return data

    def backend(self, name: str) -> dict:
        return next(b for b in self.backends() if b["name"] == name)

    def wait_backend(self, name: str, healthy: bool = True, timeout: float = 10.0) -> None:
        wait_until(lambda: self.backend(name)["healthy"] == healthy, timeout,
                   message=f"backend {name} never became healthy={healthy}")

    def sighup(self) -> None:
        self.signal(signal.SIGHUP)

    def log_records(self) -> list[dict]:
        """The operational log (stderr) so far, one dict per JSON line."""
        return _json_lines(self.err_lines)

    def access_log(self) -> list[dict]:
        """Access-log lines printed so far (access_log = "-")."""
        return _json_lines(self.lines)

    def access_record(self, request_id: str, timeout: float = 10.0) -> dict:
        """The access-log line of `request_id`, once it is written."""
        return wait_until(lambda: next((r for r in self.access_log()
                                        if r.get("request_id") == request_id), None), timeout,
                          message=f"no access-log line for {request_id}")


def _json_lines(lines: list[str]) -> list[dict]:
    out = []
    for line in list(lines):
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
    return out


class SharedGatewayTestCase(unittest.TestCase):
    """One gpusim ("b1", serving MODELS with the SIM settings) and one gateway
    in front of it, shared by every test of the class. Subclasses override
    SIM and MODELS, and configure() for anything beyond a single region."""

    SIM: dict = {"ttft_ms": 2, "token_interval_ms": 1, "tokens": 4}
    MODELS: list[str] = ["llama-3.1-8b"]
    sim: GpuSim
    gw: "Gateway"

    @classmethod
    def configure(cls, sim: GpuSim) -> GatewayConfig:
        return GatewayConfig().region("r1").backend(sim, "r1")

    @classmethod
    def setUpClass(cls):
        cls.sim = GpuSim(name="b1", models=list(cls.MODELS), **cls.SIM)
        cls.sim.start()
        try:
            cls.gw = Gateway(cls.configure(cls.sim))
            cls.gw.start()
            cls.gw.wait_until_ready()
        except BaseException:
            cls.sim.stop()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.gw.stop()
        cls.sim.stop()
