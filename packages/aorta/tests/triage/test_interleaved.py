"""Interleaved order, paired ratios, one execution mode per matrix, clocks and `stop_after`.

`open_trials` (the per-cell session the interleaved runner drives) is mocked at its boundary;
`test_resume.py` and `test_progress.py` run the real thing through the CLI.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from aorta_testing import make_trial

from aorta.errors import EnvironmentUnavailableError
from aorta.instrumentation.environment import collect_env
from aorta.instrumentation.models import EnvSnapshot
from aorta.runner.models import RunRequest, TrialResult
from aorta.triage.analysis.cells import aggregate_cell
from aorta.triage.analysis.matrix import build_matrix
from aorta.triage.analysis.stats import bootstrap_ratio_interval, paired_ratio
from aorta.triage.lifecycle import TriageInterrupted, run_recipe
from aorta.triage.recipe import Recipe, recipe_from_flags
from aorta.triage.run import local as triage_runner
from aorta.triage.run.schedule import round_order


def _probe(scope: str = "host", **kwargs: object) -> EnvSnapshot:
    return collect_env("trial")  # cheap and real; which scope does not matter here


class FakeSession:
    """One cell's session: records (cell, trial id) into the shared event list."""

    def __init__(self, owner: FakeOpenTrials, request: RunRequest, reporter: Any) -> None:
        self.owner, self.request, self.reporter = owner, request, reporter

    def run(self, trial_id: int) -> TrialResult:
        cell = self.request.output_dir.name
        self.owner.events.append((cell, trial_id))
        if self.reporter is not None:  # as TrialSession.run reports
            self.reporter.trial_started(self.request, trial_id, trial_id)
        if (cell, trial_id) == self.owner.interrupt_at:
            raise KeyboardInterrupt
        failed = trial_id in self.owner.failing.get(cell, ())
        result = make_trial(
            trial_id,
            passed=not failed,
            outcome="failed" if failed else "passed",
            step_times_ms=[self.owner.step_ms.get(cell, 10.0)] * 3,
            mitigations=self.request.mitigations,
            step_clock=self.owner.clocks.get(cell, "wall"),
            execution="child_process" if self.request.fresh_process else "in_process",
        )
        self.request.output_dir.mkdir(parents=True, exist_ok=True)
        self.request.trial_path(trial_id).write_text(json.dumps(result.to_dict()))
        if self.reporter is not None:
            self.reporter.trial_finished(result)
        return result


class FakeOpenTrials:
    def __init__(self) -> None:
        self.requests: list[RunRequest] = []
        self.events: list[tuple[str, int]] = []
        self.failing: dict[str, set[int]] = {}
        self.step_ms: dict[str, float] = {}
        self.clocks: dict[str, str] = {}
        self.unavailable: set[str] = set()
        self.interrupt_at: tuple[str, int] | None = None

    def __call__(self, request: RunRequest, reporter: Any = None) -> FakeSession:
        if request.output_dir.name in self.unavailable:
            raise EnvironmentUnavailableError("engine gone")
        self.requests.append(request)
        return FakeSession(self, request, reporter)


def _install(monkeypatch: pytest.MonkeyPatch) -> FakeOpenTrials:
    fake = FakeOpenTrials()
    monkeypatch.setattr(triage_runner, "open_trials", fake)
    return fake


def _recipe(mitigations: list[str], trials: int = 4, **flags: object) -> Recipe:
    return recipe_from_flags(
        workload="fsdp",
        mitigation_axis=mitigations,
        environment_axis=["local"],
        trials=trials,
        steps=3,
        **flags,  # type: ignore[arg-type]
    )


CELLS = ["none-local", "fsdp_grad_clip-local", "fsdp_substeps-local"]


def test_round_k_of_every_cell_runs_before_round_k_plus_1_in_a_seeded_shuffle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = _install(monkeypatch)
    recipe = _recipe(["none", "fsdp_grad_clip", "fsdp_substeps"])
    assert recipe.order == "interleaved"
    report = run_recipe(recipe, tmp_path, probe=_probe)
    expected = [(name, k) for k in range(4) for name in round_order(0, k, CELLS)]
    assert fake.events == expected
    orders = [tuple(round_order(0, k, CELLS)) for k in range(4)]
    assert len(set(orders)) > 1  # a fresh order per round, not one fixed order
    assert len(fake.requests) == 3  # one session per cell: set-up is not paid per trial
    data = json.loads((report.run_dir / "matrix.json").read_text())
    assert data["order"] == {"mode": "interleaved", "seed": 0, "rounds": [list(o) for o in orders]}
    md = (report.run_dir / "matrix.md").read_text()
    assert "**Order**: interleaved" in md and "paired round by round" in md
    assert "**Execution**: every trial in this process" in md


def test_live_progress_follows_the_rounds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rich.console import Console

    from aorta.cli.progress import LiveReporter

    fake = _install(monkeypatch)
    fake.failing = {"fsdp_grad_clip-local": {2}}
    out = io.StringIO()
    console = Console(file=out, width=120, force_terminal=True, color_system=None)
    with LiveReporter(console) as reporter:
        run_recipe(_recipe(["none", "fsdp_grad_clip"]), tmp_path, probe=_probe,
                   reporter=reporter)  # fmt: skip
    last = out.getvalue().rsplit("aorta triage", 1)[-1]
    # Every cell's row counts its own trials, whichever order the rounds ran them in.
    assert re.search(r"none-local\s+4/4\s+0\s+10\.0 ms", last)
    assert re.search(r"fsdp_grad_clip-local\s+4/4\s+1\s+10\.0 ms", last)


def test_one_cell_needing_a_child_process_sends_every_cell_to_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = _install(monkeypatch)
    report = run_recipe(_recipe(["none", "xnack"], trials=1), tmp_path, probe=_probe)
    assert [r.fresh_process for r in fake.requests] == [True, True]
    md = (report.run_dir / "matrix.md").read_text()
    assert "**Execution**: every trial in a fresh child process" in md
    assert json.loads((report.run_dir / "matrix.json").read_text())["executions"] == [
        "child_process"
    ]
    fake = _install(monkeypatch)
    run_recipe(_recipe(["none", "fsdp_grad_clip"], trials=1), tmp_path, probe=_probe)
    assert [r.fresh_process for r in fake.requests] == [False, False]


def test_stop_after_failures_drops_a_cell_from_later_rounds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = _install(monkeypatch)
    fake.failing = {"none-local": {0, 2, 3}, "fsdp_grad_clip-local": {1}}
    recipe = _recipe(["none", "fsdp_grad_clip"], trials=6, stop_after_failures=2)
    report = run_recipe(recipe, tmp_path, probe=_probe)
    ran = {name: [k for cell, k in fake.events if cell == name] for name in CELLS[:2]}
    assert ran == {"none-local": [0, 1, 2], "fsdp_grad_clip-local": [0, 1, 2, 3, 4, 5]}
    base = report.matrix.row("none-local").stats
    assert base.stopped_early and (base.failed_count, base.trials_run) == (2, 3)
    assert not report.matrix.row("fsdp_grad_clip-local").stats.stopped_early
    assert not any("requested trials" in w for w in report.matrix.warnings)
    md = (report.run_dir / "matrix.md").read_text()
    assert "2 / 3 (stopped at 2 failures; max 6)" in md
    assert "1 / 6 " in md


def test_interrupted_interleaved_run_keeps_every_cells_finished_rounds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = _install(monkeypatch)
    second = round_order(0, 1, CELLS[:2])[1]
    fake.interrupt_at = (second, 1)
    with pytest.raises(TriageInterrupted) as info:
        run_recipe(_recipe(["none", "fsdp_grad_clip"]), tmp_path, probe=_probe)
    report = info.value.report
    assert report.interrupted and report.cells_not_run == ()
    runs = {row.name: row.stats.trials_run for row in report.matrix.rows}
    assert runs == {second: 1, next(c for c in CELLS[:2] if c != second): 2}


def test_a_cell_whose_session_cannot_open_errors_and_the_rounds_go_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = _install(monkeypatch)
    fake.unavailable = {"fsdp_grad_clip-local"}
    report = run_recipe(_recipe(["none", "fsdp_grad_clip"]), tmp_path, probe=_probe)
    assert report.matrix.row("fsdp_grad_clip-local").stats.error == "engine gone"
    assert [k for cell, k in fake.events if cell == "none-local"] == [0, 1, 2, 3]


def test_paired_ratio_cancels_drift_that_fools_the_unpaired_interval() -> None:
    # Identical work; the machine slows down 4x over the rounds (drift), and the baseline of
    # each round happens to run a little later than the cell. Pairing sees ratio ~1 with a
    # tight interval; pooling the rounds sees the drift as noise.
    base = [10.0 * (1 + k) * 1.02 for k in range(8)]
    cell = [10.0 * (1 + k) for k in range(8)]
    ratio = paired_ratio(cell, base)
    assert ratio is not None and abs(ratio - 1 / 1.02) < 1e-9
    interval = bootstrap_ratio_interval(cell, base, seed=0, paired=True)
    unpaired = bootstrap_ratio_interval(cell, base, seed=0)
    assert unpaired is not None and unpaired[1] - unpaired[0] > 0.5
    assert interval is not None and interval[1] - interval[0] < 1e-9
    with pytest.raises(ValueError, match="equal lengths"):
        paired_ratio(cell, base[:3])


def _cell(name: str, means: list[float], clock: str) -> object:
    trials = [
        make_trial(k, passed=True, step_times_ms=[m, m], step_clock=clock)
        for k, m in enumerate(means)
    ]
    return aggregate_cell(name, trials, trials_requested=len(trials))


def test_matrix_pairs_rounds_and_warns_when_clocks_differ() -> None:
    drift = [10.0, 40.0, 12.0, 80.0]
    base = _cell("base", drift, "cpu")
    same = _cell("same", [m * 1.01 for m in drift], "cpu")
    paired = build_matrix([base, same], baseline="base", paired=True)  # type: ignore[list-item]
    unpaired = build_matrix([base, same], baseline="base")  # type: ignore[list-item]
    low, high = paired.row("same").step_time_ratio_ci  # type: ignore[misc]
    assert high - low < 1e-9 and abs(paired.row("same").step_time_ratio - 1.01) < 1e-9  # type: ignore[operator]
    wide = unpaired.row("same").step_time_ratio_ci
    assert wide is not None and wide[1] - wide[0] > 0.5
    # No trial failed, so the first warning is the baseline's banner; no clock warning follows.
    banner, *rest = paired.warnings
    assert banner.startswith("Baseline did not reproduce the failure") and not rest
    mixed = build_matrix([base, _cell("wall", drift, "wall")], baseline="base")  # type: ignore[list-item]
    (warning,) = mixed.warnings[1:]
    assert "different clocks (base: workload cpu; wall: workload wall)" in warning


def _recipe_file(tmp_path: Path, **top: object) -> Path:
    import yaml

    data: dict[str, object] = {
        "schema_version": 1,
        "workload": "fsdp",
        "trials": 5,
        "steps": 3,
        "cells": [
            {"name": "baseline-local", "mitigations": ["none"], "environment": "local"},
            {
                "name": "clip",
                "mitigations": ["fsdp_grad_clip"],
                "environment": "local",
                "stop_after": None,
            },
        ],
        **top,
    }
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_recipe_order_seed_and_stop_after_with_a_per_cell_opt_out(tmp_path: Path) -> None:
    from aorta.triage.recipe import load_recipe, recipe_from_resolved, resolved_recipe_dict

    plain = load_recipe(_recipe_file(tmp_path))
    assert (plain.order, plain.order_seed) == ("interleaved", 0)
    recipe = load_recipe(
        _recipe_file(tmp_path, order="sequential", order_seed=7, stop_after={"failures": 2})
    )
    assert (recipe.order, recipe.order_seed) == ("sequential", 7)
    assert recipe.cell("baseline-local").stop_after_failures == 2
    assert recipe.cell("clip").stop_after_failures is None  # `stop_after: null` opts out
    again = recipe_from_resolved(resolved_recipe_dict(recipe))
    assert (again.order, again.order_seed) == ("sequential", 7)
    assert again.cell("baseline-local").stop_after_failures == 2
    # A run directory written before order modes existed ran sequentially.
    old = resolved_recipe_dict(recipe)
    del old["order"], old["order_seed"]
    assert recipe_from_resolved(old).order == "sequential"


@pytest.mark.parametrize(
    ("top", "message"),
    [
        ({"order": "random"}, "order: expected one of interleaved, sequential, got 'random'"),
        ({"order_seed": -1}, "order_seed: expected an integer >= 0, got -1"),
        ({"stop_after": 3}, "stop_after: expected a mapping {failures: <positive integer>}"),
        ({"stop_after": {"failures": 0}}, "stop_after.failures: expected a positive integer"),
        ({"stop_after": {"fails": 2}}, "stop_after.fails: unknown key 'fails'"),
    ],
)
def test_bad_order_and_stop_after_are_one_line_errors(
    tmp_path: Path, top: dict[str, object], message: str
) -> None:
    from aorta.triage.errors import RecipeSchemaError
    from aorta.triage.recipe import load_recipe

    path = _recipe_file(tmp_path, **top)
    with pytest.raises(RecipeSchemaError) as info:
        load_recipe(path)
    assert str(info.value).startswith(f"{path}: ") and message in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--trials", "3", "--max-trials", "9"], "--max-trials: only with --stop-after-failures"),
        (["--trials", "3", "--stop-after-failures", "2"], "give the cap as --max-trials N"),
        (["--stop-after-failures", "2"], "--stop-after-failures needs --max-trials N"),
        (["--trials", "3", "--order", "random"], "'random' is not one of"),
    ],
)
def test_flag_mode_stop_and_order_usage_errors(
    flags: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from aorta.cli.main import main

    base = ["triage", "run", "--mode", "matrix", "--workload", "fsdp"]
    axes = ["--mitigation-axis", "none", "--environment-axis", "local", "--dry-run"]
    assert main([*base, *axes, *flags]) == 2
    assert message in capsys.readouterr().err


def test_flag_mode_stop_after_builds_the_cap_and_rule(capsys: pytest.CaptureFixture[str]) -> None:
    from aorta.cli.main import main

    argv = ["triage", "run", "--mode", "matrix", "--workload", "fsdp", "--mitigation-axis",
            "none", "--environment-axis", "local", "--stop-after-failures", "3",
            "--max-trials", "40", "--order", "sequential", "--dry-run"]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "order=sequential" in out
    assert "none-local: mitigations=none environment=local trials<=40 stop_after_failures=3" in out
