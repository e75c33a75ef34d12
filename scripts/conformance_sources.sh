#!/usr/bin/env bash
# Fetches the third-party conformance suites once, from Debian's source packages, into
# build/conformance/src: Redis 7.0.15 (`redis`, its tests/) and redis-py (`python-redis`,
# its tests/ and the library they were written for). The deb-src entries live in a
# private apt configuration under build/conformance/apt (its own sources list, state
# and cache; APT_CONFIG points at it), so the system's apt sources and lists stay as
# they are. Skips when both trees are present. Nothing fetched here is committed.
#
# redis-py: bookworm's 4.3.4 is wanted. Where the mirror does not serve its files, the
# newest python-redis source the mirror does serve (trixie, then sid) is taken instead;
# the version is written to <tree>/.debian-version, and run_conformance.py enforces the
# redis-py lines of must_pass.txt only when that version is the one they were made with.
# Each file is checked against the SHA256 of apt's signed Sources index; when the
# Debian packaging tarball is missing but the upstream one is there, the upstream
# tarball alone is unpacked (the suites are upstream's; Debian's patches do not touch them).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
base="$root/build/conformance"
src="$base/src"
redis_dir="$src/redis-7.0.15"
redispy_dir="$src/python-redis"
have_redis() { [ -f "$redis_dir/tests/test_helper.tcl" ]; }
have_redispy() { [ -f "$redispy_dir/tests/test_commands.py" ] && [ -d "$redispy_dir/redis" ]; }
if have_redis && have_redispy; then exit 0; fi

# The Debian mirror the system already uses (deb822 or one-line sources), else the CDN.
mirror=""
for f in /etc/apt/sources.list.d/*.sources; do
  [ -f "$f" ] || continue
  mirror=$(awk '/^URIs:/ {for (i = 2; i <= NF; i++) if ($i ~ /\/debian\/?$/) {print $i; exit}}' "$f")
  [ -n "$mirror" ] && break
done
if [ -z "$mirror" ] && [ -f /etc/apt/sources.list ]; then
  mirror=$(awk '$1 == "deb" {for (i = 2; i <= NF; i++) if ($i ~ /\/debian\/?$/) {print $i; exit}}' \
    /etc/apt/sources.list)
fi
mirror="${mirror:-http://deb.debian.org/debian}"
mirror="${mirror%/}"
security="${mirror%/debian}/debian-security"
keyring=/usr/share/keyrings/debian-archive-keyring.gpg

apt="$base/apt"
mkdir -p "$apt/state/lists/partial" "$apt/cache/archives/partial" "$apt/sources.list.d" "$src"
cat >"$apt/sources.list" <<LIST
deb-src [signed-by=$keyring] $mirror bookworm main
deb-src [signed-by=$keyring] $mirror bookworm-updates main
deb-src [signed-by=$keyring] $security bookworm-security main
deb-src [signed-by=$keyring] $mirror trixie main
deb-src [signed-by=$keyring] $mirror sid main
LIST
cat >"$apt/apt.conf" <<CONF
Dir::Etc::SourceList "$apt/sources.list";
Dir::Etc::SourceParts "$apt/sources.list.d";
Dir::Etc::Preferences "$apt/preferences";
Dir::Etc::PreferencesParts "$apt/preferences.d";
Dir::State "$apt/state";
Dir::State::status "/var/lib/dpkg/status";
Dir::Cache "$apt/cache";
APT::Sandbox::User "root";
Acquire::Languages "none";
CONF
mkdir -p "$apt/preferences.d"
: >"$apt/preferences"
export APT_CONFIG="$apt/apt.conf"
echo "conformance: source indexes of $mirror (private apt configuration in $apt)"
apt-get -q update >"$apt/update.log" 2>&1 || { cat "$apt/update.log" >&2; exit 1; }

# try_fetch <package> <version> <dir>: downloads the version's files (hash-checked) and
# unpacks them into <dir>; returns 1 when the mirror does not serve the upstream tarball.
try_fetch() {
  local pkg=$1 ver=$2 dir=$3 dl="$apt/dl/$1_$2" uris line url file sum orig="" deb="" dsc=""
  rm -rf "$dl" && mkdir -p "$dl"
  uris=$(cd "$dl" && apt-get -qq source --print-uris --only-source "$pkg=$ver" 2>/dev/null | grep "^'") || return 1
  while read -r line; do
    url=$(echo "$line" | awk '{print $1}' | tr -d "'")
    file=$(echo "$line" | awk '{print $2}')
    sum=$(echo "$line" | awk '{print $4}')
    if /usr/lib/apt/apt-helper -q download-file "$url" "$dl/$file" "$sum" >>"$apt/download.log" 2>&1; then
      case "$file" in
        *.dsc) dsc=$file ;;
        *.orig.tar.*) orig=$file ;;
        *.debian.tar.*) deb=$file ;;
      esac
    else
      echo "conformance: the mirror does not serve $file" >>"$apt/download.log"
    fi
  done <<<"$uris"
  [ -n "$orig" ] || return 1
  rm -rf "$dir"
  if [ -n "$dsc" ] && [ -n "$deb" ]; then
    dpkg-source --no-check -x "$dl/$dsc" "$dir" >>"$apt/download.log" 2>&1 || return 1
    rm -f "$src"/*.orig.tar.*  # dpkg-source leaves a copy beside the tree
  else
    mkdir -p "$dir" && tar -xf "$dl/$orig" -C "$dir" --strip-components=1 || return 1
  fi
  echo "$ver" >"$dir/.debian-version"
  if [ -n "$deb" ]; then
    echo "conformance: $pkg $ver in $dir"
  else
    echo "conformance: $pkg $ver in $dir (upstream tarball: the mirror lacks Debian's part)"
  fi
  rm -rf "$dl"
}

versions() {  # the versions of a source package in the indexes, newest first
  apt-cache showsrc "$1" 2>/dev/null | awk '/^Version:/ {print $2}' | sort -rV | uniq
}

if ! have_redis; then
  ok=0
  for v in $(versions redis | grep -F ':7.0.15-'); do
    try_fetch redis "$v" "$redis_dir" && { ok=1; break; }
  done
  [ $ok = 1 ] || { echo "conformance: no Redis 7.0.15 source on $mirror" >&2; exit 1; }
fi
if ! have_redispy; then
  ok=0
  # bookworm's 4.3.4 first, then the newer ones, newest first.
  for v in $(versions python-redis | grep '^4\.3\.4-') $(versions python-redis | grep -v '^4\.3\.4-'); do
    try_fetch python-redis "$v" "$redispy_dir" && { ok=1; break; }
  done
  [ $ok = 1 ] || { echo "conformance: no python-redis source on $mirror" >&2; exit 1; }
fi
