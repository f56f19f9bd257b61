"""Where each cell's step times came from, and the host's load while wall clocks timed them."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from aorta_testing import make_trial

from aorta.runner.host_load import HostLoad
from aorta.runner.models import TrialResult
from aorta.triage.analysis.cells import CellStats, aggregate_cell
from aorta.triage.analysis.matrix import Matrix, build_matrix
from aorta.triage.analysis.step_sources import load_range, sources_summary, time_source
from aorta.triage.recipe import recipe_from_flags
from aorta.triage.report.markdown import render_markdown
from aorta.triage.report.output import MatrixReport, report_json

EN = "\u2013"


def command_trial(
    trial_id: int,
    clock: str,
    *,
    step_format: str | None = None,
    load: tuple[float, float] | None = None,
    **fields: Any,
) -> TrialResult:
    command: dict[str, Any] = {"argv": ["train.py"], "clock": clock}
    if step_format is not None:
        command["step_format"] = step_format
    return make_trial(
        trial_id,
        passed=True,
        step_times_ms=[10.0, 10.0],
        workload="command",
        step_clock=clock,
        command=command,
        host_load=None if load is None else HostLoad(load[0], load[1], 2, 2),
        **fields,
    )


def cell(name: str, trials: Sequence[TrialResult]) -> CellStats:
    return aggregate_cell(name, trials, trials_requested=len(trials))


def matrix(*cells: CellStats) -> Matrix:
    return build_matrix(cells, baseline=cells[0].name, bootstrap_resamples=50)


def clock_warnings(found: Matrix) -> list[str]:
    return [w for w in found.warnings if "different clocks" in w or "load" in w]


@pytest.mark.parametrize(
    ("trial", "source"),
    [
        (command_trial(0, "log", step_format="megatron"), "log (megatron)"),
        (command_trial(0, "log"), "log"),
        (command_trial(0, "arrival", step_format="nanogpt"), "arrival"),
        (command_trial(0, "cpu"), "cpu"),
        (make_trial(0, passed=True, step_times_ms=[1.0], step_clock="wall"), "workload wall"),
        (make_trial(0, passed=True, step_times_ms=[1.0], step_clock="cpu"), "workload cpu"),
        (make_trial(0, passed=True, step_times_ms=[1.0]), "undeclared"),
        (command_trial(0, "log", step_format="x\n> **Warning**: fake"), "log"),
        (command_trial(0, "cpu\n# heading"), "undeclared"),
    ],
)
def test_time_source_of_a_trial_record(trial: TrialResult, source: str) -> None:
    assert time_source(trial) == source


def test_one_source_everywhere_is_one_line_and_no_warning() -> None:
    cells = [
        cell(name, [command_trial(i, "log", step_format="megatron") for i in range(2)])
        for name in ("base", "fix")
    ]
    assert sources_summary(cells) == "log (megatron) (every cell)"
    assert clock_warnings(matrix(*cells)) == []


def test_cells_timed_by_different_sources_warn_naming_each() -> None:
    base = cell("base", [command_trial(i, "log", step_format="megatron") for i in range(2)])
    fix = cell("fix", [command_trial(i, "arrival") for i in range(2)])
    (warning,) = clock_warnings(matrix(base, fix))
    assert "different clocks (base: log (megatron); fix: arrival)" in warning
    assert sources_summary([base, fix]) == "base: log (megatron); fix: arrival"


def test_a_cell_mixing_sources_names_its_trials_and_errored_trials_do_not_count() -> None:
    errored = dataclasses.replace(command_trial(3, "cpu"), passed=False, outcome="error")
    trials = [
        command_trial(0, "log", step_format="hf"),
        command_trial(1, "arrival"),
        command_trial(2, "log", step_format="hf"),
        errored,
    ]
    found = clock_warnings(matrix(cell("base", trials)))
    assert found == [
        "cells measured step time with different clocks (base: log (hf), arrival): their "
        "step-time ratios compare different measurements",
        "cell base timed its trials with different clocks (log (hf): trials 0, 2; arrival: "
        "trial 1): its mean step time mixes different measurements",
    ]


def test_load_range_covers_wall_clock_trials_only_and_warns_when_it_swings() -> None:
    base = cell("base", [command_trial(i, "log", load=(0.4, 0.9)) for i in range(2)])
    busy = cell("busy", [command_trial(i, "arrival", load=(2.5, 3.1)) for i in range(2)])
    cpu = cell("cpu", [command_trial(i, "cpu", load=(7.0, 9.0)) for i in range(2)])
    found = load_range([base, busy, cpu])
    assert found is not None and (found.low, found.high, found.trials) == (0.4, 3.1, 4)
    assert found.text() == f"0.4{EN}3.1 (1-min loadavg over 4 trials timed by a wall clock, 2 CPUs)"
    assert found.varied  # a swing of 2.7 on 2 CPUs
    warnings = [w for w in matrix(base, busy, cpu).warnings if "load" in w]
    assert len(warnings) == 1
    assert f"per cell base 0.4{EN}0.9, busy 2.5{EN}3.1" in warnings[0]
    assert "clock: cpu" in warnings[0]
    calm = cell("calm", [command_trial(i, "log", load=(0.4, 1.3)) for i in range(2)])
    assert not [w for w in matrix(calm).warnings if "load" in w]  # within 1.0 on 2 CPUs
    assert load_range([cpu]) is None  # CPU clocks do not move with the load


def test_matrix_md_and_json_say_the_sources_and_the_load(tmp_path: Path) -> None:
    recipe = recipe_from_flags(
        workload="fsdp",
        mitigation_axis=["none", "tf32_off"],
        environment_axis=["local"],
        trials=2,
        steps=4,
    )
    base = cell(
        "none-local",
        [command_trial(i, "log", step_format="megatron", load=(0.5, 0.6)) for i in range(2)],
    )
    fix = cell("tf32_off-local", [command_trial(i, "arrival", load=(2.0, 3.0)) for i in range(2)])
    report = MatrixReport(recipe, matrix(base, fix), tmp_path, "2026-11-26T19:00:00Z")
    lines = render_markdown(report).splitlines()
    assert "**Step times from**: none-local: log (megatron); tf32_off-local: arrival" in lines
    assert (
        f"**Host load during the run**: 0.5{EN}3.0 (1-min loadavg over 4 trials timed by a "
        "wall clock, 2 CPUs)"
    ) in lines
    assert any("different clocks" in line and line.startswith("> **Warning**") for line in lines)
    assert any(line.startswith("- Step times from says what timed") for line in lines)
    data = json.loads(json.dumps(report_json(report), allow_nan=False))
    assert [c["time_sources"] for c in data["cells"]] == [["log (megatron)"], ["arrival"]]
    assert data["cells"][1]["trials"][0]["time_source"] == "arrival"
    assert data["cells"][1]["trials"][0]["host_load"]["max_1m"] == 3.0
    assert data["host_load"]["min_1m"] == 0.5 and data["host_load"]["varied"] is True
    assert data["host_load"]["by_cell"] == {"none-local": [0.5, 0.6], "tf32_off-local": [2.0, 3.0]}


def test_no_load_line_when_no_trial_sampled_it(tmp_path: Path) -> None:
    recipe = recipe_from_flags(
        workload="fsdp", mitigation_axis=["none"], environment_axis=["local"], trials=1, steps=4
    )
    only = cell("none-local", [make_trial(0, passed=True, step_times_ms=[1.0], step_clock="wall")])
    md = render_markdown(MatrixReport(recipe, matrix(only), tmp_path, "2026-11-26T19:00:00Z"))
    assert "**Step times from**: workload wall (every cell)" in md.splitlines()
    assert "**Host load during the run**" not in md
    assert report_json(MatrixReport(recipe, matrix(only), tmp_path, "x"))["host_load"] is None
