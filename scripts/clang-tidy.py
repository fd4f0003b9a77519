#!/usr/bin/env python3
"""Runs clang-tidy (the project's .clang-tidy) over the libraries' sources.

    scripts/clang-tidy.py BUILD_DIR [-j N]

CTest's deploy/clang-tidy calls this with the default build. The build's
compile_commands.json names the proxy's transport sources twice: once for
geogate_proxy and once for geogate_proxy_test_transport, which compiles the
same files against Beast's test stream. clang-tidy checks every command it
finds for a file, so those sources would be analysed twice, for the same
findings, at a quarter of the whole run's cost. This writes a copy of the
database with one command per source (the production one) into a
temporary directory and runs run-clang-tidy against that. Warnings are
errors (.clang-tidy); the exit status is run-clang-tidy's.
"""
import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Targets that compile a library's sources a second time for tests only.
TEST_ONLY_TARGETS = ("geogate_proxy_test_transport.dir",)


def one_command_per_source(database):
    """The database's entries with one per source file: the first entry that
    does not belong to a test-only build of the same sources (or the first
    entry, when every one does)."""
    chosen = {}
    for entry in database:
        path = os.path.normpath(os.path.join(entry["directory"], entry["file"]))
        test_only = any(t in entry.get("command", " ".join(entry.get("arguments", [])))
                        for t in TEST_ONLY_TARGETS)
        if path not in chosen or (chosen[path][0] and not test_only):
            chosen[path] = (test_only, entry)
    return [entry for _, entry in chosen.values()]


def libraries() -> list[str]:
    """The library folders, as scripts/check-layout.py lists them (one list;
    the test's own copy of it had left tracing/ out)."""
    path = os.path.join(ROOT, "scripts", "check-layout.py")
    spec = importlib.util.spec_from_file_location("check_layout", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return list(module.LIBS)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build", help="a build directory with compile_commands.json")
    parser.add_argument("-j", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    source = os.path.join(args.build, "compile_commands.json")
    try:
        with open(source) as f:
            database = json.load(f)
    except (OSError, ValueError) as error:
        print(f"clang-tidy.py: cannot read {source}: {error}", file=sys.stderr)
        return 2
    tool = shutil.which("run-clang-tidy")
    if tool is None:
        print("clang-tidy.py: run-clang-tidy is not installed (clang-tidy)", file=sys.stderr)
        return 2
    # The sources and the headers checked: the libraries' own, from one list.
    folders = "|".join(libraries())
    pattern = f"{ROOT}/({folders})/[^/]+\\.cc$"
    header_filter = f"{ROOT}/({folders})/[^/]+\\.h$"
    with tempfile.TemporaryDirectory(prefix="geogate-tidy-") as tmp:
        with open(os.path.join(tmp, "compile_commands.json"), "w") as f:
            json.dump(one_command_per_source(database), f)
        return subprocess.call([tool, "-p", tmp, "-quiet", "-j", str(args.j),
                                "-header-filter", header_filter, pattern], cwd=ROOT)


if __name__ == "__main__":
    sys.exit(main())
