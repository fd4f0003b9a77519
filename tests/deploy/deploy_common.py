"""Shared helpers of the deploy tests (tests/deploy/test_*.py).

Python 3 standard library only, plus PyYAML (Debian python3-yaml, installed
by scripts/setup-debian.sh) for the modules that read Kubernetes manifests.
"""
import os
import pathlib
import re
import shutil
import subprocess
import sys
import unittest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"


def bin_dir() -> pathlib.Path:
    return pathlib.Path(os.environ.get("GEOGATE_BIN_DIR", ROOT / "build"))


def geogate_bin() -> pathlib.Path:
    """The built gateway. CI builds it before the tests run, so a missing
    binary is a failure, not a skip."""
    path = bin_dir() / "server" / "geogate"
    if not os.access(path, os.X_OK):
        raise AssertionError(
            f"{path} is not built: cmake --build --preset default --target geogate "
            "(or set GEOGATE_BIN_DIR to the build directory)")
    return path


def geo_fixture(country_field: str) -> pathlib.Path:
    """A generated test .mmdb with records at `country_field` (built by the
    geogate_geo_fixtures target into the build directory)."""
    name = "geo-flat.mmdb" if country_field == "country_code" else "geo-city.mmdb"
    env = "GEOGATE_GEO_FLAT_MMDB" if country_field == "country_code" else "GEOGATE_GEO_CITY_MMDB"
    path = pathlib.Path(os.environ.get(env) or bin_dir() / "tests" / "fixtures" / "geo" / name)
    if not path.is_file():
        raise AssertionError(
            f"{path} is missing: cmake --build --preset default --target geogate_geo_fixtures")
    return path


def need_tool(name: str) -> str:
    """Path of a command-line tool, or skip the test with a clear message.
    scripts/setup-debian.sh installs every tool these tests use, so in CI
    none is ever skipped."""
    path = shutil.which(name) or (f"/usr/sbin/{name}" if os.access(f"/usr/sbin/{name}", os.X_OK) else None)
    if not path:
        raise unittest.SkipTest(f"{name} is not installed (scripts/setup-debian.sh installs it)")
    return path


def import_yaml():
    """PyYAML, also when the interpreter CMake found is not Debian's."""
    try:
        import yaml  # noqa: PLC0415
        return yaml
    except ImportError:
        pass
    for p in ("/usr/lib/python3/dist-packages",):
        if os.path.isdir(os.path.join(p, "yaml")) and p not in sys.path:
            sys.path.append(p)
            try:
                import yaml  # noqa: PLC0415
                return yaml
            except ImportError:
                sys.path.remove(p)
    raise unittest.SkipTest("PyYAML is not installed (Debian python3-yaml; scripts/setup-debian.sh installs it)")


def make_tls_pair(cert: pathlib.Path, key: pathlib.Path) -> None:
    """A throwaway self-signed certificate and key, for configs that name TLS files."""
    openssl = need_tool("openssl")
    cert.parent.mkdir(parents=True, exist_ok=True)
    key.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", "/CN=geogate-deploy-test"],
        check=True, capture_output=True)


def run_check(config: pathlib.Path, env_extra: dict) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.update(env_extra)
    return subprocess.run([str(geogate_bin()), "--check", "--config", str(config)],
                          capture_output=True, text=True, env=env, timeout=60)


# ---------------------------------------------------------------------------
# The metric vocabulary: every metric name the alert rules and the dashboard
# may use, with its type and labels. The names geogate exports today are
# checked against server/metrics_exporter.cc (test_prometheus.py), so this
# list cannot drift from the exporter; PLANNED are the issue-7 metrics the
# gateway will export with exactly these names and labels.
# ---------------------------------------------------------------------------
EXPORTED = {
    "geogate_requests_total": ("counter", {"backend", "region", "gpu", "provider", "model", "tenant", "code"}),
    "geogate_responses_total": ("counter", {"code_class"}),
    "geogate_upstream_errors_total": ("counter", {"backend", "reason"}),
    "geogate_failovers_total": ("counter", {"reason"}),
    "geogate_retry_budget_exhausted_total": ("counter", set()),
    "geogate_residency_decisions_total": ("counter", {"rule", "outcome", "reason"}),
    "geogate_tenant_rejections_total": ("counter", {"tenant", "reason"}),
    "geogate_selections_total": ("counter", {"outcome"}),
    "geogate_tokens_total": ("counter", {"backend", "model", "tenant", "kind"}),
    "geogate_ttft_seconds": ("histogram", {"backend"}),
    "geogate_request_duration_seconds": ("histogram", {"backend"}),
    "geogate_inter_token_gap_seconds": ("histogram", {"backend"}),
    "geogate_inflight": ("gauge", {"backend", "region"}),
    "geogate_backend_healthy": ("gauge", {"backend", "region"}),
    "geogate_backend_state": ("gauge", {"backend", "state"}),
    "geogate_backend_ejected": ("gauge", {"backend"}),
    "geogate_backend_rtt_seconds": ("gauge", {"backend"}),
    "geogate_backend_ttft_ewma_seconds": ("gauge", {"backend"}),
    "geogate_backend_expected_ttft_seconds": ("gauge", {"backend"}),
    "geogate_backend_utilization": ("gauge", {"backend", "region", "gpu", "provider", "tier"}),
    "geogate_probes_total": ("counter", {"backend", "result"}),
    "geogate_probe_rtt_seconds": ("histogram", {"backend"}),
    "geogate_ejections_total": ("counter", {"backend"}),
    "geogate_backend_state_changes_total": ("counter", {"backend"}),
    "geogate_config_reloads_total": ("counter", {"result"}),
    "geogate_config_last_reload_success_timestamp_seconds": ("gauge", set()),
    "geogate_residency_rule_available": ("gauge", {"rule"}),
    "geogate_config_last_reload_failure_timestamp_seconds": ("gauge", set()),
    "geogate_config_generation": ("gauge", set()),
    "geogate_config_info": ("gauge", {"hash", "edge"}),
    "geogate_ready": ("gauge", set()),
    "geogate_draining": ("gauge", set()),
    "geogate_connections_open": ("gauge", set()),
    "geogate_connections_idle": ("gauge", set()),
    "geogate_connections_total": ("counter", {"event"}),
    "geogate_connection_rejections_total": ("counter", {"reason"}),
    "geogate_client_timeouts_total": ("counter", {"phase"}),
    "geogate_active_requests": ("gauge", set()),
    "geogate_active_streams": ("gauge", set()),
    "geogate_tls_handshakes_total": ("counter", {"result"}),
    "geogate_tls_resumed_handshakes_total": ("counter", set()),
    "geogate_proxy_protocol_failures_total": ("counter", set()),
    "geogate_streams_interrupted_total": ("counter", set()),
    "geogate_client_disconnects_total": ("counter", set()),
    "geogate_bytes_total": ("counter", {"direction"}),
    "geogate_access_log_dropped_batches_total": ("counter", set()),
    "geogate_trace_spans_exported_total": ("counter", set()),
    "geogate_trace_spans_dropped_total": ("counter", {"reason"}),
    "geogate_tls_certificate_expiry_timestamp_seconds": ("gauge", {"listener"}),
    "geogate_geo_database_build_timestamp_seconds": ("gauge", set()),
    "geogate_geo_database_info": ("gauge", {"type", "path"}),
    "geogate_geo_database_reload_failures_total": ("counter", set()),
}

PLANNED = {
    "geogate_pool_utilization": ("gauge", {"region", "gpu", "model", "window"}),
    "geogate_pool_desired_backends": ("gauge", {"region", "gpu", "model"}),
    "geogate_pool_backends": ("gauge", {"region", "gpu", "model"}),
    "geogate_reserved_idle_cost_dollars_per_hour": ("gauge", {"region", "gpu"}),
    "geogate_tenant_budget_used_ratio": ("gauge", {"tenant"}),
    "geogate_cost_dollars_total": ("counter", {"tenant", "backend", "model"}),
    "geogate_gpu_seconds_total": ("counter", {"tenant", "backend", "model"}),
}

# Prometheus' own series.
SYNTHETIC = {"up": ("gauge", set())}

VOCABULARY = {**EXPORTED, **PLANNED, **SYNTHETIC}

# Labels the scrape adds (job, instance) or the ServiceMonitor relabels in
# (node); `le` of histogram buckets is handled per metric.
TARGET_LABELS = {"job", "instance", "node"}

_SUFFIXES = {"_bucket": {"le"}, "_sum": set(), "_count": set()}

# PromQL words that look like identifiers but are not metrics.
_PROMQL_WORDS = {
    "sum", "min", "max", "avg", "count", "by", "without", "on", "ignoring", "group_left", "group_right",
    "rate", "irate", "increase", "histogram_quantile", "time", "and", "or", "unless", "bool", "offset",
    "clamp_min", "clamp_max", "abs", "topk", "bottomk", "label_values", "le", "inf", "nan", "absent",
    "changes", "delta", "deriv", "vector", "scalar", "humanize", "humanizePercentage", "ceil", "floor",
    "round",
}


def metric_labels(name: str):
    """(labels, is_known) for a series name, resolving histogram suffixes."""
    if name in VOCABULARY:
        kind, labels = VOCABULARY[name]
        return labels, kind != "histogram"
    for suffix, extra in _SUFFIXES.items():
        base = name[: -len(suffix)] if name.endswith(suffix) else None
        if base and base in VOCABULARY and VOCABULARY[base][0] == "histogram":
            return VOCABULARY[base][1] | extra, True
    return set(), False


_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_SELECTOR = re.compile(r"\b([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{([^}]*)\}")
_MATCHER = re.compile(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")
_IDENT = re.compile(r"(?<![\w:$\[])([a-zA-Z_:][a-zA-Z0-9_:]*)")


def promql_problems(expr: str) -> list:
    """Metric names and labels of a PromQL expression that are not in the
    vocabulary. Good enough for our own expressions; not a PromQL parser
    (promtool checks the syntax)."""
    problems = []
    used = {}
    for m in _SELECTOR.finditer(expr):
        name = m.group(1)
        labels, known = metric_labels(name)
        if not known:
            continue  # reported below
        for label in _MATCHER.findall(_STRING.sub('""', m.group(2))):
            if label not in labels | TARGET_LABELS:
                problems.append(f"{name} has no label {label!r}")
    bare = _STRING.sub('""', expr)
    bare = re.sub(r"\{[^}]*\}", "", bare)  # matchers
    bare = re.sub(r"\[[^\]]*\]", "", bare)  # ranges
    groups = " ".join(_GROUPING.findall(bare))
    bare = _GROUPING.sub("", bare)
    for ident in _IDENT.findall(bare):
        if ident in _PROMQL_WORDS or re.fullmatch(r"[0-9.e]+", ident):
            continue
        labels, known = metric_labels(ident)
        if not known:
            problems.append(f"unknown metric {ident!r}")
        else:
            used[ident] = labels
    all_labels = set().union(*used.values()) if used else set()
    for label in re.findall(r"[a-zA-Z_][a-zA-Z0-9_]*", groups):
        if label not in all_labels | TARGET_LABELS:
            problems.append(f"label {label!r} in a by/on clause is on none of {sorted(used)}")
    return problems
