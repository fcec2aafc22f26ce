#!/usr/bin/env bash
# A CPython 3.12 for the jax 0.11 row of the version matrix (`make test-matrix`): prints its
# path. Our machine image ships one under pyenv (/root/.pyenv/versions/3.12.1, beside the
# default 3.11.7); `python3.12` on the PATH or X64GUARD_PYTHON312 is taken first. Debian
# bookworm has no 3.12 package and trixie's sources carry 3.13 only, so where none is
# installed this exits 1 and the matrix runs the row on tools/python313.sh's 3.13 instead,
# saying so.
set -euo pipefail

usable() {
  [ -x "$1" ] && "$1" -c 'import sys, ssl, sqlite3, lzma, bz2, ctypes, zlib, venv; assert sys.version_info[:2] == (3, 12)' 2>/dev/null
}

for candidate in "${X64GUARD_PYTHON312:-}" "$(command -v python3.12 || true)" \
                 "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.12*/bin/python3.12; do
  if [ -n "$candidate" ] && usable "$candidate"; then
    echo "$candidate"
    exit 0
  fi
done
echo "tools/python312.sh: no CPython 3.12 here (python3.12 on the PATH, \$X64GUARD_PYTHON312, pyenv's versions)" >&2
exit 1
