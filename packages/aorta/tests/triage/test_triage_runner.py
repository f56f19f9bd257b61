"""run_recipe: one run_trials call per cell, probes in the right places, resilience.

`run_trials` and `collect_env` are mocked at their boundaries (as the spec asks); the CLI
tests in test_triage_cli.py run the whole path for real.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from aorta_testing import make_trial

from aorta.errors import EnvironmentUnavailableError
from aorta.instrumentation.environment import collect_env
from aorta.instrumentation.models import EnvSnapshot
from aorta.registry import Environment
from aorta.runner.models import RunRequest, TrialResult
from aorta.triage.lifecycle import TriageInterrupted, run_recipe
from aorta.triage.recipe import Recipe, recipe_from_flags
from aorta.triage.run import local as triage_runner


def _trial(request: RunRequest, trial_id: int, *, passed: bool, step_ms: float) -> TrialResult:
    return make_trial(
        trial_id,
        passed=passed,
        step_times_ms=[step_ms] * 4,
        failure="non-finite loss at step 1",
        workload=request.workload,
        mitigations=request.mitigations,
        environment=request.environment_name,
        steps=request.steps,
        env_applied=dict(request.extra_env),
    )


class FakeRunTrials:
    """Stands in for run_trials: behaviour per cell name, every call recorded."""

    def __init__(self, behaviour: dict[str, Callable[[RunRequest], list[TrialResult]]]) -> None:
        self.behaviour = behaviour
        self.requests: list[RunRequest] = []
        self.events: list[str] = []

    def __call__(self, request: RunRequest, reporter: object = None) -> list[TrialResult]:
        cell = request.output_dir.name
        self.requests.append(request)
        self.events.append(f"cell {cell}")
        default = lambda r: [_trial(r, i, passed=True, step_ms=10.0) for i in range(r.trials)]  # noqa: E731
        return self.behaviour.get(cell, default)(request)


class RecordingProbe:
    def __init__(self, events: list[str], partial_scopes: tuple[str, ...] = ()) -> None:
        self.events = events
        self.partial_scopes = partial_scopes
        self.scopes: list[str] = []

    def __call__(self, scope: str = "host", **kwargs: Any) -> EnvSnapshot:
        self.scopes.append(scope)
        self.events.append(f"probe {scope}")
        snap = collect_env("trial")  # cheap and real; re-labelled below
        data = snap.to_dict()
        data["scope"] = scope
        if scope in self.partial_scopes:
            data["partial"] = True
            data["partial_reasons"] = ["memory: OSError: injected"]
        return EnvSnapshot.from_dict(data)


def _recipe(envs: list[str] | None = None, trials: int = 4) -> Recipe:
    return recipe_from_flags(
        workload="fsdp",
        mitigation_axis=["none", "tf32_off", "xnack"],
        environment_axis=envs or ["local"],
        trials=trials,
        steps=5,
        order="sequential",  # the spec's one run_trials call per cell
    )


def _install(monkeypatch: pytest.MonkeyPatch, fake: FakeRunTrials) -> None:
    monkeypatch.setattr(triage_runner, "run_trials", fake)


def test_one_run_trials_call_per_cell_with_the_expected_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeRunTrials({})
    _install(monkeypatch, fake)
    recipe = _recipe()
    report = run_recipe(recipe, tmp_path, probe=RecordingProbe(fake.events))
    assert [r.output_dir for r in fake.requests] == [
        report.run_dir / "cells" / name for name in ("none-local", "tf32_off-local", "xnack-local")
    ]
    first = fake.requests[1]
    assert first.workload == "fsdp"
    assert first.mitigations == ("tf32_off",)
    assert first.environment == recipe.cell("tf32_off-local").environment
    assert (first.trials, first.steps) == (4, 5)
    assert report.run_dir.parent.parent == tmp_path / "_no_ticket_"
    assert report.run_dir.parent.name == "fsdp"
    for name in ("matrix.md", "matrix.json", "recipe.resolved.yaml", "host_env.json"):
        assert (report.run_dir / name).is_file(), name


def test_probes_host_once_and_each_environment_before_its_first_cell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 4 mitigations x 3 environments = 12 cells; two inline docker images + local.
    recipe = recipe_from_flags(
        workload="fsdp",
        mitigation_axis=["none", "tf32_off", "xnack", "fsdp_grad_clip"],
        environment_axis=["local", "image:rocm/pytorch:nightly", "image:busybox:1"],
        trials=2,
        steps=3,
        order="sequential",  # the spec's one run_trials call per cell
    )
    fake = FakeRunTrials({})
    _install(monkeypatch, fake)
    probe = RecordingProbe(fake.events)
    report = run_recipe(recipe, tmp_path, probe=probe)
    assert probe.scopes.count("host") == 1
    assert probe.scopes.count("environment") == 3
    assert fake.events[0] == "probe host"
    env_dirs = sorted(p.name for p in (report.run_dir / "environments").iterdir())
    assert len(env_dirs) == 3 and "local" in env_dirs
    # Each environment probe comes right before the first cell that uses it.
    seen: set[str] = set()
    for index, event in enumerate(fake.events):
        if event.startswith("cell "):
            env = recipe.cell(event.removeprefix("cell ")).environment.name
            if env not in seen:
                assert fake.events[index - 1] == "probe environment"
                seen.add(env)
    assert json.loads((report.run_dir / "host_env.json").read_text())["scope"] == "host"


def test_partial_probe_is_kept_and_warned_about(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeRunTrials({})
    _install(monkeypatch, fake)
    probe = RecordingProbe(fake.events, partial_scopes=("environment",))
    report = run_recipe(_recipe(), tmp_path, probe=probe)
    assert len(fake.requests) == 3  # every cell still ran
    saved = json.loads((report.run_dir / "environments" / "local" / "env.json").read_text())
    assert saved["partial"] is True
    assert report.partial_scopes == ("environment local",)
    assert "environment local" in (report.run_dir / "matrix.md").read_text()


def test_failing_cell_is_an_error_row_and_other_cells_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def unavailable(request: RunRequest) -> list[TrialResult]:
        raise EnvironmentUnavailableError("docker engine not reachable")

    fake = FakeRunTrials({"tf32_off-local": unavailable})
    _install(monkeypatch, fake)
    report = run_recipe(_recipe(), tmp_path, probe=RecordingProbe(fake.events))
    assert len(fake.requests) == 3
    row = report.matrix.row("tf32_off-local")
    assert row.confound == "error"
    assert row.stats.error == "docker engine not reachable"
    # Every errored row has a place to look, and the finished run leaves no lock file.
    error_file = report.run_dir / "cells" / "tf32_off-local" / "error.txt"
    assert error_file.read_text() == "docker engine not reachable\n"
    assert not (report.run_dir / ".triage.lock").exists()
    assert report.matrix.row("xnack-local").confound != "error"
    data = json.loads((report.run_dir / "matrix.json").read_text())
    assert "docker engine not reachable" in json.dumps(data)


def test_one_failing_trial_of_eight_counts_seven_passed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def one_fails(request: RunRequest) -> list[TrialResult]:
        return [_trial(request, i, passed=i != 3, step_ms=10.0) for i in range(8)]

    fake = FakeRunTrials({"xnack-local": one_fails})
    _install(monkeypatch, fake)
    report = run_recipe(_recipe(trials=8), tmp_path, probe=RecordingProbe(fake.events))
    stats = report.matrix.row("xnack-local").stats
    assert (stats.passed_count, stats.failed_count) == (7, 1)


def test_baseline_error_still_writes_the_matrix_with_na_ratios(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(request: RunRequest) -> list[TrialResult]:
        raise EnvironmentUnavailableError("no engine")

    fake = FakeRunTrials({"none-local": broken})
    _install(monkeypatch, fake)
    report = run_recipe(_recipe(), tmp_path, probe=RecordingProbe(fake.events))
    assert all(row.step_time_ratio is None for row in report.matrix.rows)
    md = (report.run_dir / "matrix.md").read_text()
    assert "n/a" in md
    assert any("baseline" in w for w in report.matrix.warnings)


def test_ctrl_c_writes_an_interrupted_matrix_with_finished_trials(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted(request: RunRequest) -> list[TrialResult]:
        # Two trials finished and were written (as run_trials does) before Ctrl-C.
        request.output_dir.mkdir(parents=True)
        for i in range(2):
            trial = _trial(request, i, passed=True, step_ms=10.0)
            (request.output_dir / f"trial_{i}.json").write_text(json.dumps(trial.to_dict()))
        raise KeyboardInterrupt

    fake = FakeRunTrials({"tf32_off-local": interrupted})
    _install(monkeypatch, fake)
    with pytest.raises(TriageInterrupted) as info:
        run_recipe(_recipe(), tmp_path, probe=RecordingProbe(fake.events))
    report = info.value.report
    assert report.interrupted and report.cells_not_run == ("xnack-local",)
    assert len(fake.requests) == 2
    data = json.loads((report.run_dir / "matrix.json").read_text())
    assert data["interrupted"] is True
    partial = report.matrix.row("tf32_off-local").stats
    assert partial.trials_run == 2 and partial.trials_requested == 4
    # The cell Ctrl-C never reached reads `not run` (as the legend promises), not `error`.
    (xnack,) = [c for c in data["cells"] if c["name"] == "xnack-local"]
    assert xnack["confound"] == "not run"
    md_row = next(
        line for line in (report.run_dir / "matrix.md").read_text().splitlines()
        if line.startswith("| xnack-local")
    )  # fmt: skip
    assert md_row.rstrip(" |").endswith("not run") and "error" not in md_row
    assert not (report.run_dir / ".triage.lock").exists()


def test_a_runner_crash_still_leaves_a_matrix_and_surfaces(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def disk_full(request: RunRequest) -> list[TrialResult]:
        raise OSError(28, "No space left on device")

    fake = FakeRunTrials({"tf32_off-local": disk_full})
    _install(monkeypatch, fake)
    with pytest.raises(OSError, match="No space left"):
        run_recipe(_recipe(), tmp_path, probe=RecordingProbe(fake.events))
    (run_dir,) = tmp_path.glob("*/*/*")
    data = json.loads((run_dir / "matrix.json").read_text())
    assert data["interrupted"] is True
    assert data["cells_not_run"] == ["tf32_off-local", "xnack-local"]
    assert [c["trials_run"] for c in data["cells"]] == [4, 0, 0]  # the baseline's trials kept


def test_rerun_creates_a_new_run_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeRunTrials({})
    _install(monkeypatch, fake)
    now = datetime(2026, 4, 28, 14, 12, 3, tzinfo=UTC)
    first = run_recipe(_recipe(), tmp_path, probe=RecordingProbe(fake.events), now=now)
    second = run_recipe(_recipe(), tmp_path, probe=RecordingProbe(fake.events), now=now)
    assert first.run_dir != second.run_dir
    assert (first.run_dir / "matrix.md").exists() and (second.run_dir / "matrix.md").exists()


def test_inline_docker_environment_is_passed_as_an_object(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeRunTrials({})
    _install(monkeypatch, fake)
    recipe = _recipe(envs=["image:rocm/pytorch:nightly"])
    run_recipe(recipe, tmp_path, probe=RecordingProbe(fake.events))
    env = fake.requests[0].environment
    assert isinstance(env, Environment) and env.kind == "docker"
    assert env.image == "rocm/pytorch:nightly" and env.name.startswith("_inline_")


def test_no_subprocess_under_the_triage_package() -> None:
    import aorta.triage

    source_dir = Path(aorta.triage.__file__).parent
    for path in source_dir.rglob("*.py"):
        text = path.read_text()
        assert "import subprocess" not in text, path
        assert '"env", "probe"' not in text, path


def test_run_dir_lock_is_exclusive_and_removed_at_the_end(tmp_path: Path) -> None:
    from aorta.errors import AortaUsageError
    from aorta.triage.layout import LOCK_NAME
    from aorta.triage.run.rundir import run_dir_lock

    with run_dir_lock(tmp_path):
        assert (tmp_path / LOCK_NAME).exists()
        with (
            pytest.raises(AortaUsageError, match="another aorta triage process"),
            run_dir_lock(tmp_path),
        ):
            pass
    assert not (tmp_path / LOCK_NAME).exists()
    with run_dir_lock(tmp_path):  # free again
        pass
    assert not (tmp_path / LOCK_NAME).exists()
