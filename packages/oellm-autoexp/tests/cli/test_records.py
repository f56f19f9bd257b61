"""Records stay true: cleanup, status against SLURM, a second submit of an active plan, one-line
refusals, config values printed as data, and what `plan` says when no controller answers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from oellm_autoexp.cli import main
from oellm_autoexp.cli import monitor as cli_monitor
from oellm_autoexp.monitor import MonitorController
from oellm_autoexp.monitor.observation import resolve_log_path
from oellm_autoexp.persistence import SessionStore
from oellm_autoexp.slurm.fake import FakeClock, FakeSlurmClient, Timeline

EXE = Path(sys.executable).with_name("oellm-autoexp")
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "hello_sweep.yaml"


def _rows(out: str) -> list[list[str]]:
    return [[cell.strip() for cell in line.split("│")] for line in out.splitlines()]


def _forever(clock: FakeClock, session: Any, **timeline: Any) -> FakeSlurmClient:
    job = next(iter(session.jobs.values()))
    return FakeSlurmClient(
        clock,
        lambda _r, jid, _n: Timeline(
            log_path=resolve_log_path(job.log_path, jid, job.slurm_name),
            **{"run_s": None, **timeline},
        ),
    )


def test_cleanup_keeps_the_slurm_id_and_records_the_cancelled_attempt(
    tmp_path: Path, make_session: Any, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    session, store = make_session(tmp_path, jobs=1, array=False)
    clock = FakeClock()
    fake = _forever(clock, session)
    MonitorController(fake, store, [session], clock=clock).poll_once()
    assert store.load(session.session_id).jobs["k0"].slurm_state == "RUNNING"
    monkeypatch.setattr(cli_monitor, "_client", lambda: fake)
    state = str(store.state_dir)
    assert main(["cleanup", "--state-dir", state, "--yes", "--no-archive"]) == 0
    assert fake.jobs["1000"].info(clock()).state == "CANCELLED"
    job = store.load(session.session_id).jobs["k0"]
    (attempt,) = job.attempts
    assert (attempt.job_id, attempt.slurm_state, attempt.metadata["error_type"]) == (
        "1000",
        "CANCELLED",
        "cancelled",
    )
    assert job.transitions[-1]["detail"] == "cancelled by cleanup"
    capsys.readouterr()
    assert main(["status", "--state-dir", state, "--offline"]) == 0
    row = [session.session_id, "job0", "1000", "failed", "CANCELLED", "0", "crash/cancelled"]
    assert row in _rows(capsys.readouterr().out)


def test_status_asks_slurm_once_so_a_job_cancelled_as_stalled_shows_cancelled(
    tmp_path: Path, make_session: Any, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    session, store = make_session(tmp_path, jobs=2, monitor={"inactivity_threshold_seconds": 30.0})
    clock = FakeClock()
    job0 = session.jobs["k0"]

    def timeline(_r: Any, jid: str, _n: int) -> Timeline:
        log = resolve_log_path(job0.log_path, jid, job0.slurm_name)
        if jid.endswith("_0"):  # hangs: the monitor cancels it as stalled
            return Timeline(run_s=None, stall_after_s=5, log_path=log)
        return Timeline(run_s=None, log_path=log)

    fake = FakeSlurmClient(clock, timeline)
    controller = MonitorController(fake, store, [session], clock=clock)
    while not store.load(session.session_id).jobs["k0"].finished:
        controller.poll_once()
        clock.advance(10)
    fake.user_scancel("1000_1")  # and someone cancels the other while no monitor runs
    recorded = store.load(session.session_id).jobs
    assert (recorded["k0"].slurm_state, recorded["k1"].slurm_state) == ("RUNNING", "RUNNING")
    monkeypatch.setattr(cli_monitor, "_status_client", lambda: fake)
    state = str(store.state_dir)
    capsys.readouterr()
    before = fake.calls["squeue"]
    assert main(["status", "--state-dir", state]) == 0
    assert fake.calls["squeue"] == before + 1
    rows = _rows(capsys.readouterr().out)
    assert [session.session_id, "job0", "1000_0", "failed", "CANCELLED", "0", "stall/hang"] in rows
    assert [session.session_id, "job1", "1000_1", "running", "CANCELLED", "0", ""] in rows
    # --offline: the records alone, no SLURM call.
    assert main(["status", "--state-dir", state, "--offline"]) == 0
    assert fake.calls["squeue"] == before + 1
    assert [session.session_id, "job0", "1000_0", "failed", "RUNNING", "0", "stall/hang"] in (
        _rows(capsys.readouterr().out)
    )
    # SLURM not answering: one warning, the recorded states.
    fake.fail_next["squeue"] = 1
    assert main(["status", "--state-dir", state]) == 0
    out = capsys.readouterr()
    assert out.err.count("\n") == 1
    assert out.err.startswith("SLURM did not answer (squeue failed 4 times")
    assert "showing the recorded states" in out.err
    assert [session.session_id, "job1", "1000_1", "running", "RUNNING", "0", ""] in _rows(out.out)


def test_a_second_submit_of_an_active_plan_is_refused_attached_or_forced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    fake = FakeSlurmClient(FakeClock(), lambda _r, _j, _n: Timeline(run_s=None))
    monkeypatch.setattr(cli_monitor, "_client", lambda: fake)
    # Every submission asks about its cost (threshold 0): the refusal and --attach come first.
    args = [
        "submit",
        str(EXAMPLE),
        f"project.base_output_dir={tmp_path}",
        "+scheduler.confirm_above_hours=0",
        "--test-only=never",
    ]
    assert main([*args, "--no-monitor", "--yes"]) == 0
    store = SessionStore(tmp_path / "monitoring_state")
    (first,) = store.ids()
    capsys.readouterr()
    assert main([*args, "--no-monitor"]) == 2
    errors = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("oellm-autoexp")]
    assert len(errors) == 1
    assert errors[0].startswith("oellm-autoexp: error: plan ")
    assert errors[0].endswith(
        f"is already submitted: session {first} is active (4 unfinished job(s)); --attach "
        "monitors it, --new-session submits the jobs again"
    )
    assert (store.ids(), fake.calls["sbatch"]) == ([first], 1)
    assert main([*args, "--no-monitor", "--attach"]) == 0
    out = capsys.readouterr().out
    assert f"attached to session {first} of the same plan; nothing submitted" in out
    assert f"monitor with: oellm-autoexp monitor --monitor-session {first}" in out
    assert (store.ids(), fake.calls["sbatch"]) == ([first], 1)
    # --new-session forces a second submission (after the cost question).
    capsys.readouterr()
    assert main([*args, "--no-monitor", "--array-subset", "1"]) == 2  # job 1 is active
    assert f"session {first} is active" in capsys.readouterr().err
    assert main([*args, "--no-monitor", "--new-session"]) == 2  # submits: the cost question
    assert "pass --yes to submit it" in capsys.readouterr().err
    assert main([*args, "--no-monitor", "--new-session", "--yes"]) == 0
    assert len(store.ids()) == 2 and fake.calls["sbatch"] == 2
    assert main([*args, "--attach", "--new-session"]) == 2


def test_a_refused_lock_is_one_line(tmp_path: Path, make_session: Any) -> None:
    session, store = make_session(tmp_path, jobs=1)
    hold = (
        "import sys, time\nfrom pathlib import Path\n"
        "from oellm_autoexp.persistence import SessionStore\n"
        "with SessionStore(Path(sys.argv[1])).lock(sys.argv[2]):\n"
        "    print('locked', flush=True); time.sleep(60)\n"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", hold, str(store.state_dir), session.session_id],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        done = subprocess.run(
            [EXE, "monitor", "--monitor-all", "--state-dir", str(store.state_dir), "--once"],
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
    finally:
        holder.kill()
        holder.wait(timeout=10)
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"oellm-autoexp: error: session {session.session_id} is being monitored")


def test_plan_prints_sweep_values_as_written_never_as_rich_markup(
    tmp_path: Path, capsys: Any
) -> None:
    config = tmp_path / "markup.yaml"
    config.write_text(
        EXAMPLE.read_text()
        .replace("base_output_dir: ./autoexp_runs/hello", f"base_output_dir: {tmp_path}/o")
        .replace("lr: [1.0e-4, 3.0e-4]", 'lr: [1.0e-4]\n    note: ["[dummy] training", "[/]"]')
        .replace('name_template: "hello_lr{lr}_h{hidden}"', 'name_template: "h{hidden}_{job_id}"')
    )
    assert main(["plan", str(config), "--test-only=never", "--all"]) == 0
    out = capsys.readouterr().out
    assert "note='[dummy] training'" in out
    assert "note=[/]" in out


def test_plan_says_no_controller_answered_instead_of_blaming_the_script(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # What Debian's sbatch prints with no slurm.conf and no DNS SRV record for slurmctld.
    (bin_dir / "sbatch").write_text(
        "#!/bin/sh\n"
        "echo 'sbatch: error: resolve_ctls_from_dns_srv: res_nsearch error: Unknown host' >&2\n"
        "echo 'sbatch: error: fetch_config: DNS SRV lookup failed' >&2\n"
        "echo 'sbatch: fatal: Could not establish a configuration source' >&2\n"
        "exit 1\n"
    )
    (bin_dir / "sbatch").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        [EXE, "plan", str(EXAMPLE), f"project.base_output_dir={tmp_path / 'o'}"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    (warning,) = [ln for ln in done.stderr.splitlines() if ln.startswith("warning")]
    assert warning.endswith(
        "sbatch --test-only: no SLURM controller answered (sbatch: fatal: Could not establish "
        "a configuration source); the script was not checked by SLURM"
    )
    assert "rejected the script" not in done.stderr
