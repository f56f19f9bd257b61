"""`aorta.triage.lifecycle`: the executor comes from the recipe; `run.json` holds the run state."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from aorta.errors import AortaError, AortaUsageError
from aorta.triage import lifecycle
from aorta.triage.layout import RunDir
from aorta.triage.recipe import load_recipe
from aorta.triage.run import local
from aorta.triage.run.manifest import RunManifest, manifest_from_matrix, read_manifest


def _recipe(tmp_path: Path, marker: Path, executor: object = None) -> Path:
    """Two cells of a real command workload that leaves `marker` behind when a trial runs."""
    code = f"import pathlib; pathlib.Path({str(marker)!r}).touch(); print('loss: 1.0')"
    data: dict[str, Any] = {
        "schema_version": 1,
        "workload": {"command": [sys.executable, "-c", code]},
        "trials": 2,
        "steps": 1,
        "order_seed": 7,
        "cells": [
            {"name": "baseline", "mitigations": ["none"], "environment": "local"},
            {"name": "other", "mitigations": ["none"], "environment": "local"},
        ],
    }
    if executor is not None:
        data["executor"] = executor
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_run_recipe_with_executor_slurm_and_no_sbatch_is_one_error_and_runs_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "a-trial-ran"
    recipe = load_recipe(_recipe(tmp_path, marker, executor={"slurm": {}}))
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))  # no sbatch, squeue or scancel anywhere
    ran: list[object] = []
    monkeypatch.setattr(local, "run_trials", lambda *a, **k: ran.append(a) or [])
    monkeypatch.setattr(local, "open_trials", lambda *a, **k: ran.append(a))
    out = tmp_path / "out"
    with pytest.raises(AortaError) as caught:
        lifecycle.run_recipe(recipe, out)
    assert isinstance(caught.value, AortaUsageError)  # exit 2 on the CLI
    message = str(caught.value)
    assert "\n" not in message and message.startswith("executor slurm: ")
    assert "sbatch" in message
    assert not ran and not marker.exists()  # not one trial ran locally instead
    assert not out.exists()  # nothing was created


def test_executor_for_follows_the_recipe(tmp_path: Path) -> None:
    from aorta.triage.slurm.executor import SlurmExecutor

    local_recipe = load_recipe(_recipe(tmp_path, tmp_path / "m"))
    assert isinstance(lifecycle.executor_for(local_recipe), local.LocalExecutor)
    with pytest.raises(AortaUsageError, match="--detach: only with the SLURM executor"):
        lifecycle.executor_for(local_recipe, detach=True)
    slurm_recipe = load_recipe(_recipe(tmp_path, tmp_path / "m", executor={"slurm": {}}))
    chosen = lifecycle.executor_for(slurm_recipe, detach=True)
    assert isinstance(chosen, SlurmExecutor) and chosen.detach
    assert chosen.settings == slurm_recipe.executor


def test_run_json_records_the_run_and_each_resume(tmp_path: Path) -> None:
    marker = tmp_path / "a-trial-ran"
    recipe = load_recipe(_recipe(tmp_path, marker))
    report = lifecycle.run_recipe(recipe, tmp_path / "out")
    run = RunDir(report.run_dir)
    written = json.loads(run.manifest.read_text())
    assert written == {
        "version": 1,
        "run_timestamp": report.run_timestamp,
        "executor": "local",
        "order_seed": 7,
        "resumed_at": [],
        "rounds": [list(r) for r in report.rounds],
        "interrupted": False,
        "cells_not_run": [],
        "cell_errors": {},
    }
    assert len(written["rounds"]) == 2 and marker.exists()
    # A resume with nothing missing runs nothing and records itself.
    marker.unlink()
    again = lifecycle.resume_run(run.path)
    assert not marker.exists()
    manifest = read_manifest(run, executor="local", fallback_timestamp="unused")
    assert manifest is not None and len(manifest.resumed_at) == 1
    assert manifest.run_timestamp == report.run_timestamp
    assert again.resumed_at == manifest.resumed_at
    assert json.loads(run.matrix_json.read_text())["resumed_at"] == list(manifest.resumed_at)


def test_a_run_dir_from_before_run_json_is_read_from_its_matrix_once(tmp_path: Path) -> None:
    recipe = load_recipe(_recipe(tmp_path, tmp_path / "m"))
    report = lifecycle.run_recipe(recipe, tmp_path / "out")
    run = RunDir(report.run_dir)
    run.manifest.unlink()  # as every run directory written before run.json existed
    matrix = json.loads(run.matrix_json.read_text())
    matrix["interrupted"] = True
    matrix["cells_not_run"] = ["other"]
    matrix["resumed_at"] = ["2026-01-02T03:04:05Z"]
    run.matrix_json.write_text(json.dumps(matrix))
    derived = manifest_from_matrix(matrix, "local", str(run.matrix_json), "fallback")
    assert derived == RunManifest(
        run_timestamp=report.run_timestamp,
        executor="local",
        order_seed=7,
        resumed_at=("2026-01-02T03:04:05Z",),
        rounds=report.rounds,
        interrupted=True,
        cells_not_run=("other",),
    )
    again = lifecycle.reanalyse(run.path)
    # The state came from the old matrix; `other` has its trials, so it is no longer not run.
    assert again.run_timestamp == report.run_timestamp and again.interrupted
    assert again.resumed_at == ("2026-01-02T03:04:05Z",) and again.cells_not_run == ()
    written = json.loads(run.manifest.read_text())  # and from now on from run.json
    assert written["interrupted"] is True and written["rounds"] == [list(r) for r in report.rounds]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"executor": "cloud"}, "executor: expected one of local, slurm, got 'cloud'"),
        ({"order_seed": "7"}, "order_seed: expected an integer"),
        ({"resumed_at": [1]}, "resumed_at[0]: expected a string"),
        ({"rounds": "x"}, "rounds: expected a list"),
    ],
)
def test_a_bad_run_json_is_one_line_naming_the_key(
    tmp_path: Path, change: dict[str, object], expected: str
) -> None:
    run = RunDir(tmp_path)
    good = RunManifest(run_timestamp="2026-01-02T03:04:05Z", executor="local").to_dict()
    run.manifest.write_text(json.dumps({**good, **change}))
    with pytest.raises(AortaUsageError) as caught:
        read_manifest(run, executor="local", fallback_timestamp="unused")
    message = str(caught.value)
    assert message.startswith(f"{run.manifest}: ") and expected in message
    assert "\n" not in message
