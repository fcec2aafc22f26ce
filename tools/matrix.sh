#!/usr/bin/env bash
# `make test-matrix`: the JAX-side suites on every JAX release x64guard supports, one
# virtual environment each, and x64guard.torch's suites on the newest PyTorch. The JAX rows
# run everything but torch and torch-xla (whose releases pin their own jax-free stack,
# tested by `make test` on the 0.10 row's environment, torch 2.9.0).
#
#   row         Python                             environment         pins
#   0.10        python3 (3.11; `make test`'s)      .venv               pyproject.toml's extras
#   0.11        3.12, found by tools/python312.sh  .matrix/0.11        tests/matrix/jax-0.11.txt
#   0.12        3.13, built by tools/python313.sh  .matrix/0.12        tests/matrix/jax-0.12.txt
#   torch-2.15  python3 (3.11)                     .matrix/torch-2.15  tests/matrix/torch-2.15.txt
#
# So the JAX rows cover Python 3.11, 3.12 and 3.13. Where no 3.12 is installed, the 0.11
# row runs on the 3.13 build and its summary line says which Python it ran.
# A torch row runs tests/torch (but test_xla.py and test_real_models.py: its pins file says
# why) and docs/torch.md's python blocks. Its venv is installed with PIP_CONSTRAINT pointed
# at its pins file, so the machines' pip cap on torch does not apply to it.
#
# MATRIX picks rows ("0.11 0.12 torch-2.15"); MATRIX_TIER picks what runs on each:
#   full  every JAX-side test, on a torch row every torch test it can run (the default;
#         what "passes on every version" means)
#   ci    what CI runs on the rows `make test` does not already cover, within its time
#         (`make test-fast`'s selection over the JAX-side suites): no test marked `slow`, and
#         of each large family only its sample (`sampled_out` deselected: 7 of 8 narrowing
#         cases of the corpus, x32 programs, CLI formats, half the ecosystem programs:
#         tests/sample.py); every refusal case, the random kernel proofs and their
#         perturbations, the docs. The hashed samples are split between the rows run
#         (X64GUARD_SAMPLE_SHARD=k/n on row k of n): together the rows run the whole
#         sample, each a part, so CI's two rows stay within its time. The fuzzers
#         (tests/reliability) run 1/n of `make test`'s budgets on each of n rows, at its
#         fixed seeds: the first cases of the same derandomized runs, on each release. On a torch row:
#         tests/torch without its `slow` tests (the real models), and docs/torch.md.
# Each row's tests run in JOBS (default 2) pytest-xdist workers. Rows run one after another;
# a failing row does not stop the others; the exit status
# is non-zero if any row failed.
set -uo pipefail
cd "$(dirname "$0")/.."

rows=${MATRIX:-"0.10 0.11 0.12 torch-2.15"}
tier=${MATRIX_TIER:-full}
python=${PYTHON:-python3}
case $tier in
  full) select="not torch" torch_select="" ;;
  ci)   select="not torch and not slow and not sampled_out" torch_select="not slow" ;;
  *)    echo "tools/matrix.sh: MATRIX_TIER is full or ci, not '$tier'" >&2; exit 2 ;;
esac

interpreter_of() {  # row -> the Python its venv is made with
  case $1 in
    torch-*) command -v "$python" ;;
    0.11) tools/python312.sh || {
            echo "tools/matrix.sh: no Python 3.12 here; the jax 0.11 row runs on 3.13" >&2; tools/python313.sh; } ;;
    *) tools/python313.sh ;;
  esac
}

environment() {  # row -> path of its python, installing what the row pins when it changed
  local row=$1 venv pins interpreter
  if [ "$row" = 0.10 ]; then
    make --no-print-directory install PYTHON="$python" >&2 || return 1
    echo .venv/bin/python
    return 0
  fi
  venv=.matrix/$row
  case $row in torch-*) pins=tests/matrix/$row.txt ;; *) pins=tests/matrix/jax-$row.txt ;; esac
  [ -f "$pins" ] || { echo "tools/matrix.sh: no pins for row $row ($pins)" >&2; return 1; }
  interpreter=$(interpreter_of "$row") || return 1
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
    # The row's pins are its only constraints: the machine's pip configuration may cap
    # releases (torch) below the row's; PIP_CONSTRAINT replaces that for this install.
    PIP_CONSTRAINT=$pins "$venv/bin/python" -m pip install --quiet -e ".[test]" -r "$pins" >&2 || return 1
    touch "$venv/.installed"
  fi
  echo "$venv/bin/python"
}

reliability_share() {  # shard k/n -> env: 1/n of make test's fuzz budgets, at its fixed seeds
  local n=${1#*/}
  [ "$n" -gt 1 ] || return 0
  echo X64GUARD_FUZZ_EXAMPLES=$((300 / n)) X64GUARD_HOSTILE_CASES=$((1000 / n)) X64GUARD_CLI_CASES=$((100 / n))
}

jax_row() {  # python shard: the JAX-side suites
  local py=$1 shard=$2 share=""
  versions=$("$py" -c 'import sys, jax, jaxlib; print(f"jax {jax.__version__}, jaxlib {jaxlib.__version__}, Python {sys.version.split()[0]}")')
  echo "--- $versions"
  [ "$tier" = ci ] && share=$(reliability_share "$shard")
  echo "--- sample shard $shard${share:+; fuzzers: $share}"
  env $share X64GUARD_SAMPLE_SHARD=$shard "$py" -m pytest -q -p no:cacheprovider -n "${JOBS:-2}" --dist worksteal --durations=10 -m "$select" \
      --ignore=tests/torch --ignore=tests/torch_xla tests
}

torch_row() {  # python: tests/torch (what the row's pins can run), then docs/torch.md's python blocks
  local py=$1 status
  versions=$("$py" -c 'import sys, torch; print(f"torch {torch.__version__}, Python {sys.version.split()[0]}")')
  echo "--- $versions"
  "$py" -m pytest -q -p no:cacheprovider -n "${JOBS:-2}" --dist worksteal --durations=10 ${torch_select:+-m "$torch_select"} \
      --ignore=tests/torch/test_xla.py --ignore=tests/torch/test_real_models.py tests/torch
  status=$?
  # Exit 5 (nothing collected) fails too: the documents' tests moved.
  "$py" -m pytest -q -p no:cacheprovider -k "test_python_blocks_run_and_print_what_is_shown and torch.md" tests/docs \
    || status=$((status ? status : $?))
  return $status
}

failed=() summary=()
jax_rows=0
for row in $rows; do case $row in torch-*) ;; *) jax_rows=$((jax_rows + 1)) ;; esac; done
index=0
for row in $rows; do
  echo "=== test-matrix: $row ($tier tier)"
  start=$(date +%s)
  if ! py=$(environment "$row"); then
    failed+=("$row"); summary+=("$row: could not install its environment"); continue
  fi
  case $row in
    torch-*) torch_row "$py" ;;
    *) shard=0/1
       [ "$tier" = ci ] && shard=$index/$jax_rows  # the JAX rows split the hashed samples
       index=$((index + 1))
       jax_row "$py" "$shard" ;;
  esac
  status=$?
  took=$(( $(date +%s) - start ))
  if [ $status -eq 0 ]; then summary+=("$versions: passed (${took} s)")
  else failed+=("$row"); summary+=("$versions: FAILED, pytest exit $status (${took} s)"); fi
done

echo "=== test-matrix summary ($tier tier)"
printf '  %s\n' "${summary[@]}"
[ ${#failed[@]} -eq 0 ]
