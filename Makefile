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
# pytest-xdist: `make test` runs the suite on TEST_WORKERS processes (see `test` below).
DEV_TOOLS := ruff mypy types-PyYAML pytest-xdist

.PHONY: install demo test lint bench fuzz clean

$(STAMP): packages/toolkit-core/pyproject.toml packages/aorta/pyproject.toml \
          packages/triton-invariance/pyproject.toml packages/oellm-autoexp/pyproject.toml \
          constraints/cpu.txt Makefile
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet -c constraints/cpu.txt \
	    -e 'packages/toolkit-core[yaml,test]' \
	    -e 'packages/aorta[torch,plot,test]' \
	    -e 'packages/triton-invariance[triton,test]' \
	    -e 'packages/oellm-autoexp[test]' \
	    $(DEV_TOOLS)
	@touch $@

install: $(STAMP)

# The triage matrix of the fsdp workload's divergent preset (plain SGD at a too-high learning
# rate, aorta.workloads.fsdp.config.DIVERGENT_PRESET): the baseline, where some seeds diverge;
# fsdp_grad_clip, which cures it at no speed cost; fsdp_substeps, which cures it at twice the
# compute, so the Confound column flags it. One OpenMP thread: on a shared 2-core machine two
# threads spin-wait on each other and the step times would measure the neighbours.
DEMO_RECIPE := packages/aorta/recipes/demo-cpu-divergence.yaml

demo: $(STAMP)
	OMP_NUM_THREADS=1 $(BIN)/aorta triage run --recipe $(DEMO_RECIPE) --output-dir triage_results

# The whole suite on TEST_WORKERS pytest-xdist processes. Most of its time is spent waiting
# (child interpreters starting, trials sleeping, SLURM scheduling), so a few more workers
# than cores keep the cores busy. --dist loadgroup keeps the real-SLURM tests on one worker
# (xdist_group "slurm", set in conftest.py): one cluster per run, as without xdist.
# `make test TEST_WORKERS=0` runs in this process (no xdist), e.g. for a debugger.
TEST_WORKERS ?= 3

test: $(STAMP)
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadgroup $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# Every benchmark runs (a miss does not stop the others); `make bench` fails when any missed
# its goal (each script exits 1 then), naming them at the end.
BENCHMARKS := cli_startup runner_overhead triage_overhead triage_cost triage_false_alarms \
              false_verdicts command_trial locate_overhead invariance_cost invariance_import autoexp_plan \
              megatron_plan monitor_scale adaptive_trials

bench: $(STAMP)
	@missed=; for name in $(BENCHMARKS); do \
	    echo "== benchmarks/$$name.py"; \
	    $(BIN)/python benchmarks/$$name.py || missed="$$missed $$name"; \
	done; \
	if [ -n "$$missed" ]; then echo "bench: goal missed by:$$missed"; exit 1; fi

# Property-based fuzzing of the four loaders (fuzz/loaders.py) for FUZZ_SECONDS in total; fails
# on a traceback, a hang over 5 s or 1 GiB of memory. Not part of CI (.ci/run runs the hostile
# corpora); inputs that broke a loader are kept under fuzz-findings/.
FUZZ_SECONDS ?= 60

fuzz: $(STAMP)
	$(BIN)/python fuzz/loaders.py --seconds $(FUZZ_SECONDS)

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
