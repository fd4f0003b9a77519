#!/usr/bin/env python3
"""Checks the library layout that each folder's README declares.

Every library folder's README.md names its public headers and the folders it
depends on. Production code (not tests/, bench/ or testing/ itself) may
include a header of another folder only when that folder is among its
dependencies and the header is among that folder's public ones; nothing in
production may include testing/. Each folder's code lives in its own
namespace, geogate::<folder>: a block of another geogate namespace may only
forward-declare (`class X;`), and testing/ declares each double in the
namespace of the interface it stands in for (geogate::health, ...). Exit status 1
lists each breach.
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
LIBS = ["common", "observability", "tracing", "accounting", "proxy", "server",
        "config", "health", "routing", "testing"]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/([A-Za-z0-9_]+\.h)"', re.M)
NAMESPACE = re.compile(r"^namespace geogate((?:::[a-z_]+)*) \{\n(.*?)^\}", re.M | re.S)
# common/'s vocabulary headers that every folder uses unqualified (strings.h,
# splitmix64.h) sit in geogate itself.
ROOT_NAMESPACE_OK = {"common"}
FORWARD_DECLARATION = re.compile(r"^\s*((class|struct) [A-Za-z0-9_]+;)?\s*(//.*)?$")


def namespace_breaches(lib, path, text):
    """Blocks of `text` outside geogate::<lib> that declare more than names."""
    out = []
    for m in NAMESPACE.finditer(text):
        parts = [p for p in m.group(1).split("::") if p]
        own = parts[:1] == [lib] or (lib == "testing" and parts[:1] != [])
        if own or (not parts and lib in ROOT_NAMESPACE_OK):
            continue
        if all(FORWARD_DECLARATION.match(line) for line in m.group(2).splitlines()):
            continue
        name = "geogate" + m.group(1)
        out.append(f"{path.relative_to(ROOT)}: declares in {name}, not geogate::{lib}")
    return out


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
            text = path.read_text()
            breaches += namespace_breaches(lib, path, text)
            for m in INCLUDE.finditer(text):
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
