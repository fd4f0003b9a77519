#!/usr/bin/env bash
# Installs every Debian 12 package geogate needs to build, test, demo and
# benchmark. Safe to run again: apt-get skips what is already there.
#
#   scripts/setup-debian.sh            everything (build, tests, demo, bench)
#   scripts/setup-debian.sh --runtime  only the shared libraries geogate links
set -euo pipefail

runtime_pkgs=(
  libssl3 libmaxminddb0 libtomlplusplus3 libboost-json1.81.0 libboost-url1.81.0
  libabsl20220623 ca-certificates
)

build_pkgs=(
  build-essential cmake ninja-build pkg-config git
  libboost1.81-dev libboost-json1.81-dev libboost-url1.81-dev
  libssl-dev openssl libmaxminddb-dev mmdb-bin libabsl-dev libtomlplusplus-dev
  catch2
  # test fixtures: MaxMind's own .mmdb writer
  libmaxmind-db-writer-perl
  # integration tests and tooling
  python3 curl ca-certificates iproute2 procps
  clang libclang-rt-14-dev clang-format
  # metrics and alert-rule checks, manifest lint, anycast config check
  prometheus yamllint bird2
  # benchmarks: load generator and side-by-side peers
  wrk haproxy nginx-light linux-perf libbenchmark-dev
)

if [[ "${1:-}" == "--runtime" ]]; then
  pkgs=("${runtime_pkgs[@]}")
else
  pkgs=("${build_pkgs[@]}")
  # Node.js + npm for the end-to-end test with the official OpenAI SDK. Some
  # images carry a NodeSource build whose nodejs package already contains npm
  # and conflicts with Debian's npm package: only install when missing.
  command -v npm >/dev/null 2>&1 || pkgs+=(nodejs npm)
fi

sudo=""
[[ $(id -u) -eq 0 ]] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
# Package post-install scripts must not start nginx/haproxy/prometheus/bird
# daemons on a build machine: we start our own, on loopback, when needed.
if [[ ! -e /usr/sbin/policy-rc.d ]]; then
  printf '#!/bin/sh\nexit 101\n' | $sudo tee /usr/sbin/policy-rc.d >/dev/null
  $sudo chmod +x /usr/sbin/policy-rc.d
  trap '$sudo rm -f /usr/sbin/policy-rc.d' EXIT
fi
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${pkgs[@]}"
