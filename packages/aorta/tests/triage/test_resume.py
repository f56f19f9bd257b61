"""`aorta triage run --resume <run-dir>`: only the missing trials run, in the same directory."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from aorta_testing import ctrl_c_once

from aorta.cli.main import main
from aorta.errors import AortaUsageError, EnvironmentUnavailableError
from aorta.runner.models import RunRequest, TrialResult
from aorta.runner.trials import run_trials as real_run_trials
from aorta.triage.lifecycle import TriageInterrupted, resume_run, run_recipe
from aorta.triage.recipe import UntrustedRecipeError, recipe_from_flags
from aorta.triage.run import local as triage_runner
from aorta.triage.run.rundir import resume_command, run_dir_lock

pytestmark = pytest.mark.usefixtures("plugin")

AORTA = str(Path(sys.executable).with_name("aorta"))
CELLS = ("none-local", "plugin_fix-local")
TRIALS = 30


def _trial_files(run_dir: Path) -> dict[str, dict[int, dict[str, object]]]:
    found: dict[str, dict[int, dict[str, object]]] = {}
    for path in (run_dir / "cells").glob("*/trial_*.json"):
        data = json.loads(path.read_text())
        found.setdefault(path.parent.name, {})[data["trial_id"]] = data
    return found


def _interrupted_run(tmp_path: Path, order: str = "sequential") -> Path:
    """A real toy matrix run, Ctrl-C'd while its first cell is still running (sequential) or
    a few rounds in (interleaved)."""
    proc = subprocess.Popen(
        [AORTA, "triage", "run", "--mode", "matrix", "--workload", "toy",
         "--mitigation-axis", "none,plugin_fix", "--environment-axis", "local",
         "--trials", str(TRIALS), "--steps", "5", "--output-dir", str(tmp_path),
         "--order", order],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "AORTA_TOY_SLEEP_S": "0.02"},
    )  # fmt: skip
    returncode, err = ctrl_c_once(proc, tmp_path, "*/*/*/cells/none-local/trial_2.json")
    assert returncode == 130, err
    assert "Traceback" not in err
    (run_dir,) = [p for p in tmp_path.glob("*/*/*") if p.is_dir()]
    assert f"aorta triage run --resume {run_dir}" in err  # the way out is printed
    return run_dir


def test_ctrl_c_leaves_an_interrupted_matrix_and_exits_130(tmp_path: Path) -> None:
    run_dir = _interrupted_run(tmp_path)  # asserts the exit code 130 and no traceback
    data = json.loads((run_dir / "matrix.json").read_text())
    assert data["interrupted"] is True
    assert data["cells_not_run"] == ["plugin_fix-local"]
    assert "Interrupted" in (run_dir / "matrix.md").read_text()


@pytest.mark.parametrize("order", ["sequential", "interleaved"])
def test_resume_after_ctrl_c_runs_each_missing_trial_once(tmp_path: Path, order: str) -> None:
    run_dir = _interrupted_run(tmp_path, order)
    before = _trial_files(run_dir)
    done_before = sorted(before.get("none-local", {}))
    assert done_before == list(range(len(done_before))) and 3 <= len(done_before) < TRIALS
    if order == "sequential":
        assert "plugin_fix-local" not in before
    else:  # rounds: the other cell is at most one trial ahead or behind
        other = sorted(before.get("plugin_fix-local", {}))
        assert other == list(range(len(other))) and abs(len(other) - len(done_before)) <= 1
    on_disk = sum(len(trials) for trials in before.values())
    mtimes = {p: p.stat().st_mtime_ns for p in (run_dir / "cells").glob("*/trial_*.json")}

    done = subprocess.run(
        [AORTA, "triage", "run", "--resume", str(run_dir)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    missing = 2 * TRIALS - on_disk
    assert f"{missing} trial(s) to run ({on_disk} already on disk)" in done.stdout
    trial_lines = [line for line in done.stdout.splitlines() if "seed=" in line]
    assert len(trial_lines) == missing  # nothing ran twice
    assert f"matrix: {run_dir / 'matrix.md'}" in done.stdout

    after = _trial_files(run_dir)
    assert {cell: sorted(trials) for cell, trials in after.items()} == {
        cell: list(range(TRIALS)) for cell in CELLS
    }
    # The first attempt's files are untouched; the new ones come from one other process.
    assert all(p.stat().st_mtime_ns == m for p, m in mtimes.items())
    first_pid = {before["none-local"][i]["observed"]["pid"] for i in done_before}  # type: ignore[index]
    new_pids = {
        trial["observed"]["pid"]  # type: ignore[index]
        for cell, trials in after.items()
        for trial_id, trial in trials.items()
        if trial_id not in before.get(cell, {})
    }
    assert len(first_pid) == 1 and len(new_pids) == 1 and first_pid != new_pids
    # Seeds are those of an uninterrupted run: trial i has seed i.
    assert all(t["seed"] == i for trials in after.values() for i, t in trials.items())

    matrix = json.loads((run_dir / "matrix.json").read_text())
    assert matrix["interrupted"] is False and matrix["cells_not_run"] == []
    assert len(matrix["resumed_at"]) == 1
    assert [c["trials_run"] for c in matrix["cells"]] == [TRIALS, TRIALS]
    (archive,) = (run_dir / "previous").iterdir()
    assert json.loads((archive / "matrix.json").read_text())["interrupted"] is True
    assert "**Resumed**" in (run_dir / "matrix.md").read_text()


def test_resume_reruns_an_errored_cell_and_nothing_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    requests: list[RunRequest] = []

    def engine_gone(request: RunRequest, reporter: object = None) -> list[TrialResult]:
        if request.output_dir.name == "plugin_fix-local":
            raise EnvironmentUnavailableError("engine gone")
        return real_run_trials(request)

    def recording(request: RunRequest, reporter: object = None) -> list[TrialResult]:
        requests.append(request)
        return real_run_trials(request)

    recipe = recipe_from_flags(
        workload="toy",
        mitigation_axis=["none", "plugin_fix"],
        environment_axis=["local"],
        trials=3,
        steps=2,
        order="sequential",  # the spec's one run_trials call per cell
    )
    monkeypatch.setattr(triage_runner, "run_trials", engine_gone)
    first = run_recipe(recipe, tmp_path)
    assert first.matrix.row("plugin_fix-local").confound == "error"

    monkeypatch.setattr(triage_runner, "run_trials", recording)
    report = resume_run(first.run_dir)
    assert [(r.output_dir.name, r.selected_trials()) for r in requests] == [
        ("plugin_fix-local", (0, 1, 2))
    ]
    assert report.run_dir == first.run_dir
    assert report.matrix.row("plugin_fix-local").stats.trials_run == 3
    assert report.matrix.row("plugin_fix-local").stats.error is None
    assert report.matrix.row("none-local").stats.trials_run == 3  # kept from the first run


def test_resume_refuses_a_directory_that_is_not_a_triage_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["triage", "run", "--resume", str(tmp_path)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line == f"aorta: error: {tmp_path}: not a triage run directory (no recipe.resolved.yaml)"
    assert main(["triage", "run", "--resume", str(tmp_path), "--recipe", "x.yaml"]) == 2
    assert "exactly one of" in capsys.readouterr().err


def test_resume_refuses_a_run_directory_another_process_holds(tmp_path: Path) -> None:
    recipe = recipe_from_flags(
        workload="toy", mitigation_axis=["none"], environment_axis=["local"], trials=1, steps=1
    )
    run_dir = run_recipe(recipe, tmp_path).run_dir
    with run_dir_lock(run_dir), pytest.raises(AortaUsageError, match="another aorta triage"):
        resume_run(run_dir)


def test_run_trials_runs_only_the_selected_trial_ids(tmp_path: Path) -> None:
    request = RunRequest(workload="toy", output_dir=tmp_path, trials=4, steps=2, trial_ids=(3, 1))
    results = real_run_trials(request)
    assert [(r.trial_id, r.seed) for r in results] == [(1, 1), (3, 3)]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["trial_1.json", "trial_3.json"]
    with pytest.raises(AortaUsageError, match=r"distinct ids within 0\.\.3"):
        RunRequest(workload="toy", output_dir=tmp_path, trials=4, trial_ids=(4,))
    with pytest.raises(AortaUsageError, match="distinct ids"):
        RunRequest(workload="toy", output_dir=tmp_path, trials=4, trial_ids=(1, 1))


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--resume", "RUN", "--trials", "3"], "--trials: only for --mode matrix"),
        (["--resume", "RUN", "--output-dir", "elsewhere"], "--output-dir: not used with --resume"),
        (
            ["--recipe", "r.yaml", "--steps", "5", "--ticket", "T"],
            "--ticket, --steps: only for --mode matrix, not used with --recipe",
        ),
    ],
)
def test_options_the_mode_would_ignore_are_usage_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], expected: str
) -> None:
    argv = [str(tmp_path) if a == "RUN" else a for a in argv]
    assert main(["triage", "run", *argv]) == 2
    assert expected in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


BEHAVE = str(Path(__file__).parents[1] / "runner" / "command" / "scripts" / "behave.py")


def _interrupted_command_run(tmp_path: Path) -> tuple[Path, str]:
    """A real flag-mode matrix of a command workload, Ctrl-C'd (SIGINT, as a terminal sends
    it) after its first trial; the run directory and the resume command aorta printed."""
    proc = subprocess.Popen(
        [AORTA, "triage", "run", "--mode", "matrix", "--mitigation-axis", "none,plugin_fix",
         "--environment-axis", "local", "--trials", "3", "--steps", "5", "--step-time",
         "jsonl", "--progress", "plain", "--output-dir", str(tmp_path / "out"), "--",
         sys.executable, BEHAVE, "steps", "{steps}", "--interval", "0.2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    returncode, err = ctrl_c_once(proc, tmp_path, "out/*/*/*/cells/*/trial_0.json")
    assert returncode == 130, err
    (run_dir,) = [p for p in tmp_path.glob("out/*/*/*") if p.is_dir()]
    (printed,) = [line for line in err.splitlines() if "to finish it: " in line]
    return run_dir, printed.split("to finish it: ", 1)[1]


def test_the_printed_resume_command_finishes_an_interrupted_command_run(tmp_path: Path) -> None:
    run_dir, printed = _interrupted_command_run(tmp_path)
    assert printed == f"aorta triage run --resume {run_dir}"  # no flag: this user's own run
    # Verbatim, as a user pastes it into a shell (aorta is on PATH there).
    path = f"{Path(AORTA).parent}{os.pathsep}{os.environ['PATH']}"
    done = subprocess.run(
        shlex.split(printed),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "PATH": path},
    )
    assert done.returncode == 0, done.stderr
    assert "trusted (--trust-environments)" not in done.stderr
    matrix = json.loads((run_dir / "matrix.json").read_text())
    assert matrix["interrupted"] is False
    assert [c["trials_run"] for c in matrix["cells"]] == [3, 3]


def test_a_changed_recipe_or_another_users_run_needs_trust_and_the_printed_command_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recipe = recipe_from_flags(
        workload=None,
        command={"command": [sys.executable, BEHAVE, "steps", "{steps}"], "step_time": "jsonl"},
        mitigation_axis=["none"],
        environment_axis=["local"],
        trials=2,
        steps=3,
    )
    run_dir = run_recipe(recipe, tmp_path).run_dir
    (run_dir / "cells" / "none-local" / "trial_1.json").unlink()
    assert resume_command(run_dir) == f"aorta triage run --resume {run_dir}"

    # Another user (another key) resuming this directory: the command is not theirs.
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "other-user"))
    assert resume_command(run_dir).endswith(" --trust-environments")
    with pytest.raises(UntrustedRecipeError, match="workload runs the command"):
        resume_run(run_dir)
    monkeypatch.undo()

    # The recipe changed after the start (one byte is enough): the signature no longer holds.
    resolved = run_dir / "recipe.resolved.yaml"
    resolved.write_text(resolved.read_text().replace("- steps\n", "- steps \n"))
    assert resume_command(run_dir).endswith(" --trust-environments")
    with pytest.raises(UntrustedRecipeError, match="pass --trust-environments"):
        resume_run(run_dir)
    assert not (run_dir / "cells" / "none-local" / "trial_1.json").exists()
    resume_run(run_dir, trust_environments=True)  # the flag still works as before
    assert (run_dir / "cells" / "none-local" / "trial_1.json").exists()


def test_a_baseline_an_interrupted_run_never_reached_reads_not_run_not_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted(request: RunRequest, reporter: object = None) -> list[TrialResult]:
        raise KeyboardInterrupt  # Ctrl-C during the first cell

    recipe = recipe_from_flags(
        workload="toy",
        mitigation_axis=["plugin_fix", "none"],
        environment_axis=["local"],
        trials=2,
        steps=2,
        order="sequential",
        baseline_cell="none-local",
    )
    monkeypatch.setattr(triage_runner, "run_trials", interrupted)
    with pytest.raises(TriageInterrupted) as caught:
        run_recipe(recipe, tmp_path)
    warnings = caught.value.report.matrix.warnings
    assert "baseline cell none-local was not run (the run was interrupted before it)" in (
        " ".join(warnings)
    )
    assert not any("failed" in warning for warning in warnings), warnings
    markdown = (caught.value.report.run_dir / "matrix.md").read_text()
    assert "baseline cell none-local was not run" in markdown
    assert "cell plugin_fix-local was not run" in markdown
