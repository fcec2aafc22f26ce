#!/usr/bin/env bash
# A CPython 3.13 for the JAX version matrix (`make test-matrix`), built once from Debian
# trixie's source package and cached outside the checkout. Idempotent: prints the path of
# the interpreter, building it only when the cache has none.
#
#   tools/python313.sh            -> ~/.cache/x64guard/python-3.13/bin/python3.13
#
# Our machines run Debian bookworm, whose packages stop at Python 3.11, and reach Debian's
# package mirror but not python.org; trixie's source package carries the upstream tarball
# (3.13.5, 22.9 MB). The build takes 5-6 minutes on a quiet 2-core machine, 15 under load.
# X64GUARD_PYTHON_CACHE moves the cache.
set -euo pipefail

cache=${X64GUARD_PYTHON_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/x64guard}
prefix=$cache/python-3.13
python=$prefix/bin/python3.13

usable() {
  [ -x "$1" ] && "$1" -c 'import ssl, sqlite3, lzma, bz2, ctypes, zlib, venv' 2>/dev/null
}

if usable "$python"; then
  echo "$python"
  exit 0
fi

mkdir -p "$cache"
exec 9>"$cache/python-3.13.lock"          # two matrix runs at once build it once
flock 9
if usable "$python"; then echo "$python"; exit 0; fi

log() { echo "tools/python313.sh: $*" >&2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Build dependencies, from bookworm (the only apt sources the system keeps).
need=(build-essential libssl-dev libffi-dev zlib1g-dev libbz2-dev liblzma-dev libsqlite3-dev
      libreadline-dev uuid-dev xz-utils)
missing=()
for pkg in "${need[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  log "installing build dependencies: ${missing[*]}"
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >&2
fi

# trixie's source package, through a private sources list: the system's stays untouched.
mkdir -p "$work/lists/partial"
echo "deb-src http://deb.debian.org/debian trixie main" > "$work/src.list"
apt_opts=(-o "Dir::Etc::sourcelist=$work/src.list" -o "Dir::Etc::sourceparts=-" -o "Dir::State::Lists=$work/lists")
log "fetching Debian trixie's python3.13 source package"
apt-get "${apt_opts[@]}" update -qq >&2
(cd "$work" && apt-get "${apt_opts[@]}" source --download-only python3.13 >&2)
tarball=$(ls "$work"/python3.13_*.orig.tar.xz | head -n 1)
tar xf "$tarball" -C "$work"
src=$(ls -d "$work"/Python-3.13.* | head -n 1)

log "building $(basename "$src") into $prefix (about 5-15 minutes)"
staging=$prefix.partial
rm -rf "$staging"
(cd "$src" && ./configure --prefix="$prefix" --disable-test-modules --quiet >&2 && make -j"$(nproc)" -s >&2 \
   && make install DESTDIR="$staging" -s >&2)
# Installed under DESTDIR first and moved into place whole: an interrupted build never
# leaves a half-installed interpreter in the cache.
rm -rf "$prefix"
mv "$staging$prefix" "$prefix"
rm -rf "$staging"
usable "$python" || { log "the build finished but $python lacks a standard module"; exit 1; }
log "built $("$python" --version)"
echo "$python"
