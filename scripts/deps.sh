#!/usr/bin/env bash
# Installs the Debian packages pion needs to build, test and benchmark, skipping
# what is already present. Runs as root on Debian 12 (as CI and `make run` do).
set -euo pipefail
pkgs=(
  build-essential cmake ninja-build pkg-config
  clang libclang-rt-14-dev
  libgtest-dev libgmock-dev libbenchmark-dev libxxhash-dev libssl-dev openssl
  libzmq3-dev libmsgpack-cxx-dev
  redis-server redis-tools prometheus prometheus-redis-exporter
  python3 python3-pytest python3-numpy python3-redis python3-hiredis python3-xxhash
  python3-torch libopenblas0-pthread python3-zmq python3-msgpack
  python3-pyflakes python3-setuptools python3-pip python3-venv
)
if [ "${1:-}" = "--bench" ]; then pkgs+=(iperf3 python3-matplotlib); fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "deps.sh: missing packages (${missing[*]}); run as root or install them" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
