# Two commands: `make demo` and `make test`. Both create a virtual environment if missing and
# install the project into it; a stamp file keeps the install quick when nothing changed.
#   make demo       the core and JAX only (no torch), then the examples of the public API
#   make test       everything (torch, torch-xla, the libraries the suites test), every test;
#                   prints the 25 slowest
#   make test-fast  the everyday tier (< 2 min on 2 quiet cores, in JOBS workers): pass rules,
#                   the API, a sample of the differential corpus, the command line's quick
#                   cases; no test marked slow
#   make test-matrix  the JAX-side suites on jax 0.10, 0.11 and 0.12 (Python 3.11, 3.12, 3.13),
#                     and x64guard.torch's on torch 2.15
#   make docs       the docs site from docs/ into build/docs/html (warnings are errors)
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.x64guard-installed
# The demo's environment: .venv by default (a later `make test` adds the rest to it); any
# other path gets its own, e.g. `make demo DEMO_VENV=/tmp/x64guard-demo`.
DEMO_VENV  ?= $(VENV)
DEMO_PY    := $(DEMO_VENV)/bin/python
DEMO_STAMP := $(DEMO_VENV)/.x64guard-demo-installed

.PHONY: demo test test-fast test-models test-matrix bench install clean fuzz docs

%/bin/python:
	$(PYTHON) -m venv $*
	$*/bin/python -m pip install --quiet --upgrade pip

# torch 2.9.0 + torch-xla 2.9.0 come from the package index (several GB the first time;
# pip's cache makes a repeat install of a fresh .venv take about 90 s).
$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e ".[test,torch-xla,ecosystem,torch-models]"
	touch $(STAMP) $(VENV)/.x64guard-demo-installed

# What the demo needs: x64guard and its dependencies (numpy, jax, jaxlib), nothing else.
$(DEMO_STAMP): pyproject.toml | $(DEMO_PY)
	$(DEMO_PY) -m pip install --quiet -e .
	touch $@

install: $(STAMP)

demo: $(DEMO_STAMP)
	$(DEMO_PY) examples/demo.py
	@echo
	$(DEMO_PY) examples/scoped_precision.py

# Tests run in JOBS pytest-xdist workers (default 2, one per core of our machines; JOBS=0
# runs them in pytest's own process, in file order). A worker holds about 3 GB with torch.
JOBS ?= 2

test: $(STAMP)
	$(PY) -m pytest -q -p no:cacheprovider -n $(JOBS) --dist worksteal --durations=25 -m "not extended"

# The torch-xla model suites' every model: `make test` runs two of the training suite's eleven
# and eight of the real-model suite's 22 (the others are marked `extended`); about 20
# minutes on two cores.
test-models: $(STAMP)
	$(PY) -m pytest -q -p no:cacheprovider -n $(JOBS) --dist worksteal --durations=15 \
	    tests/torch_xla/test_model_suite.py tests/torch_xla/test_real_models.py

# The everyday tier: these paths, less every test marked `slow` and every case outside the
# sample of its family (marked `sampled_out`: tests/sample.py); `make test` runs them all.
# In JOBS workers as `make test`: about 190 s of CPU in all, about 90 s per worker, so under
# 2 minutes on 2 quiet cores (one process would take over 3).
FAST_TESTS := tests/passes tests/test_api.py tests/corpus/test_corpus.py tests/test_import.py \
              tests/cli/test_check.py tests/cli/test_narrow.py

test-fast: $(STAMP)
	$(PY) -m pytest -q -p no:cacheprovider -n $(JOBS) --dist worksteal --durations=10 \
	    -m "not slow and not sampled_out" $(FAST_TESTS)

# The JAX version matrix: the JAX-side suites on jax 0.10 (Python 3.11, .venv), 0.11 (Python
# 3.12, the image's: tools/python312.sh) and 0.12 (Python 3.13, built once from Debian's
# source package by tools/python313.sh and cached in ~/.cache/x64guard); one environment
# each under .matrix/; and the torch front end's suites on torch 2.15 (row torch-2.15,
# .matrix/torch-2.15, Python 3.11). MATRIX picks rows,
# MATRIX_TIER=ci runs CI's tier (tools/matrix.sh says which tests). CI runs
# `make test` and then `make test-matrix MATRIX="0.11 0.12 torch-2.15" MATRIX_TIER=ci`.
MATRIX      ?= 0.10 0.11 0.12 torch-2.15
MATRIX_TIER ?= full

test-matrix:
	MATRIX="$(MATRIX)" MATRIX_TIER="$(MATRIX_TIER)" PYTHON="$(PYTHON)" JOBS="$(JOBS)" tools/matrix.sh

$(VENV)/.x64guard-bench: pyproject.toml | $(STAMP)
	$(PY) -m pip install --quiet -e ".[test,torch-xla,ecosystem,torch-models,bench]"
	touch $@

# Longer fuzzing than `make test` runs: `make fuzz N=2000 [SEED=123]`. N differential programs,
# 5N hostile inputs per family (text, bytecode) through the library, N through the command line,
# N/10 no-mutation programs. SEED (default: the clock) picks new examples; it is printed.
N    ?= 2000
SEED ?= $(shell date +%s)

fuzz: $(STAMP)
	@echo "x64guard fuzz: N=$(N) SEED=$(SEED)"
	X64GUARD_FUZZ_EXAMPLES=$(N) X64GUARD_FUZZ_SEED=$(SEED) X64GUARD_HOSTILE_CASES=$$(( $(N) * 5 )) \
	X64GUARD_HOSTILE_SEED=$(SEED) X64GUARD_CLI_CASES=$(N) X64GUARD_NO_MUTATION_EXAMPLES=$$(( $(N) / 10 )) \
	$(PY) -m pytest -q -p no:cacheprovider -s tests/reliability/test_differential_fuzz.py \
		$(wildcard tests/reliability/test_hostile_*.py) tests/reliability/test_no_mutation.py

bench: $(VENV)/.x64guard-bench
	$(PY) -m bench.run

# The docs site: Sphinx + MyST over docs/*.md, the API reference by autodoc (which imports
# x64guard, torch-xla included: hence `make install` first). Only the `docs` extra's packages
# are added to the venv (x64guard itself is not reinstalled). -W: every warning is an error;
# -n: every cross-reference and internal link (page and heading anchor) must resolve; -E: a
# fresh build, so an unchanged page's warnings are not hidden by Sphinx's cache.
DOCS_STAMP := $(VENV)/.x64guard-docs

$(DOCS_STAMP): pyproject.toml | $(STAMP)
	$(PY) -c "import tomllib; print('\\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['optional-dependencies']['docs']))" > $(VENV)/docs-requirements.txt
	$(PY) -m pip install --quiet -r $(VENV)/docs-requirements.txt
	touch $@

docs: $(DOCS_STAMP)
	PJRT_DEVICE=CPU $(PY) -m sphinx -W --keep-going -n -E -q -b html -d build/docs/doctrees docs build/docs/html
	@echo "docs: build/docs/html/index.html"

clean:
	rm -rf $(VENV) .matrix build *.egg-info
