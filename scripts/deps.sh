#!/usr/bin/env bash
# Installs the Debian packages pion needs to build, test and benchmark, skipping
# what is already present. Runs as root on Debian 12 (as CI and `make run` do).
# --bench adds the benchmark tools; --conformance the conformance suites' packages and,
# once, the suites themselves (scripts/conformance_sources.sh).
set -euo pipefail
pkgs=(
  build-essential cmake ninja-build pkg-config
  clang libclang-rt-14-dev
  libgtest-dev libgmock-dev libbenchmark-dev libxxhash-dev libssl-dev openssl
  libzmq3-dev libmsgpack-cxx-dev liburing-dev
  redis-server redis-tools prometheus prometheus-redis-exporter
  python3 python3-pytest python3-numpy python3-redis python3-hiredis python3-xxhash
  python3-torch libopenblas0-pthread python3-zmq python3-msgpack python3-yaml python3-cbor2
  fio
  python3-pyflakes python3-mypy python3-setuptools python3-pip python3-venv
)
if [ "${1:-}" = "--bench" ]; then pkgs+=(iperf3 python3-matplotlib); fi
# The conformance suites (make test-conformance): Tcl for Redis's harness, dpkg-source to
# unpack Debian's source packages, and what redis-py's tests import.
if [ "${1:-}" = "--conformance" ]; then
  pkgs+=(tcl dpkg-dev python3-packaging python3-async-timeout python3-pytest-timeout)
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
fetch_sources() {
  if [ "${1:-}" = "--conformance" ]; then bash "$(dirname "$0")/conformance_sources.sh"; fi
}
if [ ${#missing[@]} -eq 0 ]; then fetch_sources "${1:-}"; exit 0; fi
if [ "$(id -u)" -ne 0 ]; then
  echo "deps.sh: missing packages (${missing[*]}); run as root or install them" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
fetch_sources "${1:-}"
