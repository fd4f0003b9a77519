#!/usr/bin/env python3
"""Checks the library layout that each folder's README declares.

Every library folder's README.md names its public headers and the folders it
depends on. Production code (not tests/, bench/ or testing/ itself) may
include a header of another folder only when that folder is among its
dependencies and the header is among that folder's public ones; nothing in
production may include testing/. Exit status 1 lists each breach.
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
LIBS = ["common", "observability", "tracing", "accounting", "proxy", "server",
        "config", "health", "routing", "testing"]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/([A-Za-z0-9_]+\.h)"', re.M)


def declared(lib):
    text = (ROOT / lib / "README.md").read_text()
    pub = re.search(r"^Public headers: (.*)$", text, re.M)
    dep = re.search(r"^Depends on: (.*)$", text, re.M)
    if not pub or not dep:
        raise SystemExit(f"{lib}/README.md: needs 'Public headers:' and 'Depends on:' lines")
    headers = set(re.findall(r"`([A-Za-z0-9_]+\.h)`", pub.group(1)))
    deps = set(re.findall(r"`([a-z_]+)`", dep.group(1)))
    for h in headers:
        if not (ROOT / lib / h).is_file():
            raise SystemExit(f"{lib}/README.md: public header {h} does not exist")
    if len(text.splitlines()) > 15:
        raise SystemExit(f"{lib}/README.md: more than 15 lines")
    return headers, deps


def main():
    spec = {lib: declared(lib) for lib in LIBS}
    breaches = []
    for lib in LIBS:
        _, deps = spec[lib]
        for path in sorted((ROOT / lib).glob("*")):
            if path.suffix not in (".h", ".cc"):
                continue
            for m in INCLUDE.finditer(path.read_text()):
                other, header = m.group(1), m.group(2)
                where = f"{path.relative_to(ROOT)}: {other}/{header}"
                if other == lib or other not in spec:
                    continue
                if other == "testing" and lib != "testing":
                    breaches.append(f"{where}: production code includes a test double")
                elif other not in deps:
                    breaches.append(f"{where}: {lib}/README.md does not list {other} as a dependency")
                elif header not in spec[other][0]:
                    breaches.append(f"{where}: not a public header of {other}/")
    for b in breaches:
        print(b)
    if breaches:
        return 1
    print(f"layout ok: {len(LIBS)} libraries")
    return 0


if __name__ == "__main__":
    sys.exit(main())
