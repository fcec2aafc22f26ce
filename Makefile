# Two commands: `make demo` and `make test`. Both create .venv if missing and install
# the project into it; a stamp file keeps the install quick when nothing changed.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.x64guard-installed

.PHONY: demo test bench install clean fuzz

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# torch 2.9.0 + torch-xla 2.9.0 come from the package index (several GB the first time;
# pip's cache makes a repeat install of a fresh .venv take about 90 s).
$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e ".[test,torch-xla,ecosystem,torch-models]"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(PY) examples/demo.py
	@echo
	$(PY) examples/scoped_precision.py

test: $(STAMP)
	$(PY) -m pytest -q -p no:cacheprovider

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
	$(PY) bench/run.py

clean:
	rm -rf $(VENV) build *.egg-info
