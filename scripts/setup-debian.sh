#!/usr/bin/env bash
# Installs every Debian 12 package geogate needs to build, test, demo and
# benchmark. Safe to run again: apt-get skips what is already there.
#
#   scripts/setup-debian.sh               everything (build, tests, demo, bench)
#   scripts/setup-debian.sh --build-only  only what `cmake --preset release`
#                                         needs to build geogate (the Dockerfile)
#   scripts/setup-debian.sh --runtime     only the shared libraries geogate links
#   ... --print                           list the packages, one a line, and
#                                         install nothing (tests/deploy checks
#                                         every name is a Debian 12 package)
set -euo pipefail

runtime_pkgs=(
  libssl3 libmaxminddb0 libtomlplusplus3 libboost-json1.81.0 libboost-url1.81.0
  libabsl20220623 ca-certificates
)

# Enough to compile the geogate binary (release preset, no tests).
compile_pkgs=(
  build-essential cmake ninja-build pkg-config
  libboost1.81-dev libboost-json1.81-dev libboost-url1.81-dev
  libssl-dev libmaxminddb-dev libabsl-dev libtomlplusplus-dev
)

build_pkgs=(
  "${compile_pkgs[@]}" git openssl mmdb-bin
  catch2
  # test fixtures: MaxMind's own .mmdb writer
  libmaxmind-db-writer-perl
  # integration tests and tooling
  python3 curl ca-certificates iproute2 procps
  clang libclang-rt-14-dev clang-format clang-tidy
  # metrics and alert-rule checks, manifest lint and parsing, anycast config check
  prometheus yamllint python3-yaml bird2
  # benchmarks: load generator and side-by-side peers
  wrk haproxy nginx-light linux-perf libbenchmark-dev
  # bench/ab's IO_URING variant (Asio's io_uring backend)
  liburing-dev
  # the container image, built and run without a daemon (tests/deploy/
  # test_container.py): podman, runc (crun refuses hybrid cgroup layouts),
  # debootstrap for the debian:12-slim base no registry serves in CI
  podman runc debootstrap
)

mode=all
print=0
for arg in "$@"; do
  case "$arg" in
    --runtime) mode=runtime ;;
    --build-only) mode=build-only ;;
    --print) print=1 ;;
    *) echo "usage: $0 [--runtime|--build-only] [--print]" >&2; exit 2 ;;
  esac
done

case "$mode" in
  runtime) pkgs=("${runtime_pkgs[@]}") ;;
  build-only) pkgs=("${compile_pkgs[@]}") ;;
  *)
    pkgs=("${build_pkgs[@]}")
    # Node.js + npm for the end-to-end tests with the client SDKs. Some
    # images carry a NodeSource build whose nodejs package already contains npm
    # and conflicts with Debian's npm package: only install when missing.
    command -v npm >/dev/null 2>&1 || pkgs+=(nodejs npm)
    # kubectl for `kubectl kustomize` of deploy/kubernetes: Debian's
    # kubernetes-client, unless a kubectl is already there (Google's
    # kubectl package ships the same file and conflicts with it).
    command -v kubectl >/dev/null 2>&1 || pkgs+=(kubernetes-client)
    ;;
esac

if [[ $print -eq 1 ]]; then
  printf '%s\n' "${pkgs[@]}"
  exit 0
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
