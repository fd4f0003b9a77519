#!/usr/bin/env python3
"""Lists every test case the last CTest runs skipped, with the reason.

scripts/test calls it at the end with its build directories, so a case that
passes only by skipping (a tool missing, no permission for a network
namespace, ...) is visible in the CI log instead of hiding among the "ok"s.
It reads each build's Testing/Temporary/LastTest.log (what `ctest` last ran
there): Python unittest cases reported as "skipped 'reason'" by
`python3 -m unittest -v`. (A whole CTest test skipped by its
SKIP_RETURN_CODE, like the benchmark smoke run without wrk, is listed by
ctest itself under "The following tests did not run".)

    scripts/list-skips.py BUILD_DIR...
"""

from __future__ import annotations

import os
import re
import sys

# "test_x (module.Class.test_x) ... skipped 'why'" (3.11), possibly with a
# docstring line or the test's own stderr between the name and the verdict;
# "setUpClass (module.Class) ... skipped 'why'" for a whole class.
_CASE = re.compile(r"^(\w+) \(([\w.]+)\)")
_SKIPPED = re.compile(r"(?:^|\.\.\. )skipped '(.*)'\s*$")
_CTEST_START = re.compile(r"^\d+/\d+ Testing: (\S+)")


def skips_in(log_path: str) -> list[tuple[str, str, str]]:
    """(ctest test, unittest case, reason) for each skip in one LastTest.log."""
    out = []
    ctest_test = "?"
    case = None
    with open(log_path, encoding="utf-8", errors="replace") as f:
        lines = f.read().splitlines()
    for line in lines:
        m = _CTEST_START.match(line)
        if m:
            ctest_test, case = m.group(1), None
            continue
        m = _CASE.match(line)
        if m:
            name, where = m.groups()
            case = where if where.endswith("." + name) else f"{where}.{name}"
        m = _SKIPPED.search(line)
        if m and case:
            out.append((ctest_test, case, m.group(1)))
            case = None
    return out


def main(argv: list[str]) -> int:
    found = []
    for build in argv[1:]:
        log = os.path.join(build, "Testing", "Temporary", "LastTest.log")
        if os.path.exists(log):
            found += [(build, *s) for s in skips_in(log)]
    if not found:
        print("==> skipped tests: none")
        return 0
    print(f"==> skipped tests: {len(found)}")
    for build, ctest_test, case, reason in found:
        print(f"    [{build}] {ctest_test}: {case}: {reason}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
