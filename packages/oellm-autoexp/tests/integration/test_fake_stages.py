"""Multi-stage runs on the scripted fake SLURM (which honours --dependency as SLURM does).

The plan is the shipped example (2 sweep points x train, cooldown); the fake scripts how each
attempt ends. Covered: both stages queued by one submission with the cooldown waiting on
``aftercorr``; a restarted train task re-links its cooldown task; a train that fails for good
cancels its cooldown; ``start: checkpoint`` waits for the file, not for the job.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from oellm_autoexp import api
from oellm_autoexp.monitor.observation import resolve_log_path
from oellm_autoexp.planning import PlanResult
from oellm_autoexp.slurm.client import SubmitRequest
from oellm_autoexp.slurm.fake import FakeClock, FakeSlurmClient, Timeline

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "two_stages.yaml"
RESTART_CRASHES = {"class_name": "AlwaysRestartPolicy", "modes": ["crash"], "max_retries": 2}
MARKER = "oellm-autoexp: completed"


def _plan(
    root: Path,
    *,
    policies: list[Any] | None = None,
    start: str = "completed",
    cancel_if_file: str | None = None,
) -> PlanResult:
    """The example planned under `root` (with restart `policies`, the cooldown's `start`)."""
    config = yaml.safe_load(EXAMPLE.read_text())
    config["project"]["base_output_dir"] = str(root / "out")
    config["restart_policies"] = policies or []
    config["stages"][1]["start"] = start
    if cancel_if_file:
        config["stages"][1]["cancel_if_file"] = cancel_if_file
    path = root / "staged.yaml"
    path.write_text(yaml.safe_dump(config))
    return api.plan(path, test_only="never")


Script = Callable[[SubmitRequest, str, int], Timeline | None]


def _cluster(result: PlanResult, clock: FakeClock, script: Script | None = None) -> FakeSlurmClient:
    """Every attempt runs 10 s and completes (log marker written), unless `script` says else."""
    patterns = {}
    for job in result.plan.jobs:
        assert job.array is not None
        patterns[job.array.array_name] = job.log_path

    def timeline(request: SubmitRequest, jid: str, attempt: int) -> Timeline:
        log = resolve_log_path(patterns[request.job_name], jid, request.job_name)
        scripted = script(request, jid, attempt) if script else None
        if scripted is not None:
            return Timeline(
                run_s=scripted.run_s,
                end_state=scripted.end_state,
                exit_code=scripted.exit_code,
                log_path=log,
            )
        return Timeline(run_s=10, log_path=log, log_lines=[(9.5, f"{MARKER} x")])

    return FakeSlurmClient(clock, timeline)


def _dependencies(fake: FakeSlurmClient) -> list[tuple[str, str | None, list[str]]]:
    """(job name, array spec, --dependency args) of every sbatch, in order."""
    return [
        (r.job_name, r.array, [a for a in r.extra_args if a.startswith("--dependency")])
        for _, r in fake.submissions
    ]


def _ticks(clock: FakeClock, then: Callable[[], None] = lambda: None) -> Callable[[float], None]:
    """The monitor's sleep: 2 fake seconds a poll; a run that never ends fails, never hangs."""
    limit = clock() + 600

    def sleep(_s: float) -> None:
        clock.advance(2)
        assert clock() < limit, "the monitor did not finish within 600 fake seconds"
        then()

    return sleep


def _run(submitted: api.SubmitResult, fake: FakeSlurmClient, clock: FakeClock) -> Any:
    """A fresh monitor reads the session back from disk and drives it to the end."""
    return api.monitor_until_done(
        submitted.store,
        fake,
        session_ids=[submitted.session.session_id],
        sleep=_ticks(clock),
        clock=clock,
    )


def test_one_submission_queues_both_stages_and_slurm_orders_them(tmp_path: Path) -> None:
    result = _plan(tmp_path)
    clock = FakeClock()
    fake = _cluster(result, clock)
    submitted = api.submit(result, fake)  # --no-monitor: one poll
    train, cooldown = fake.submissions[0][0], fake.submissions[1][0]
    assert _dependencies(fake) == [
        ("staged_train_a0", "0-1", []),
        # Task i of the cooldown array waits for task i of the train array.
        ("staged_cooldown_a1", "0-1", [f"--dependency=aftercorr:{train}"]),
    ]
    assert submitted.complete
    _run(submitted, fake, clock)
    session = submitted.store.load(submitted.session.session_id)
    assert {(j.stage.name if j.stage else None, j.state) for j in session.jobs.values()} == {
        ("train", "completed"),
        ("cooldown", "completed"),
    }
    for task in (0, 1):  # each cooldown started when its own train task ended
        first, second = fake.jobs[f"{train}_{task}"], fake.jobs[f"{cooldown}_{task}"]
        assert second.started_at() == first.ended_at()
    rows = api.status(submitted.store)
    assert sorted((r.name, r.stage) for r in rows) == [
        ("lr0.1_cooldown", "cooldown"),
        ("lr0.1_train", "train"),
        ("lr0.2_cooldown", "cooldown"),
        ("lr0.2_train", "train"),
    ]


@pytest.mark.parametrize("monitor_restarts_every_poll", [False, True])
def test_a_restarted_train_task_relinks_its_cooldown_to_the_new_job(
    tmp_path: Path, monitor_restarts_every_poll: bool
) -> None:
    result = _plan(tmp_path, policies=[RESTART_CRASHES])
    clock = FakeClock()

    def train_0_crashes_once(request: SubmitRequest, jid: str, attempt: int) -> Timeline | None:
        if request.job_name == "staged_train_a0" and jid.endswith("_0") and attempt == 0:
            return Timeline(run_s=4, end_state="FAILED", exit_code=1)
        return None

    fake = _cluster(result, clock, train_0_crashes_once)
    submitted = api.submit(result, fake)
    train, cooldown = fake.submissions[0][0], fake.submissions[1][0]
    if monitor_restarts_every_poll:  # each poll a new monitor process, state only from disk
        tick = _ticks(clock)
        while submitted.store.load(submitted.session.session_id).active:
            api.monitor_once(submitted.store, fake, clock=clock)
            tick(0)
    else:
        _run(submitted, fake, clock)
    restart_train, resubmitted = fake.submissions[2][0], fake.submissions[3][0]
    assert _dependencies(fake) == [
        ("staged_train_a0", "0-1", []),
        ("staged_cooldown_a1", "0-1", [f"--dependency=aftercorr:{train}"]),
        ("staged_train_a0", "0", []),  # the restart of train task 0 (new SLURM id)
        # The cooldown task that waited for the crashed attempt, resubmitted for the restart.
        ("staged_cooldown_a1", "0", [f"--dependency=aftercorr:{restart_train}"]),
    ]
    # The stale cooldown task was cancelled before it ever started; task 1 was left alone.
    assert fake.jobs[f"{cooldown}_0"].cancelled_at is not None
    assert fake.jobs[f"{cooldown}_0"].started_at() is None
    assert fake.jobs[f"{cooldown}_1"].cancelled_at is None
    session = submitted.store.load(submitted.session.session_id)
    assert {j.state for j in session.jobs.values()} == {"completed"}
    cool = next(j for j in session.jobs.values() if j.name == "lr0.1_cooldown")
    # Held, not failed: its only attempt is the one that ran; no restart counted.
    assert [a.job_id for a in cool.attempts] == [f"{resubmitted}_0"]
    assert cool.restarts == {}
    assert any(t["detail"].startswith("held:") for t in cool.transitions)
    ran_after = fake.jobs[f"{resubmitted}_0"].started_at()
    assert ran_after == fake.jobs[f"{restart_train}_0"].ended_at()


def test_a_train_that_fails_for_good_cancels_its_cooldown(tmp_path: Path) -> None:
    result = _plan(tmp_path)  # no restart policy: a crash is final
    clock = FakeClock()

    def train_1_crashes(request: SubmitRequest, jid: str, _attempt: int) -> Timeline | None:
        if request.job_name == "staged_train_a0" and jid.endswith("_1"):
            return Timeline(run_s=4, end_state="FAILED", exit_code=3)
        return None

    fake = _cluster(result, clock, train_1_crashes)
    submitted = api.submit(result, fake, monitor=True, sleep=_ticks(clock))
    cooldown = fake.submissions[1][0]
    assert submitted.complete  # the cancelled cooldown was submitted too: nothing unresolved
    assert api.exit_code([submitted.store.load(submitted.session.session_id)]) == 1
    assert fake.jobs[f"{cooldown}_1"].cancelled_at is not None
    session = submitted.store.load(submitted.session.session_id)
    states = {
        j.name: (j.state, j.outcome.error_type if j.outcome else None)
        for j in session.jobs.values()
    }
    assert states["lr0.2_train"][0] == "failed"
    assert states["lr0.2_cooldown"] == ("failed", "stage_condition")
    assert states["lr0.1_cooldown"] == ("completed", None)
    cool = next(j for j in session.jobs.values() if j.name == "lr0.2_cooldown")
    assert cool.outcome is not None and cool.outcome.decision is not None
    assert cool.outcome.decision.startswith("not started: stage job lr0.2_train failed")
    # It was queued, then cancelled before it ran: one attempt, never a restart.
    assert [(a.job_id, a.slurm_state) for a in cool.attempts] == [(f"{cooldown}_1", "CANCELLED")]


def test_start_on_checkpoint_submits_when_the_file_appears_not_when_the_job_ends(
    tmp_path: Path,
) -> None:
    result = _plan(tmp_path, start="checkpoint")
    clock = FakeClock()
    t0 = clock()

    def train_runs_long(request: SubmitRequest, _jid: str, _attempt: int) -> Timeline | None:
        if request.job_name == "staged_train_a0":
            return Timeline(run_s=60, end_state="COMPLETED")
        return None

    fake = _cluster(result, clock, train_runs_long)
    submitted = api.submit(result, fake)
    assert _dependencies(fake) == [("staged_train_a0", "0-1", [])]  # the cooldown waits
    checkpoints = [
        Path(j.stage.start_file) for j in result.plan.jobs if j.stage and j.stage.start_file
    ]
    assert len(checkpoints) == 2

    def write_checkpoint() -> None:
        if clock() - t0 >= 20:  # train task 0 writes its checkpoint 20 s in; task 1 never
            checkpoints[0].parent.mkdir(parents=True, exist_ok=True)
            checkpoints[0].write_text("step 100\n")

    api.monitor_until_done(
        submitted.store, fake, sleep=_ticks(clock, write_checkpoint), clock=clock
    )
    cooldown_calls = [(t, r) for t, r in fake.submissions if r.job_name == "staged_cooldown_a1"]
    assert [r.array for _, r in cooldown_calls] == ["0"]  # no dependency: the file was the gate
    assert not [a for _, r in cooldown_calls for a in r.extra_args if "dependency" in a]
    started = fake.jobs[f"{cooldown_calls[0][0]}_0"].submitted_at
    train_end = fake.jobs[f"{fake.submissions[0][0]}_0"].ended_at()
    assert t0 + 20 <= started < (train_end or 0)  # while train still ran
    session = submitted.store.load(submitted.session.session_id)
    cool_1 = next(j for j in session.jobs.values() if j.name == "lr0.2_cooldown")
    assert cool_1.state == "failed"
    assert cool_1.outcome is not None and "ended without writing" in str(cool_1.outcome.decision)


@pytest.mark.parametrize("subset", ["2-3"])
def test_a_subset_of_only_later_stages_starts_them_without_a_dependency(
    tmp_path: Path, subset: str
) -> None:
    result = _plan(tmp_path)
    fake = _cluster(result, FakeClock())
    api.submit(result, fake, array_subset=subset)
    assert _dependencies(fake) == [("staged_cooldown_a1", "0-1", [])]


def test_a_cancel_file_cancels_the_queued_cooldown_of_that_point_only(tmp_path: Path) -> None:
    result = _plan(tmp_path, cancel_if_file="{stages.train.output_dir}/DIVERGED")
    files = {j.name: j.stage.cancel_file for j in result.plan.jobs if j.stage}
    out = tmp_path / "out" / "jobs"
    assert files == {
        "lr0.1_train": None,
        "lr0.2_train": None,
        "lr0.1_cooldown": str(out / "lr0.1_train" / "DIVERGED"),
        "lr0.2_cooldown": str(out / "lr0.2_train" / "DIVERGED"),
    }
    clock = FakeClock()
    t0 = clock()
    fake = _cluster(result, clock)
    submitted = api.submit(result, fake)
    cooldown = fake.submissions[1][0]

    def diverge() -> None:  # train of lr 0.1 reports divergence 4 s in (it runs 10 s)
        if clock() - t0 >= 4:
            (out / "lr0.1_train").mkdir(parents=True, exist_ok=True)
            (out / "lr0.1_train" / "DIVERGED").write_text("loss nan\n")

    api.monitor_until_done(submitted.store, fake, sleep=_ticks(clock, diverge), clock=clock)
    held = fake.jobs[f"{cooldown}_0"]
    # Cancelled while SLURM still held it for its train task (which ends at t0 + 10).
    assert held.cancelled_at is not None and held.cancelled_at < t0 + 10
    session = submitted.store.load(submitted.session.session_id)
    by_name = {j.name: j for j in session.jobs.values()}
    cool = by_name["lr0.1_cooldown"]
    assert cool.state == "failed" and cool.outcome is not None
    assert cool.outcome.decision == f"cancelled: {out / 'lr0.1_train' / 'DIVERGED'} exists"
    assert [a.slurm_state for a in cool.attempts] == ["CANCELLED"]
    assert by_name["lr0.2_cooldown"].state == "completed"
    assert by_name["lr0.1_train"].state == "completed"  # the condition is the cooldown's only


def test_a_chained_staged_plan_waits_for_the_previous_link_and_the_earlier_stage(
    tmp_path: Path,
) -> None:
    result = _plan(tmp_path)
    fake = _cluster(result, FakeClock())
    api.submit(result, fake, chain=2)
    train_1, cool_1, train_2, _cool_2 = (base for base, _ in fake.submissions)
    assert _dependencies(fake) == [
        ("staged_train_a0", "0-1", []),
        ("staged_cooldown_a1", "0-1", [f"--dependency=aftercorr:{train_1}"]),
        ("staged_train_a0", "0-1", [f"--dependency=afterany:{train_1}"]),
        # Both at once (comma: all must hold): its own job of link 1, and link 2's train task.
        ("staged_cooldown_a1", "0-1", [f"--dependency=afterany:{cool_1},aftercorr:{train_2}"]),
    ]
