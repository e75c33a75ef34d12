#!/usr/bin/env bash
# `pip install ./python` works offline with Debian's setuptools (the README's recipe):
# installs a copy of python/ into a fresh venv that sees the system's packages, then
# imports the installed package from outside the source tree.
set -euo pipefail
src="$(cd "$(dirname "$0")/.." && pwd)/python"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cp -r "$src" "$tmp/python"
rm -rf "$tmp/python/build" "$tmp/python/"*.egg-info "$tmp/python/tests"
/usr/bin/python3 -m venv --system-site-packages "$tmp/venv"
"$tmp/venv/bin/pip" install -q --no-build-isolation --no-index "$tmp/python"
cd "$tmp"
"$tmp/venv/bin/python" - <<'PY'
import pion, pion.testing, pion._resp
import pion.integrations.lmcache
assert "/venv/" in pion.__file__, pion.__file__
assert "/venv/" in pion.integrations.lmcache.__file__
assert pion._resp.encode("PING") == b"*1\r\n$4\r\nPING\r\n"
print("installed", pion.__version__, "at", pion.__file__)
PY
