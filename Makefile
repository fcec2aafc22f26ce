# Two commands: `make demo` and `make test`. Both create .venv if missing and install
# the project into it; a stamp file keeps the install quick when nothing changed.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.x64guard-installed

.PHONY: demo test bench install clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# torch 2.9.0 + torch-xla 2.9.0 come from the package index (several GB the first time;
# pip's cache makes a repeat install of a fresh .venv take about 90 s).
$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e ".[test,torch-xla]"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(PY) examples/demo.py
	@echo
	$(PY) examples/scoped_precision.py

test: $(STAMP)
	$(PY) -m pytest -q -p no:cacheprovider

$(VENV)/.x64guard-bench: pyproject.toml | $(STAMP)
	$(PY) -m pip install --quiet -e ".[test,torch-xla,bench]"
	touch $@

bench: $(VENV)/.x64guard-bench
	$(PY) bench/run.py

clean:
	rm -rf $(VENV) build *.egg-info
