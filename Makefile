# One entry point for development: `make demo`, `make test`, `make lint`, `make bench`.
# The first target that needs it creates .venv and installs all three packages editable with
# their test extras (CPU torch through constraints/cpu.txt). The install is redone only when a
# pyproject.toml or the constraints change, so re-running is fast.

SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PIP := $(BIN)/python -m pip --disable-pip-version-check
DEV_TOOLS := ruff mypy types-PyYAML

.PHONY: install demo test lint bench clean

$(STAMP): packages/aorta/pyproject.toml packages/triton-invariance/pyproject.toml \
          packages/oellm-autoexp/pyproject.toml constraints/cpu.txt Makefile
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet -c constraints/cpu.txt \
	    -e 'packages/aorta[torch,test]' \
	    -e 'packages/triton-invariance[test]' \
	    -e 'packages/oellm-autoexp[test]' \
	    $(DEV_TOOLS)
	@touch $@

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/aorta run --workload fsdp --trials 2 --steps 20 --output-dir aorta_runs

test: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python benchmarks/cli_startup.py
	$(BIN)/python benchmarks/runner_overhead.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
