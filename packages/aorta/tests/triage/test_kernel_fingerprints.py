"""Per-trial Triton kernel fingerprints in triage (`fingerprint_kernels: true`).

The pure comparison and the recipe key are checked directly; the end-to-end test runs a real
recipe whose `triton_dot` workload (test plugin) compiles real Triton kernels for cuda:80
through triton-invariance's compile-only driver, each trial in its own process.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from aorta_testing import make_trial

from aorta.errors import AortaError
from aorta.runner.resolve import ResolvedRequest
from aorta.triage.analysis.cells import aggregate_cell
from aorta.triage.analysis.fingerprints import MIXED_PREFIX, cell_fingerprints, kernels_changed
from aorta.triage.analysis.matrix import build_matrix
from aorta.triage.lifecycle import run_recipe
from aorta.triage.recipe import dump_resolved_yaml, load_recipe, recipe_from_resolved, validation
from aorta.workloads.contract import TrialContext, WorkloadOutcome


def test_cell_fingerprints_union_and_mixed() -> None:
    assert cell_fingerprints([None, None]) is None
    merged = cell_fingerprints([{"a": "1", "b": "2"}, None, {"a": "1", "c": "3"}])
    assert merged == {"a": "1", "b": "2", "c": "3"}
    mixed = cell_fingerprints([{"a": "2"}, {"a": "1"}])
    assert mixed == {"a": MIXED_PREFIX + "1,2"}


def test_kernels_changed_counts_differences_and_one_sided_kernels() -> None:
    base = {"dot": "x", "scale": "y", "gone": "z"}
    assert kernels_changed(dict(base), base) == ()
    assert kernels_changed({"dot": "X", "scale": "y", "new": "n"}, base) == ("dot", "gone", "new")
    assert kernels_changed(None, base) is None
    assert kernels_changed(base, None) is None


def test_matrix_rows_carry_kernels_changed_only_when_recorded() -> None:
    def trial(i: int, fps: dict[str, str] | None) -> Any:
        return make_trial(i, passed=True, step_times_ms=[1.0, 1.0], kernel_fingerprints=fps)

    base = aggregate_cell("base", [trial(0, {"dot": "a", "s": "b"})], trials_requested=1)
    ieee = aggregate_cell("ieee", [trial(0, {"dot": "A", "s": "b"})], trials_requested=1)
    # An errored trial's (partial) fingerprints are left out, like its timings.
    errored = make_trial(
        1, passed=False, step_times_ms=[], outcome="error", kernel_fingerprints={"dot": "zz"}
    )
    same = aggregate_cell("same", [trial(0, {"dot": "a", "s": "b"}), errored], trials_requested=2)
    plain = aggregate_cell("plain", [trial(0, None)], trials_requested=1)
    matrix = build_matrix([base, ieee, same, plain], baseline="base", bootstrap_resamples=10)
    assert matrix.row("ieee").kernels_changed == ("dot",)
    assert matrix.row("same").kernels_changed == ()
    assert matrix.row("base").kernels_changed == ()
    assert matrix.row("plain").kernels_changed is None
    ieee_json = matrix.row("ieee").to_dict(matrix.alpha)
    assert ieee_json["kernels_changed"] == ["dot"] and ieee_json["kernels_changed_count"] == 1
    assert ieee_json["kernel_fingerprints"] == {"dot": "A", "s": "b"}
    assert "kernels_changed" not in matrix.row("plain").to_dict(matrix.alpha)


def _recipe_data(**overrides: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "schema_version": 1,
        "workload": "toy",
        "trials": 1,
        "steps": 1,
        "fingerprint_kernels": True,
        "cells": [{"name": "baseline", "mitigations": ["none"], "environment": "local"}],
    }
    data.update(overrides)
    return data


def _write(tmp_path: Path, data: dict[str, Any]) -> Path:
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def test_recipe_flag_round_trips_through_the_resolved_recipe(tmp_path: Path, plugin: Path) -> None:
    recipe = load_recipe(_write(tmp_path, _recipe_data()))
    assert recipe.fingerprint_kernels
    again = recipe_from_resolved(yaml.safe_load(dump_resolved_yaml(recipe)), label="r.yaml")
    assert again.fingerprint_kernels
    unset = load_recipe(_write(tmp_path, _recipe_data(fingerprint_kernels=False)))
    assert not unset.fingerprint_kernels


def test_fingerprint_kernels_without_the_extra_is_a_one_line_error(
    tmp_path: Path, plugin: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(validation, "invariance_installed", lambda: False)
    with pytest.raises(AortaError) as info:
        load_recipe(_write(tmp_path, _recipe_data()))
    message = str(info.value)
    assert "\n" not in message
    assert "recipe.yaml: fingerprint_kernels" in message
    assert "pip install 'aorta[invariance]'" in message


def test_fingerprint_kernels_must_be_a_boolean(tmp_path: Path, plugin: Path) -> None:
    with pytest.raises(AortaError, match="fingerprint_kernels: expected true or false"):
        load_recipe(_write(tmp_path, _recipe_data(fingerprint_kernels="yes")))


def test_fingerprint_kernels_with_a_command_workload_is_refused(tmp_path: Path) -> None:
    # aorta cannot see inside a command's processes: a "0 kernels changed" column would be a
    # claim without evidence, so the recipe is refused instead.
    command = {"command": ["python3", "-c", "print(1)"]}
    with pytest.raises(AortaError) as info:
        load_recipe(_write(tmp_path, _recipe_data(workload=command)))
    message = str(info.value)
    assert "\n" not in message
    assert "fingerprint_kernels: not available for command workloads" in message
    assert load_recipe(_write(tmp_path, _recipe_data(workload=command, fingerprint_kernels=False)))


def _never_called(ctx: TrialContext) -> WorkloadOutcome:
    raise AssertionError("not run")


def test_fingerprinting_forces_a_fresh_process(tmp_path: Path) -> None:
    from aorta.registry import Mitigation, Workload
    from aorta.registry.models import Environment
    from aorta.runner.models import RunRequest

    def resolved(fingerprint: bool) -> ResolvedRequest:
        request = RunRequest(workload="w", output_dir=tmp_path, fingerprint_kernels=fingerprint)
        none = Mitigation(name="none", env={}, description="")
        workload = Workload(name="w", entry=_never_called, description="")
        local = Environment(name="local", kind="local", description="")
        return ResolvedRequest(request, workload, (none,), local, {})

    assert resolved(True).needs_fresh_process
    assert not resolved(False).needs_fresh_process


def _probe(scope: str = "host", **kwargs: Any) -> Any:
    from aorta.instrumentation.environment import collect_env

    return collect_env("trial")  # cheap and real; the full probe is tested elsewhere


@pytest.mark.slow
def test_end_to_end_ieee_cell_changes_the_dot_kernel_only(
    tmp_path: Path, plugin: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("triton")
    pytest.importorskip("torch")
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton-cache"))
    monkeypatch.delenv("TRITON_F32_DEFAULT", raising=False)
    data = _recipe_data(
        workload="triton_dot",
        cells=[
            {"name": "baseline", "mitigations": ["none"], "environment": "local"},
            {"name": "none_again", "mitigations": ["none"], "environment": "local"},
            # What the `triton_fp32_ieee` mitigation sets.
            {
                "name": "triton_fp32_ieee",
                "mitigations": ["none"],
                "environment": "local",
                "extra_env": {"TRITON_F32_DEFAULT": "ieee"},
            },
        ],
    )
    recipe = load_recipe(_write(tmp_path, data))
    report = run_recipe(recipe, tmp_path / "out", probe=_probe)

    trial = json.loads((report.run_dir / "cells" / "baseline" / "trial_0.json").read_text())
    assert trial["execution"] == "child_process"  # fingerprinting forced a fresh process
    assert set(trial["kernel_fingerprints"]) == {"dot_kernel", "scale_kernel"}

    matrix = json.loads((report.run_dir / "matrix.json").read_text())
    cells = {c["name"]: c for c in matrix["cells"]}
    assert cells["triton_fp32_ieee"]["kernels_changed"] == ["dot_kernel"]
    assert cells["triton_fp32_ieee"]["kernels_changed_count"] == 1
    assert cells["none_again"]["kernels_changed"] == []  # stable across processes
    assert cells["baseline"]["kernels_changed_count"] == 0
    markdown = (report.run_dir / "matrix.md").read_text()
    assert "Kernels changed vs baseline" in markdown
    ieee_line = next(ln for ln in markdown.splitlines() if ln.startswith("| triton_fp32_ieee"))
    assert ieee_line.rstrip(" |").endswith("1")
