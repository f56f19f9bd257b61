"""B1 `run_trials`: the contract, tested through the really installed `toy` plugin workload."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from aorta.errors import (
    AortaUsageError,
    EnvironmentUnavailableError,
    OutputExistsError,
    UnknownEnvironmentError,
    UnknownMitigationError,
    UnknownWorkloadError,
)
from aorta.registry import Environment, Mitigation
from aorta.runner import MitigationConflictError, RunRequest, TrialResult, merge_env, run_trials
from aorta.runner.trials import open_trials

pytestmark = pytest.mark.usefixtures("plugin")


def _request(tmp_path: Path, **overrides: object) -> RunRequest:
    fields: dict[str, object] = {
        "workload": "toy",
        "output_dir": tmp_path / "out",
        "trials": 2,
        "steps": 5,
    }
    fields.update(overrides)
    return RunRequest(**fields)  # type: ignore[arg-type]


def test_each_trial_writes_its_json_and_returns_the_same_record(tmp_path: Path) -> None:
    results = run_trials(_request(tmp_path, trials=3, seed=10))
    assert [r.trial_id for r in results] == [0, 1, 2]
    assert [r.seed for r in results] == [10, 11, 12]
    for result in results:
        path = tmp_path / "out" / f"trial_{result.trial_id}.json"
        on_disk = json.loads(path.read_text())
        assert TrialResult.from_dict(on_disk) == result
        assert on_disk["execution"] == "in_process"
        assert on_disk["env_snapshot"]["scope"] == "trial"
        assert isinstance(on_disk["wall_clock_sec"], float)
    # Nothing but the trial files: no temp files left behind by the atomic writer.
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "trial_0.json",
        "trial_1.json",
        "trial_2.json",
    ]


def test_mitigation_env_applies_inside_the_trial_and_is_restored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AORTA_TOY_FIX", raising=False)
    monkeypatch.delenv("AORTA_SEED", raising=False)
    monkeypatch.setenv("AORTA_TOY_EXTRA", "before")
    results = run_trials(
        _request(tmp_path, mitigations=("plugin_fix",), extra_env={"AORTA_TOY_EXTRA": "during"})
    )
    for result in results:
        assert result.observed["AORTA_TOY_FIX"] == "1"
        assert result.observed["AORTA_TOY_EXTRA"] == "during"
        # The trial's seed is in its environment too, recorded with the rest.
        seed = str(result.seed)
        assert result.env_applied == {
            "AORTA_TOY_FIX": "1",
            "AORTA_TOY_EXTRA": "during",
            "AORTA_SEED": seed,
            "PYTHONHASHSEED": seed,
        }
        # The per-trial snapshot is taken with the trial's variables applied.
        assert result.env_snapshot["env_vars"]["AORTA_TOY_FIX"] == "1"
        assert result.env_snapshot["env_vars"]["AORTA_SEED"] == seed
    assert [r.seed for r in results] == [0, 1]
    assert "AORTA_TOY_FIX" not in os.environ
    assert "AORTA_SEED" not in os.environ
    assert os.environ["AORTA_TOY_EXTRA"] == "before"


def test_pinned_mitigations_are_used_instead_of_the_registry(tmp_path: Path) -> None:
    # A re-run or resumed triage run applies the bundles it recorded, not today's registry.
    pinned = Mitigation(name="plugin_fix", env={"AORTA_TOY_FIX": "as-recorded"}, description="")
    (result,) = run_trials(
        _request(tmp_path, trials=1, mitigations=("plugin_fix",), pinned_mitigations=(pinned,))
    )
    assert result.observed["AORTA_TOY_FIX"] == "as-recorded"
    # Process-scoped: the child process gets the pinned bundle too.
    scoped = Mitigation(
        name="plugin_process", env={"AORTA_TOY_PROCESS_FLAG": "pinned"}, description="",
        process_scoped=True,
    )  # fmt: skip
    (child,) = run_trials(
        _request(
            tmp_path, output_dir=tmp_path / "child", trials=1,
            mitigations=("plugin_process",), pinned_mitigations=(scoped,),
        )
    )  # fmt: skip
    assert child.execution == "child_process"
    assert child.observed["AORTA_TOY_PROCESS_FLAG"] == "pinned"
    with pytest.raises(AortaUsageError, match="do not match mitigations"):
        _request(tmp_path, mitigations=("none",), pinned_mitigations=(pinned,))


def test_extra_env_overrides_mitigation_values(tmp_path: Path) -> None:
    (result,) = run_trials(
        _request(tmp_path, trials=1, mitigations=("plugin_fix",), extra_env={"AORTA_TOY_FIX": ""})
    )
    assert result.env_applied["AORTA_TOY_FIX"] == ""
    assert result.observed["AORTA_TOY_FIX"] == ""


def test_failures_are_results_and_counted_per_trial(tmp_path: Path) -> None:
    # Odd seeds diverge at step 2: with 4 trials from seed 0, trials 1 and 3 fail.
    results = run_trials(_request(tmp_path, trials=4, extra_env={"AORTA_TOY_FAIL_AT": "2"}))
    assert [r.passed for r in results] == [True, False, True, False]
    failed = results[1]
    assert failed.failure == "non-finite loss at step 2"
    assert failed.failed_at_step == 2
    assert failed.losses == [pytest.approx(1.001), pytest.approx(0.5005), None]  # seed 1
    assert len(results[0].step_times_ms) == 5


def test_workload_exception_before_the_first_step_is_an_error_and_env_is_restored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AORTA_TOY_FIX", raising=False)
    results = run_trials(
        _request(tmp_path, mitigations=("plugin_fix",), extra_env={"AORTA_TOY_RAISE": "1"})
    )
    assert all(not r.passed and r.outcome == "error" for r in results)
    assert results[0].failure == (
        "error before the first completed step: RuntimeError: toy workload asked to raise"
    )
    assert results[0].traceback is not None
    assert "Traceback (most recent call last)" in results[0].traceback
    assert "AORTA_TOY_FIX" not in os.environ
    assert "AORTA_TOY_RAISE" not in os.environ
    saved = json.loads((tmp_path / "out" / "trial_0.json").read_text())
    assert saved["passed"] is False and "RuntimeError" in saved["traceback"]
    assert saved["outcome"] == "error"


def test_exception_after_a_completed_step_is_a_failure(tmp_path: Path) -> None:
    (result,) = run_trials(_request(tmp_path, trials=1, extra_env={"AORTA_TOY_RAISE_AT": "1"}))
    assert result.outcome == "failed" and not result.passed
    assert (
        result.failure
        == "RuntimeError: toy workload raised after step 1 (after 2 completed step(s))"
    )


def test_missing_module_is_an_error_that_says_how_to_install_it(tmp_path: Path) -> None:
    # The module name is what matters (torch -> the [torch] extra); a name that exists nowhere
    # stands in for torch on a machine that has it.
    (result,) = run_trials(
        _request(tmp_path, trials=1, extra_env={"AORTA_TOY_IMPORT": "aorta_no_such_module"})
    )
    assert result.outcome == "error"
    assert result.failure == (
        "workload import error: ModuleNotFoundError: No module named 'aorta_no_such_module'"
    )


def test_workload_declares_failure_or_error_through_the_contract(tmp_path: Path) -> None:
    (error,) = run_trials(_request(tmp_path, trials=1, extra_env={"AORTA_TOY_DECLARE": "error"}))
    assert (error.outcome, error.failure) == ("error", "TrialError: toy: no device to measure on")
    (failed,) = run_trials(
        _request(
            tmp_path,
            output_dir=tmp_path / "f",
            trials=1,
            extra_env={"AORTA_TOY_DECLARE": "failure"},
        )
    )
    assert failed.outcome == "failed"
    assert failed.failure == "TrialFailure: toy: the checked invariant broke"
    results = run_trials(
        _request(
            tmp_path, output_dir=tmp_path / "e", trials=3, extra_env={"AORTA_TOY_ERROR_SEEDS": "1"}
        )
    )
    assert [r.outcome for r in results] == ["passed", "error", "passed"]
    assert results[1].failure == "toy: setup"


def test_interrupt_keeps_finished_trials_and_restores_env(tmp_path: Path) -> None:
    request = _request(tmp_path, trials=4, extra_env={"AORTA_TOY_INTERRUPT_AT_TRIAL": "2"})
    with pytest.raises(KeyboardInterrupt):
        run_trials(request)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["trial_0.json", "trial_1.json"]
    assert "AORTA_TOY_INTERRUPT_AT_TRIAL" not in os.environ


def test_existing_trial_files_are_never_overwritten(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "trial_1.json").write_text("earlier result")
    with pytest.raises(OutputExistsError, match="never overwritten"):
        run_trials(_request(tmp_path))
    assert (out / "trial_1.json").read_text() == "earlier result"
    assert not (out / "trial_0.json").exists()


def test_bad_names_raise_before_anything_runs(tmp_path: Path) -> None:
    with pytest.raises(UnknownWorkloadError, match="did you mean 'toy'"):
        run_trials(_request(tmp_path, workload="toyy"))
    with pytest.raises(UnknownMitigationError, match="did you mean 'plugin_fix'"):
        run_trials(_request(tmp_path, mitigations=("none", "plugin_fixx")))
    with pytest.raises(UnknownEnvironmentError):
        run_trials(_request(tmp_path, environment="nowhere"))
    assert not (tmp_path / "out").exists()


def test_conflicting_mitigations_are_rejected() -> None:
    a = Mitigation(name="a", env={"X": "1", "Y": "same"}, description="")
    b = Mitigation(name="b", env={"X": "2", "Y": "same"}, description="")
    with pytest.raises(MitigationConflictError, match=r"'a' and 'b' both set X \('1' vs '2'\)"):
        merge_env([a, b], {})
    # Same value twice is a harmless stack, and extra_env wins over both.
    assert merge_env([a, Mitigation(name="c", env={"Y": "same"}, description="")], {"X": "9"}) == {
        "X": "9",
        "Y": "same",
    }


@pytest.mark.docker
def test_docker_environment_without_engine_is_a_typed_cell_level_error(tmp_path: Path) -> None:
    if shutil.which("docker") is None:
        pytest.skip("docker client not installed")
    if subprocess.run(["docker", "version"], capture_output=True, check=False).returncode == 0:
        pytest.skip("a docker engine answers here; this test is about a missing engine")
    with pytest.raises(EnvironmentUnavailableError, match="no docker engine answered"):
        run_trials(_request(tmp_path, environment="plugin_docker"))
    inline = Environment(name="_inline_abc", kind="docker", image="x:y", description="")
    with pytest.raises(EnvironmentUnavailableError, match=r"'_inline_abc' \(x:y\)"):
        run_trials(_request(tmp_path, environment=inline))
    assert not (tmp_path / "out" / "trial_0.json").exists()


def test_venv_environment_runs_trials_with_its_interpreter(tmp_path: Path) -> None:
    venv = Environment(name="same-venv", kind="venv", python=sys.executable, description="")
    results = run_trials(_request(tmp_path, environment=venv, trials=1))
    assert results[0].passed and results[0].execution == "child_process"
    assert results[0].observed["pid"] != os.getpid()
    missing = Environment(name="gone", kind="venv", python=str(tmp_path / "nope"), description="")
    with pytest.raises(EnvironmentUnavailableError, match="is not an executable interpreter"):
        run_trials(_request(tmp_path, environment=missing, output_dir=tmp_path / "other"))


def test_process_scoped_mitigation_runs_each_trial_in_a_fresh_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AORTA_TOY_PROCESS_FLAG", raising=False)
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "3")
    results = run_trials(_request(tmp_path, mitigations=("plugin_process",), trials=2))
    pids = {r.observed["pid"] for r in results}
    assert os.getpid() not in pids and len(pids) == 2
    for result in results:
        assert result.execution == "child_process"
        # The child records where it ran, from its own environment.
        assert result.host is not None and result.host.node == socket.gethostname()
        assert result.host.slurm_array_task_id == "3"
        assert result.observed["AORTA_TOY_PROCESS_FLAG"] == "on"
        assert result.passed
    assert "AORTA_TOY_PROCESS_FLAG" not in os.environ
    saved = TrialResult.from_dict(json.loads((tmp_path / "out" / "trial_1.json").read_text()))
    assert saved == results[1]


def test_child_that_dies_is_recorded_as_an_error_with_its_log(tmp_path: Path) -> None:
    results = run_trials(
        _request(tmp_path, workload="crash", mitigations=("plugin_process",), trials=1)
    )
    (result,) = results
    assert not result.passed and result.outcome == "error"
    assert result.failure is not None and "exited with code 3" in result.failure
    assert result.traceback is not None and "exiting hard" in result.traceback
    saved = json.loads((tmp_path / "out" / "trial_0.json").read_text())
    assert saved["passed"] is False and saved["outcome"] == "error"


def test_only_rank_zero_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    results = run_trials(_request(tmp_path))
    assert len(results) == 2 and all(r.rank == 1 and r.world_size == 2 for r in results)
    assert not (tmp_path / "out").exists()


def test_process_scoped_mitigation_under_torchrun_needs_the_launchers_value(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Under torchrun a trial cannot get a fresh process: the variable must already be in the
    # launcher's environment, or the request is refused before any trial (the cell errors).
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.delenv("AORTA_TOY_PROCESS_FLAG", raising=False)
    request = _request(tmp_path, mitigations=("plugin_process",), trials=1)
    with pytest.raises(
        EnvironmentUnavailableError,
        match=r"process-scoped mitigation plugin_process must be set by the launcher under "
        r"torchrun \(AORTA_TOY_PROCESS_FLAG=on not in the launcher's environment\)",
    ):
        run_trials(request)
    assert not (tmp_path / "out" / "trial_0.json").exists()
    monkeypatch.setenv("AORTA_TOY_PROCESS_FLAG", "off")  # another value is no better
    with pytest.raises(EnvironmentUnavailableError, match="must be set by the launcher"):
        run_trials(request)

    monkeypatch.setenv("AORTA_TOY_PROCESS_FLAG", "on")
    (result,) = run_trials(request)
    assert result.execution == "in_process" and result.observed["pid"] == os.getpid()
    assert result.launcher_env == {"AORTA_TOY_PROCESS_FLAG": "on"}
    saved = json.loads((tmp_path / "out" / "trial_0.json").read_text())
    assert saved["launcher_env"] == {"AORTA_TOY_PROCESS_FLAG": "on"}


def test_fresh_process_request_runs_every_trial_in_a_child(tmp_path: Path) -> None:
    # Nothing in the request needs a child; asking for one gives every trial its own process
    # (a triage matrix does so for all cells when one cell needs it, to compare like with like).
    results = run_trials(_request(tmp_path, trials=2, fresh_process=True))
    assert [r.execution for r in results] == ["child_process", "child_process"]
    assert os.getpid() not in {r.observed["pid"] for r in results}


def test_open_trials_checks_once_then_runs_trials_in_any_order(tmp_path: Path) -> None:
    session = open_trials(_request(tmp_path, trials=3))
    assert session.execution == "in_process"
    assert [session.run(i).trial_id for i in (2, 0)] == [2, 0]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["trial_0.json", "trial_2.json"]
    with pytest.raises(OutputExistsError):  # the files it wrote are results: never overwritten
        open_trials(_request(tmp_path, trials=3))
