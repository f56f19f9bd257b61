"""The SLURM executor without a cluster: settings, their config, trial states, the lost-trial
cap and adaptive rounds on oellm-autoexp's fake SLURM, and the CLI's one-line refusals (the
real runs are in tests/slurm)."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from aorta.triage.recipe import Recipe, load_recipe, recipe_from_resolved, resolved_recipe_dict
from aorta.triage.recipe.executor import SlurmSettings
from aorta.triage.recipe.trust import untrusted_actions
from aorta.triage.slurm.trials import JobRow, Standing, round_robin_tasks, trial_states

AORTA = str(Path(sys.executable).with_name("aorta"))


def _recipe_file(tmp_path: Path, executor: object = None, name: str = "recipe.yaml") -> Path:
    data: dict[str, Any] = {
        "schema_version": 1,
        "workload": {"command": [sys.executable, "-c", "print(1)"]},
        "trials": 2,
        "steps": 3,
        "cells": [
            {"name": "baseline", "mitigations": ["none"], "environment": "local"},
            {"name": "other", "mitigations": ["none"], "environment": "local"},
        ],
    }
    if executor is not None:
        data["executor"] = executor
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return path


def aorta(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [AORTA, *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
        check=False,
    )


def test_executor_settings_load_round_trip_and_count_as_untrusted_shell(tmp_path: Path) -> None:
    executor = {
        "slurm": {
            "partition": "gpu",
            "time": "01:00:00",
            "gpus_per_node": 1,
            "max_concurrent": 4,
            "constraint": "mi300x&ib",
            "setup": ["module load rocm"],
            "sbatch_extra": ["--mem=64G"],
            "launcher": "apptainer exec img.sif",
        }
    }
    recipe = load_recipe(_recipe_file(tmp_path, executor))
    assert recipe.executor == SlurmSettings(
        partition="gpu",
        time="01:00:00",
        gpus_per_node=1,
        max_concurrent=4,
        constraint="mi300x&ib",
        setup=("module load rocm",),
        sbatch_extra=("--mem=64G",),
        launcher="apptainer exec img.sif",
    )
    again = recipe_from_resolved(yaml.safe_load(yaml.safe_dump(resolved_recipe_dict(recipe))))
    assert again.executor == recipe.executor
    assert load_recipe(_recipe_file(tmp_path)).executor is None
    assert load_recipe(_recipe_file(tmp_path, "local")).executor is None
    actions = untrusted_actions(again, {}, {})
    assert "SLURM setup runs 'module load rocm'" in actions
    assert "SLURM trials start under the launcher 'apptainer exec img.sif'" in actions
    assert "SLURM script has #SBATCH --mem=64G" in actions


@pytest.mark.parametrize(
    ("executor", "message"),
    [
        ({"slurm": {"partion": "gpu"}}, "executor.slurm.partion: unknown key 'partion'"),
        ({"slurm": {"nodes": "two"}}, "executor.slurm.nodes: expected an integer from 1"),
        ({"slurm": {"time": "1 hour"}}, "executor.slurm.time: expected a SLURM time limit"),
        ({"slurm": {"setup": "module load x"}}, "executor.slurm.setup: expected a list of"),
        ({"slurm": {"sbatch_extra": ["mem=1G"]}}, "sbatch_extra[0]: expected an sbatch option"),
        ({"slurm": {"partition": "a b"}}, "executor.slurm.partition: expected a SLURM name"),
        ("remote", "executor: expected local or a mapping {slurm: {...}}"),
    ],
)
def test_bad_executor_settings_are_one_line_exit_2_and_create_nothing(
    tmp_path: Path, executor: object, message: str
) -> None:
    out = tmp_path / "out"
    done = aorta("triage", "run", "--recipe", str(_recipe_file(tmp_path, executor)),
                 "--output-dir", str(out))  # fmt: skip
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert message in line and "recipe.yaml" in line
    assert not out.exists()


def test_slurm_missing_from_path_is_one_line_exit_2_and_creates_nothing(tmp_path: Path) -> None:
    out = tmp_path / "out"
    bare = {"PATH": str(Path(sys.executable).parent)}  # python and aorta, no sbatch
    done = aorta("triage", "run", "--recipe", str(_recipe_file(tmp_path)), "--executor",
                 "slurm", "--output-dir", str(out), env=bare)  # fmt: skip
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "executor slurm: SLURM is not installed here: 'sbatch' is not on PATH" in line
    assert not out.exists()


def test_slurm_config_file_and_flag_checks(tmp_path: Path) -> None:
    config = tmp_path / "slurm.yaml"
    config.write_text("partition: gpu\nmax_concurent: 3\n")
    recipe = str(_recipe_file(tmp_path))
    done = aorta("triage", "run", "--recipe", recipe, "--executor", "slurm", "--slurm-config",
                 str(config), "--dry-run")  # fmt: skip
    assert done.returncode == 2
    assert "slurm.yaml: slurm.max_concurent: unknown key 'max_concurent'" in done.stderr
    lone = aorta("triage", "run", "--recipe", recipe, "--slurm-config", str(config))
    assert lone.returncode == 2 and "--slurm-config: only with --executor slurm" in lone.stderr
    detach = aorta("triage", "run", "--recipe", recipe, "--detach", "--dry-run")
    assert detach.returncode == 2 and "--detach: only with the SLURM executor" in detach.stderr


def test_the_autoexp_config_plans_one_throttled_array_on_one_node(tmp_path: Path) -> None:
    from aorta.triage.slurm.config import autoexp_config
    from oellm_autoexp import api

    settings = SlurmSettings(
        partition="debug", max_concurrent=2, same_node="node7", constraint="a100", setup=("X=1",)
    )
    config = autoexp_config(settings, tmp_path, 1, 5)
    path = tmp_path / "autoexp.yaml"
    path.write_text(yaml.safe_dump(config))
    planned = api.plan(path, test_only="never")
    assert [job.name for job in planned.plan.jobs] == [f"task{i}" for i in range(5)]
    script = planned.plan.scripts[0].path.read_text()
    for line in ("--array=0-4%2", "--partition=debug", "--nodelist=node7", "--constraint=a100"):
        assert f"#SBATCH {line}\n" in script
    assert f"-m aorta.triage.slurm.task {tmp_path.resolve()} 1 3)" in script


def _row(state: str) -> JobRow:
    return JobRow(state=state, slurm_id="7_0", restarts=2, reason="cap")


def test_trial_states_read_disk_first_then_the_job(tmp_path: Path) -> None:
    recipe = load_recipe(_recipe_file(tmp_path))
    done = {"baseline": {0}}
    jobs = {
        ("baseline", 0): _row("failed"),  # JSON on disk: final whatever SLURM says
        ("baseline", 1): _row("running"),
        ("other", 0): _row("failed"),  # cap spent, no JSON: lost
        ("other", 1): _row("completed"),  # marker but no file: vanished
    }
    states = {(s.cell, s.trial): s for s in trial_states(recipe, done, set(), jobs)}
    assert states["baseline", 0].standing is Standing.DONE
    assert states["baseline", 1].standing is Standing.RUNNING
    assert (states["other", 0].standing, states["other", 0].reason) == (Standing.LOST, "cap")
    assert states["other", 1].standing is Standing.LOST
    assert "vanished" in states["other", 1].reason
    stopped = {(s.cell, s.trial): s.standing for s in trial_states(recipe, {}, {"other"}, {})}
    assert (
        stopped["other", 0] is Standing.SKIPPED and stopped["baseline", 0] is Standing.UNSUBMITTED
    )
    assert round_robin_tasks(recipe, [("other", 1), ("baseline", 1), ("other", 0)]) == [
        ("other", 0),
        ("baseline", 1),
        ("other", 1),
    ]


@dataclass(frozen=True)
class _FakeSlurm:
    """oellm-autoexp's fake SLURM (its fake clock advanced by sleep) behind a `SlurmExecutor`."""

    client: Any
    clock: Any
    environ: dict[str, str]

    def executor(self, recipe: Recipe, *, detach: bool) -> Any:
        from aorta.triage.slurm.executor import SlurmExecutor

        assert recipe.executor is not None
        return SlurmExecutor(
            recipe.executor, detach=detach, client=self.client, sleep=self.clock.advance,
            clock=self.clock, environ=self.environ,
        )  # fmt: skip


def run_on_slurm(
    recipe: Recipe, root: Path, *, reporter: Any, hooks: _FakeSlurm, detach: bool = False
) -> tuple[Path, Any]:
    """`lifecycle.start` on the fake SLURM: (run dir, report or None when detached)."""
    from aorta.triage.lifecycle import start

    executor = hooks.executor(recipe, detach=detach)
    outcome = start(recipe, root, executor=executor, reporter=reporter, probe=_probe)
    return outcome.run_dir, outcome.report


def resume_on_slurm(
    recipe: Recipe, run_dir: Path, *, reporter: Any, hooks: _FakeSlurm, detach: bool = False
) -> Any:
    """`lifecycle.resume` on the fake SLURM; the report, or None when detached."""
    from aorta.triage.lifecycle import resume

    executor = hooks.executor(recipe, detach=detach)
    return resume(run_dir, executor=executor, reporter=reporter, probe=_probe).report


def _fake_hooks(tmp_path: Path, timeline: Any) -> _FakeSlurm:
    """A `_FakeSlurm` whose tasks all follow `timeline`; sbatch & co. on PATH as stand-ins."""
    from oellm_autoexp.slurm.fake import FakeClock, FakeSlurmClient

    clock = FakeClock()
    bin_dir = tmp_path / "bin"  # the installed-check looks for the programs on PATH only
    bin_dir.mkdir()
    for program in ("sbatch", "squeue", "scancel"):
        (bin_dir / program).write_text("#!/bin/sh\nexit 1\n")
        (bin_dir / program).chmod(0o755)
    client = FakeSlurmClient(clock, lambda _r, _t, _n: timeline)
    return _FakeSlurm(client, clock, {"PATH": str(bin_dir)})


def test_a_trial_slurm_keeps_losing_is_resubmitted_to_the_cap_then_an_error(
    tmp_path: Path,
) -> None:
    from aorta.triage.report.reporting import NullMatrixReporter
    from oellm_autoexp.slurm.fake import Timeline

    executor = {"slurm": {"max_resubmits": 1, "poll_seconds": 1}}
    recipe = load_recipe(_recipe_file(tmp_path, executor))
    # Every attempt of every task dies with its node; no task ever writes its trial.
    hooks = _fake_hooks(tmp_path, Timeline(run_s=2, end_state="NODE_FAIL"))
    run_dir, report = run_on_slurm(recipe, tmp_path / "out", reporter=NullMatrixReporter(),
                                   hooks=hooks)  # fmt: skip
    assert report is not None
    assert hooks.client.calls["sbatch"] == 2  # the array, then one resubmission of all four
    for row in report.matrix.rows:
        assert row.stats.error_count == 2 and row.stats.measured_count == 0
    trial = json.loads((run_dir / "cells" / "other" / "trial_1.json").read_text())
    assert trial["outcome"] == "error" and trial["seed"] == 1
    assert "SLURM lost the trial (node_failure, SLURM state NODE_FAIL" in trial["failure"]
    assert "resubmitted 1 time(s), the cap is 1" in trial["failure"]
    state = json.loads((run_dir / "slurm" / "state.json").read_text())
    assert state["finished"] is True


def test_the_matrix_of_an_unfinished_slurm_run_marks_its_cells_unfinished(
    tmp_path: Path,
) -> None:
    from aorta.triage.lifecycle import reanalyse
    from aorta.triage.report.reporting import NullMatrixReporter
    from aorta.triage.slurm.executor import slurm_status
    from aorta.triage.slurm.trials import write_lost_trial
    from oellm_autoexp.slurm.fake import Timeline

    recipe = load_recipe(_recipe_file(tmp_path, {"slurm": {}}))
    hooks = _fake_hooks(tmp_path, Timeline(run_s=None))
    run_dir, report = run_on_slurm(recipe, tmp_path / "out", reporter=NullMatrixReporter(),
                                   hooks=hooks, detach=True)  # fmt: skip
    assert report is None and hooks.client.calls["sbatch"] == 1
    write_lost_trial(recipe, run_dir, recipe.cell("baseline"), 0, "stand-in for a finished trial")
    rows = slurm_status(recipe, run_dir)
    queue = {row.name: (row.pending + row.running, row.done, row.errors) for row in rows}
    assert queue == {"baseline": (1, 1, 1), "other": (2, 0, 0)}
    again = reanalyse(run_dir)
    assert again.in_progress == ("baseline", "other")
    markdown = (run_dir / "matrix.md").read_text()
    assert "**Unfinished**: trials still queued or running on SLURM in cells baseline, other" in (
        markdown
    )
    assert again.matrix.row("other").stats.error == (
        "not finished: its trials are still queued or running on SLURM"
    )
    cells = json.loads((run_dir / "matrix.json").read_text())["cells_in_progress"]
    assert cells == ["baseline", "other"]


def _probe(**_kwargs: Any) -> Any:
    from aorta.instrumentation.environment import collect_env

    return collect_env("trial")  # cheap and real; the scope does not matter here


def test_resume_resubmits_only_the_trials_whose_session_is_gone(tmp_path: Path) -> None:
    from aorta.triage.report.reporting import NullMatrixReporter
    from aorta.triage.slurm.trials import write_lost_trial
    from oellm_autoexp.slurm.fake import Timeline

    recipe = load_recipe(_recipe_file(tmp_path, {"slurm": {}}))
    hooks = _fake_hooks(tmp_path, Timeline(run_s=None))
    quiet = NullMatrixReporter()
    run_dir, _ = run_on_slurm(recipe, tmp_path / "out", reporter=quiet, hooks=hooks, detach=True)
    # Re-attaching to a session that is still there submits nothing new.
    resume_on_slurm(recipe, run_dir, reporter=quiet, hooks=hooks, detach=True)
    assert hooks.client.calls["sbatch"] == 1
    for cell, trial in (("baseline", 0), ("other", 1)):
        write_lost_trial(recipe, run_dir, recipe.cell(cell), trial, "stand-in: on disk")
    for path in (run_dir / "slurm" / "sessions").glob("*.json"):
        path.unlink()  # the session file is lost: SLURM's view of those tasks with it
    resume_on_slurm(recipe, run_dir, reporter=quiet, hooks=hooks, detach=True)
    assert hooks.client.calls["sbatch"] == 2
    second = json.loads((run_dir / "slurm" / "tasks-2.json").read_text())
    assert second == [["other", 0], ["baseline", 1]]  # only the missing trials, round order
    state = json.loads((run_dir / "slurm" / "state.json").read_text())
    assert [s["tasks"] for s in state["submissions"]] == [4, 2]


def test_the_task_runs_its_trial_once_and_honours_the_stop_rule(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from aorta.triage.report.reporting import NullMatrixReporter
    from aorta.triage.slurm import task
    from aorta.triage.slurm.state import read_attempts
    from oellm_autoexp.slurm.fake import Timeline

    path = _recipe_file(tmp_path, {"slurm": {}})
    data = yaml.safe_load(path.read_text())
    data["stop_after"] = {"failures": 1}
    data["cells"][1]["command_args"] = ["--fail"]  # the other cell: every trial fails
    data["workload"] = {
        "command": [sys.executable, "-c", "import sys; print('loss: nan' if sys.argv[1:] else 1)"]
    }
    path.write_text(yaml.safe_dump(data))
    recipe = load_recipe(path)
    hooks = _fake_hooks(tmp_path, Timeline(run_s=None))
    run_dir, _ = run_on_slurm(recipe, tmp_path / "out", reporter=NullMatrixReporter(),
                              hooks=hooks, detach=True)  # fmt: skip
    tasks = json.loads((run_dir / "slurm" / "tasks-1.json").read_text())
    index = {tuple(t): i for i, t in enumerate(tasks)}
    for cell, trial in (("baseline", 0), ("baseline", 0), ("other", 0), ("other", 1)):
        assert task.main([str(run_dir), "1", str(index[cell, trial])]) == 0
        assert capsys.readouterr().out.endswith(task.RECORDED + "\n")
    assert json.loads((run_dir / "cells" / "baseline" / "trial_0.json").read_text())["passed"]
    failed = json.loads((run_dir / "cells" / "other" / "trial_0.json").read_text())
    assert failed["outcome"] == "failed"
    assert not (run_dir / "cells" / "other" / "trial_1.json").exists()  # stop rule met
    notes = [(r["cell"], r["trial"], r["ran"], r["note"]) for r in read_attempts(run_dir)]
    assert notes == [
        ("baseline", 0, True, "running"),
        ("baseline", 0, False, "already recorded"),
        ("other", 0, True, "running"),
        ("other", 1, False, "stop rule met"),
    ]


def _trial_ids(run_dir: Path) -> dict[str, list[int]]:
    return {
        cell.name: sorted(int(p.stem.split("_")[1]) for p in cell.glob("trial_*.json"))
        for cell in sorted((run_dir / "cells").iterdir())
    }


def test_an_adaptive_run_is_submitted_round_by_round_and_ends_with_the_local_trials(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Detached, then resumed after each round: the array tasks are run by hand (the fake
    SLURM runs nothing), so every step of the rounds is seen."""
    from aorta_testing import adaptive_recipe

    from aorta.triage.lifecycle import reanalyse, start
    from aorta.triage.report.reporting import NullMatrixReporter
    from aorta.triage.run.local import LocalExecutor
    from aorta.triage.slurm import task
    from oellm_autoexp.slurm.fake import Timeline

    n = 8
    patterns = {"baseline": "1" * n, "fix": "0" * n, "same": "1" * n}
    path = adaptive_recipe(tmp_path / "r.yaml", patterns, n, executor={"slurm": {}})
    recipe = load_recipe(path)
    quiet = NullMatrixReporter()
    # The oracle: the local executor on the same recipe (same outcomes per seed).
    local = dataclasses.replace(recipe, executor=None)
    here = start(local, tmp_path / "local", executor=LocalExecutor(), reporter=quiet, probe=_probe)
    local_trials = {name: len(ids) for name, ids in _trial_ids(here.run_dir).items()}
    assert local_trials["same"] < local_trials["fix"] < n  # both stop early, `same` first
    hooks = _fake_hooks(tmp_path, Timeline(run_s=None))
    run_dir, _ = run_on_slurm(recipe, tmp_path / "out", reporter=quiet, hooks=hooks, detach=True)
    arrays: list[list[tuple[str, int]]] = []
    while hooks.client.calls["sbatch"] > len(arrays):
        number = len(arrays) + 1
        tasks = [
            (c, t) for c, t in json.loads((run_dir / "slurm" / f"tasks-{number}.json").read_text())
        ]
        arrays.append(tasks)
        # The round is in flight: a resume waits for it, it submits nothing.
        resume_on_slurm(recipe, run_dir, reporter=quiet, hooks=hooks, detach=True)
        assert hooks.client.calls["sbatch"] == number
        if number == local_trials["same"] + 1:  # `same` was decided: not in progress, `fix` is
            assert reanalyse(run_dir).in_progress == ("baseline", "fix")
        for index in range(len(tasks)):
            assert task.main([str(run_dir), str(number), str(index)]) == 0
        capsys.readouterr()
        resume_on_slurm(recipe, run_dir, reporter=quiet, hooks=hooks, detach=True)
    # One array per round: trial k of every cell the rule kept open.
    assert arrays == [
        [(name, k) for name in patterns if k < local_trials[name]]
        for k in range(max(local_trials.values()))
    ]
    report = resume_on_slurm(recipe, run_dir, reporter=quiet, hooks=hooks)
    assert report is not None and not report.in_progress
    assert json.loads((run_dir / "slurm" / "state.json").read_text())["finished"] is True

    assert _trial_ids(run_dir) == _trial_ids(here.run_dir)
    adaptive = json.loads((run_dir / "matrix.json").read_text())["adaptive"]
    assert adaptive == json.loads((here.run_dir / "matrix.json").read_text())["adaptive"]
    assert adaptive["cells"]["same"]["stopped"] == "decided not cured"
    assert adaptive["cells"]["fix"]["stopped"] == "decided cured"
