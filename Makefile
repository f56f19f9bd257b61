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
	    -e 'packages/aorta[torch,plot,test]' \
	    -e 'packages/triton-invariance[triton,test]' \
	    -e 'packages/oellm-autoexp[test]' \
	    $(DEV_TOOLS)
	@touch $@

install: $(STAMP)

# The fsdp workload's divergent preset (aorta.workloads.fsdp.config.DIVERGENT_PRESET): plain SGD
# at a too-high learning rate, where some seeds blow up within 40 steps.
DIVERGENT := --set AORTA_FSDP_OPTIMIZER=sgd --set AORTA_FSDP_MOMENTUM=0 --set AORTA_FSDP_LR=4.2

# Exit code 1 means "some trial failed", which is the point of the first run; 2 (bad input)
# or anything else still fails the target.
demo: $(STAMP)
	@echo "== fsdp at a too-high learning rate: some seeds diverge =="
	$(BIN)/aorta run -w fsdp -n 4 -s 40 $(DIVERGENT) -o aorta_runs || test $$? -eq 1
	@echo "== the same trials with the fsdp_grad_clip mitigation =="
	$(BIN)/aorta run -w fsdp -n 4 -s 40 -m fsdp_grad_clip $(DIVERGENT) -o aorta_runs

test: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python benchmarks/cli_startup.py
	$(BIN)/python benchmarks/runner_overhead.py
	$(BIN)/python benchmarks/triage_overhead.py
	$(BIN)/python benchmarks/invariance_cost.py
	$(BIN)/python benchmarks/invariance_import.py
	$(BIN)/python benchmarks/autoexp_plan.py
	$(BIN)/python benchmarks/megatron_plan.py
	$(BIN)/python benchmarks/monitor_scale.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
