#!/usr/bin/env bash
# Installs the Debian packages (scripts/setup-debian.sh) unless everything the
# build and tests need is already present, so repeated runs stay fast.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
need=0
for cmd in cmake ninja g++ pkg-config python3 openssl mmdblookup perl promtool wrk haproxy nginx clang++ run-clang-tidy npm yamllint bird \
           podman debootstrap kubectl; do
  command -v "$cmd" >/dev/null 2>&1 || need=1
done
for f in /usr/include/boost/beast.hpp /usr/include/boost/json.hpp /usr/include/boost/url.hpp \
         /usr/include/x86_64-linux-gnu/maxminddb.h /usr/include/toml++/toml.h /usr/include/catch2/catch.hpp \
         /usr/include/absl/container/flat_hash_map.h /usr/lib/x86_64-linux-gnu/perl5/5.36/MaxMind/DB/Writer.pm; do
  [[ -e "$f" ]] || need=1
done
python3 -c 'import yaml' 2>/dev/null || need=1
[[ -x /usr/sbin/runc || -x /usr/bin/runc ]] || need=1
if [[ $need -eq 1 ]]; then
  echo "==> installing Debian packages (scripts/setup-debian.sh)"
  "$here/setup-debian.sh"
fi
