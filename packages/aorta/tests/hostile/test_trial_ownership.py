"""A resume never races a trial that is still running (issue 18 §6): owner records.

`aorta triage run --resume` judges every `trial_<id>.owner` an earlier attempt left behind: a
live process on this host (the same process, not a reused PID), or any process carrying the
trial's token in its environment, stops the resume with one line naming the trial and PID; a
record from another host cannot be judged here; a dead owner's trial runs again.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from aorta.errors import AortaUsageError
from aorta.runner.ownership import OWNER_ENV, TrialOwner, owner_path, this_process
from aorta.triage.lifecycle import resume_run, run_recipe
from aorta.triage.recipe import recipe_from_flags
from aorta.triage.run.inflight import TrialStillRunningError
from aorta.triage.run.rundir import run_dir_lock

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="process start times come from /proc"
)

AORTA = str(Path(sys.executable).with_name("aorta"))
BEHAVE = str(Path(__file__).parents[1] / "runner" / "command" / "scripts" / "behave.py")
TOKEN = "0123456789abcdef0123456789abcdef"


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1][0]
    except (OSError, IndexError):
        return True
    return state in "ZX"


def _wait_gone(pid: int, seconds: float = 10) -> None:
    deadline = time.monotonic() + seconds
    while not _gone(pid):
        assert time.monotonic() < deadline, f"process {pid} did not end"
        time.sleep(0.02)


@pytest.fixture
def run_dir(plugin: Path, tmp_path: Path) -> Path:
    """A finished toy run whose trial 1 has no result (as if it were in flight)."""
    recipe = recipe_from_flags(
        workload="toy", mitigation_axis=["none"], environment_axis=["local"], trials=2, steps=1
    )
    run = run_recipe(recipe, tmp_path).run_dir
    (run / "cells" / "none-local" / "trial_1.json").unlink()
    return run


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    """A live process that carries the test token in its environment."""
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"],
        env={**os.environ, OWNER_ENV: TOKEN},
    )
    yield proc
    proc.kill()
    proc.wait()


def _plant(run_dir: Path, trial_id: int = 1, **changes: object) -> Path:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    driver = this_process("driver", dead.pid)  # its start time, then it ends
    dead.wait()
    record = TrialOwner(trial_id, os.uname().nodename, None, TOKEN, (driver,)).to_dict()
    record.update(changes)
    path = owner_path(run_dir / "cells" / "none-local", trial_id)
    path.write_text(json.dumps(record))
    return path


def test_a_trial_whose_process_lives_stops_the_resume_naming_trial_and_pid(
    run_dir: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    trial = this_process("trial", sleeper.pid)
    path = _plant(
        run_dir, processes=[{"role": "trial", "pid": trial.pid, "start_ticks": trial.start_ticks}]
    )
    with pytest.raises(TrialStillRunningError) as caught:
        resume_run(run_dir)
    message = str(caught.value)
    assert message.startswith(
        f"cell 'none-local', trial 1 is still running in process {sleeper.pid} on this host"
    )
    assert "\n" not in message and f"kill {sleeper.pid}" in message
    assert path.exists() and not (path.parent / "trial_1.json").exists()  # nothing ran
    assert not (run_dir / "previous").exists()  # the matrix was not touched either


def test_a_live_holder_of_the_run_directory_is_named(run_dir: Path) -> None:
    with run_dir_lock(run_dir), pytest.raises(AortaUsageError) as caught:
        resume_run(run_dir)
    assert str(caught.value) == (
        f"{run_dir}: another aorta triage process (PID {os.getpid()}) is working in this run"
        " directory"
    )
    assert not (run_dir / ".triage.lock").exists()  # removed by the holder when done


def test_a_worker_that_left_the_trial_is_found_by_its_token(
    run_dir: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    _plant(run_dir)  # its driver and trial process are dead; the sleeper carries the token
    with pytest.raises(TrialStillRunningError, match=f"in process {sleeper.pid} on this host"):
        resume_run(run_dir)


def test_a_reused_pid_is_not_the_trial_and_the_trial_runs_again(run_dir: Path) -> None:
    # This very process has the recorded PID, but it started at another time: not the trial.
    me = this_process("trial")
    assert me.start_ticks is not None
    path = _plant(
        run_dir,
        processes=[{"role": "trial", "pid": me.pid, "start_ticks": me.start_ticks - 1}],
    )
    report = resume_run(run_dir)
    assert report.matrix.row("none-local").stats.trials_run == 2
    assert json.loads((path.parent / "trial_1.json").read_text())["seed"] == 1
    assert list(path.parent.glob("*.owner")) == []


def test_a_record_from_another_host_cannot_be_judged_here(run_dir: Path) -> None:
    path = _plant(run_dir, host="gpu-node-17")
    with pytest.raises(TrialStillRunningError) as caught:
        resume_run(run_dir)
    message = str(caught.value)
    assert "trial 1 was started on host 'gpu-node-17'" in message
    assert "cannot tell whether it still runs" in message and f"delete {path}" in message


def test_a_record_of_another_boot_is_dead(run_dir: Path) -> None:
    me = this_process("trial")  # alive, same start ticks: only the boot id differs
    _plant(
        run_dir,
        boot_id="not-this-boot",
        processes=[{"role": "trial", "pid": me.pid, "start_ticks": me.start_ticks}],
    )
    assert resume_run(run_dir).matrix.row("none-local").stats.trials_run == 2


def test_a_leftover_record_beside_a_finished_trial_is_removed(run_dir: Path) -> None:
    path = _plant(run_dir, trial_id=0, host="gpu-node-17")  # would stop the resume otherwise
    mtime = (path.parent / "trial_0.json").stat().st_mtime_ns
    resume_run(run_dir)
    assert not path.exists()
    assert (path.parent / "trial_0.json").stat().st_mtime_ns == mtime  # not run again


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("{not json", "not JSON"),
        (json.dumps({"trial_id": 1, "host": "h", "token": "x", "processes": []}), "token"),
        (None, "not a regular file"),
    ],
)
def test_a_record_aorta_did_not_write_is_one_line(
    run_dir: Path, content: str | None, reason: str
) -> None:
    path = owner_path(run_dir / "cells" / "none-local", 1)
    if content is None:
        os.mkfifo(path)  # would block a plain open() forever
    else:
        path.write_text(content)
    with pytest.raises(AortaUsageError) as caught:
        resume_run(run_dir)
    message = str(caught.value)
    assert message.startswith(f"{path}: not a trial owner record aorta wrote: ")
    assert reason in message and "\n" not in message


DETACH = """\
import os, subprocess, sys, time
marker, pidfile, steps = sys.argv[1:4]
if os.path.exists(marker):  # first attempt: leave a worker behind in a session of its own
    os.unlink(marker)
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"],
                              start_new_session=True)
    open(pidfile + ".tmp", "w").write(str(worker.pid))
    os.rename(pidfile + ".tmp", pidfile)
    time.sleep(120)
os.execv(sys.executable, [sys.executable, sys.argv[4], "steps", steps])
"""


@pytest.mark.slow
def test_resume_after_sigkill_reports_a_surviving_worker_then_reruns_once_it_is_gone(
    tmp_path: Path,
) -> None:
    script, marker, pidfile = tmp_path / "detach.py", tmp_path / "marker", tmp_path / "worker.pid"
    script.write_text(DETACH)
    marker.touch()
    out = tmp_path / "out"
    driver = subprocess.Popen(
        [AORTA, "triage", "run", "--mode", "matrix", "--mitigation-axis", "none",
         "--environment-axis", "local", "--trials", "2", "--steps", "3", "--step-time", "jsonl",
         "--progress", "plain", "--output-dir", str(out), "--",
         sys.executable, str(script), str(marker), str(pidfile), "{steps}", BEHAVE],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    worker = None
    try:
        deadline = time.monotonic() + 60
        while not pidfile.exists():
            assert time.monotonic() < deadline and driver.poll() is None, "no worker started"
            time.sleep(0.05)
        worker = int(pidfile.read_text())
        (record,) = out.glob("*/*/*/cells/none-local/trial_0.owner")
        owner = TrialOwner.from_dict(json.loads(record.read_text()))
        (main,) = [p.pid for p in owner.processes if p.role == "trial"]
        run_dir = record.parents[2]
        resume = [AORTA, "triage", "run", "--resume", str(run_dir), "--trust-environments"]

        # The driver is alive: it holds the run directory, and the line names it and its trial.
        done = subprocess.run(resume, capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 2, done.stdout + done.stderr
        assert done.stderr.splitlines()[-1] == (
            f"aorta: error: {run_dir}: another aorta triage process (PID {driver.pid}) is working"
            " in this run directory, running cell 'none-local', trial 0"
        )

        driver.send_signal(signal.SIGKILL)
        driver.wait()
        _wait_gone(main)  # PR_SET_PDEATHSIG took the command's main process along

        # The driver is gone, its worker is not: still refused, naming the worker.
        done = subprocess.run(resume, capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 2, done.stdout + done.stderr
        # One error line: the run is this user's own, its recipe unchanged (signed at start),
        # so no trust notice precedes it.
        (error,) = done.stderr.splitlines()
        assert error.startswith(
            f"aorta: error: cell 'none-local', trial 0 is still running in process {worker} "
        )
        assert record.exists() and not (record.parent / "trial_0.json").exists()

        os.kill(worker, signal.SIGKILL)
        _wait_gone(worker)
        done = subprocess.run(resume, capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 0, done.stdout + done.stderr
        trials = [json.loads((record.parent / f"trial_{i}.json").read_text()) for i in (0, 1)]
        assert [t["outcome"] for t in trials] == ["passed", "passed"]
        assert list(record.parent.glob("*.owner")) == []
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
        if worker is not None and not _gone(worker):
            os.kill(worker, signal.SIGKILL)
