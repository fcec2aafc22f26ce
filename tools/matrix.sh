#!/usr/bin/env bash
# `make test-matrix`: the JAX-side suites on every JAX release x64guard supports, one
# virtual environment each. Everything but torch and torch-xla (whose releases pin their
# own jax-free stack, tested by `make test` on the 0.10 row's environment).
#
#   row    Python                                 environment   pins
#   0.10   python3 (3.11; `make test`'s)          .venv          pyproject.toml's extras
#   0.11   3.12, found by tools/python312.sh      .matrix/0.11   tests/matrix/jax-0.11.txt
#   0.12   3.13, built by tools/python313.sh      .matrix/0.12   tests/matrix/jax-0.12.txt
#
# So the three rows cover Python 3.11, 3.12 and 3.13. Where no 3.12 is installed, the 0.11
# row runs on the 3.13 build and its summary line says which Python it ran.
#
# MATRIX picks rows ("0.11 0.12"); MATRIX_TIER picks what runs on each:
#   full  every JAX-side test (the default; what "passes on every version" means)
#   ci    what CI runs on the rows `make test` does not already cover, within its time
#         (`make test-fast`'s selection over the JAX-side suites): no test marked `slow`, and
#         of each large family only its sample (`sampled_out` deselected: 7 of 8 narrowing
#         cases of the corpus, x32 programs, CLI formats, half the ecosystem programs:
#         tests/sample.py); every refusal case, the random kernel proofs and their
#         perturbations, the docs. The hashed samples are split between the rows run
#         (X64GUARD_SAMPLE_SHARD=k/n on row k of n): together the rows run the whole
#         sample, each a part, so CI's two rows stay within its time.
# Each row's tests run in JOBS (default 2) pytest-xdist workers. Rows run one after another;
# a failing row does not stop the others; the exit status
# is non-zero if any row failed.
set -uo pipefail
cd "$(dirname "$0")/.."

rows=${MATRIX:-"0.10 0.11 0.12"}
tier=${MATRIX_TIER:-full}
python=${PYTHON:-python3}
case $tier in
  full) select="not torch" ;;
  ci)   select="not torch and not slow and not sampled_out" ;;
  *)    echo "tools/matrix.sh: MATRIX_TIER is full or ci, not '$tier'" >&2; exit 2 ;;
esac

environment() {  # row -> path of its python, installing what the row pins when it changed
  local row=$1 venv pins interpreter
  if [ "$row" = 0.10 ]; then
    make --no-print-directory install PYTHON="$python" >&2 || return 1
    echo .venv/bin/python
    return 0
  fi
  venv=.matrix/$row
  pins=tests/matrix/jax-$row.txt
  [ -f "$pins" ] || { echo "tools/matrix.sh: no pins for row $row ($pins)" >&2; return 1; }
  if [ "$row" = 0.11 ] && interpreter=$(tools/python312.sh); then :
  else
    [ "$row" = 0.11 ] && echo "tools/matrix.sh: no Python 3.12 here; the jax 0.11 row runs on 3.13" >&2
    interpreter=$(tools/python313.sh) || return 1
  fi
  # A venv made by another Python (an earlier layout of the matrix) is made anew.
  if [ -x "$venv/bin/python" ] && [ "$("$venv/bin/python" -c 'import sys; print(sys.version_info[:2])')" != \
       "$("$interpreter" -c 'import sys; print(sys.version_info[:2])')" ]; then
    rm -rf "$venv"
  fi
  if [ ! -x "$venv/bin/python" ]; then
    "$interpreter" -m venv "$venv" >&2 || return 1
    "$venv/bin/python" -m pip install --quiet --upgrade pip >&2 || return 1
  fi
  if [ ! -f "$venv/.installed" ] || [ "$pins" -nt "$venv/.installed" ] || [ pyproject.toml -nt "$venv/.installed" ]; then
    "$venv/bin/python" -m pip install --quiet -e ".[test]" -r "$pins" >&2 || return 1
    touch "$venv/.installed"
  fi
  echo "$venv/bin/python"
}

failed=() summary=()
set -- $rows
count=$# index=0
for row in $rows; do
  shard=0/1
  [ "$tier" = ci ] && shard=$index/$count
  index=$((index + 1))
  echo "=== test-matrix: jax $row ($tier tier)"
  start=$(date +%s)
  if ! py=$(environment "$row"); then
    failed+=("$row"); summary+=("jax $row: could not install its environment"); continue
  fi
  versions=$("$py" -c 'import sys, jax, jaxlib; print(f"jax {jax.__version__}, jaxlib {jaxlib.__version__}, Python {sys.version.split()[0]}")')
  echo "--- $versions"
  echo "--- sample shard $shard"
  X64GUARD_SAMPLE_SHARD=$shard "$py" -m pytest -q -p no:cacheprovider -n "${JOBS:-2}" --dist worksteal --durations=10 -m "$select" \
      --ignore=tests/torch --ignore=tests/torch_xla tests
  status=$?
  took=$(( $(date +%s) - start ))
  if [ $status -eq 0 ]; then summary+=("$versions: passed (${took} s)")
  else failed+=("$row"); summary+=("$versions: FAILED, pytest exit $status (${took} s)"); fi
done

echo "=== test-matrix summary ($tier tier)"
printf '  %s\n' "${summary[@]}"
[ ${#failed[@]} -eq 0 ]
