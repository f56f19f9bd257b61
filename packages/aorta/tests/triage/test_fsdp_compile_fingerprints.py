"""On a GPU: a triage of the compiled fsdp workload records the fingerprints of the Triton kernels
Inductor generates for it, and the matrix shows which cells changed them (issue 15 §4).

Nothing is simulated: real FSDP2 training on the GPU, real Inductor codegen, real Triton
compiles, each trial in its own process (`fingerprint_kernels: true` forces that). Skipped where
no GPU is visible (root conftest). The CPU side of the compiled workload is
tests/workloads/test_fsdp_compile.py; per-trial fingerprints on CPU (compile-only driver) are
tests/triage/test_kernel_fingerprints.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from aorta.triage.lifecycle import run_recipe
from aorta.triage.recipe import load_recipe

# What the trials of every cell share: the compiled workload on the GPU, small and short (the
# fingerprints depend on the kernels Inductor generates, not on how long they train).
COMPILED = {"AORTA_FSDP_COMPILE": "1", "AORTA_FSDP_DEVICE": "cuda", "AORTA_FSDP_N_LAYERS": "1"}


def compiled_recipe(device_env: dict[str, str]) -> dict[str, Any]:
    """Three cells: the baseline, the same settings again (a no-op: nothing may change) and
    `triton_no_fp_fusion` (TRITON_FORCE_DISABLE_FP_FUSION=1: every Triton kernel is compiled
    without FMA contraction, a numerics change recorded in each fingerprint's compile options)."""
    return {
        "schema_version": 1,
        "workload": "fsdp",
        "trials": 1,
        "steps": 3,
        "fingerprint_kernels": True,
        "cells": [
            {"name": name, "mitigations": [mitigation], "environment": "local", "extra_env": env}
            for name, mitigation, env in (
                ("baseline", "none", device_env),
                ("none_again", "none", device_env),
                ("no_fp_fusion", "triton_no_fp_fusion", device_env),
            )
        ],
    }


def run_compiled_triage(tmp_path: Path, device_env: dict[str, str]) -> Path:
    """Write and run `compiled_recipe(device_env)`; return the run directory."""
    recipe_path = tmp_path / "recipe.yaml"
    recipe_path.write_text(yaml.safe_dump(compiled_recipe(device_env), sort_keys=False))
    report = run_recipe(load_recipe(recipe_path), tmp_path / "out")
    return report.run_dir


def _trial(run_dir: Path, cell: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((run_dir / "cells" / cell / "trial_0.json").read_text())
    return data


@pytest.mark.gpu
def test_compiled_fsdp_records_inductor_kernels_and_the_cells_that_changed_them(
    tmp_path: Path, compile_caches: Path
) -> None:
    pytest.importorskip("triton_invariance")
    run_dir = run_compiled_triage(tmp_path, COMPILED)

    trials = {cell: _trial(run_dir, cell) for cell in ("baseline", "none_again", "no_fp_fusion")}
    for cell, trial in trials.items():
        assert trial["outcome"] == "passed", (cell, trial["failure"], trial["traceback"])
        assert trial["execution"] == "child_process"
        assert str(trial["observed"]["device"]).startswith("cuda")
        assert trial["observed"]["compile"]["graphs"] >= 1
    baseline = trials["baseline"]["kernel_fingerprints"]
    # Inductor's kernels, each under its own name (triton_poi_fused_..., triton_per_fused_...):
    # seen although Inductor compiled them (in this process, compile_threads=1).
    assert baseline, "the trial recorded no Triton kernels"
    assert all(name.startswith("triton_") for name in baseline), sorted(baseline)
    assert trials["none_again"]["kernel_fingerprints"] == baseline  # stable across processes
    mitigated = trials["no_fp_fusion"]["kernel_fingerprints"]
    assert mitigated.keys() == baseline.keys()  # the same kernels ...

    matrix = json.loads((run_dir / "matrix.json").read_text())
    cells = {c["name"]: c for c in matrix["cells"]}
    assert cells["baseline"]["kernels_changed_count"] == 0
    assert cells["none_again"]["kernels_changed"] == []
    if _has_force_disable_knob():
        assert all(mitigated[name] != baseline[name] for name in baseline)  # ... all recompiled
        assert cells["no_fp_fusion"]["kernels_changed"] == sorted(baseline)
        assert cells["no_fp_fusion"]["kernels_changed_count"] == len(baseline) >= 1
    else:
        # Triton 3.6 and older (seen on an H200): Inductor's kernels ask for fusion, which only
        # the force knob overrides, so nothing changed, and the matrix must say so.
        assert mitigated == baseline
        assert cells["no_fp_fusion"]["kernels_changed"] == []
        assert any(
            note.startswith("no observable effect: cell no_fp_fusion") for note in matrix["notes"]
        ), matrix["notes"]


def _has_force_disable_knob() -> bool:
    import triton.knobs

    return hasattr(triton.knobs.language, "force_disable_fp_fusion")
