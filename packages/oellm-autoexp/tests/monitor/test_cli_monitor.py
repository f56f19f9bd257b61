"""monitor / status / cleanup through the installed console script: tables and one-line errors."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from oellm_autoexp.persistence.session import Attempt
from oellm_autoexp.persistence.states import MonitorState

EXE = Path(sys.executable).with_name("oellm-autoexp")


def _run(
    *args: str, env: dict[str, str] | None = None, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(EXE), *args],
        capture_output=True,
        text=True,
        check=False,
        env=env,
        input=stdin,
        timeout=120,
    )


def test_status_shows_every_job_of_every_session(tmp_path: Path, make_session: Any) -> None:
    first, store = make_session(tmp_path, jobs=2)
    second, _ = make_session(tmp_path, jobs=1, array=False)
    job = first.jobs["k1"]
    job.state, job.slurm_state, job.job_id, job.restarts = (
        MonitorState.RUNNING,
        "RUNNING",
        "77_1",
        {"stall": 1},
    )
    store.save(first)
    done = _run("status", "--state-dir", str(store.state_dir))
    assert done.returncode == 0, done.stderr
    rows = [[cell.strip() for cell in line.split("│")] for line in done.stdout.splitlines()]
    assert [first.session_id, "job1", "77_1", "running", "RUNNING", "stall=1", ""] in rows
    assert any(row[:2] == [second.session_id, "job0"] for row in rows)


def test_bad_sessions_and_bad_flags_are_one_line_with_exit_2(
    tmp_path: Path, make_session: Any
) -> None:
    session, store = make_session(tmp_path, jobs=1)
    missing = _run("monitor", "--monitor-session", "feedbeef", "--state-dir", str(store.state_dir))
    assert missing.returncode == 2
    assert missing.stderr.strip() == (
        f"oellm-autoexp: error: no session 'feedbeef' in {store.state_dir} "
        f"(known: {session.session_id})"
    )
    (store.state_dir / "c0ffee00.json").write_text('{"jobs": [')
    corrupt = _run("status", "--session", "c0ffee00", "--state-dir", str(store.state_dir))
    assert corrupt.returncode == 2
    assert len(corrupt.stderr.strip().splitlines()) == 1
    assert "c0ffee00.json: not valid JSON" in corrupt.stderr
    neither = _run("monitor", "--state-dir", str(store.state_dir))
    assert neither.returncode == 2
    assert "give --monitor-session ID, --monitor-all, or a CONFIG" in neither.stderr
    assert "Traceback" not in missing.stderr + corrupt.stderr + neither.stderr


def test_monitoring_without_slurm_installed_is_a_usage_error(
    tmp_path: Path, make_session: Any
) -> None:
    session, store = make_session(tmp_path, jobs=1)
    env = {**os.environ, "PATH": str(EXE.parent)}
    done = _run(
        "monitor",
        "--monitor-session",
        session.session_id,
        "--state-dir",
        str(store.state_dir),
        "--quiet",
        env=env,
    )
    assert done.returncode == 2, done.stderr
    assert "SLURM is not installed here: 'sbatch' is not on PATH" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    # Nothing was submitted, and the session file says so (no dangling submission intent).
    job = store.load(session.session_id).jobs["k0"]
    assert (job.job_id, job.submit_token) == (None, None)


def test_cleanup_asks_first_and_archives_logs_with_yes(tmp_path: Path, make_session: Any) -> None:
    session, store = make_session(tmp_path, jobs=1, array=False)
    job = session.jobs["k0"]
    job.state = MonitorState.COMPLETED
    job.attempts = [Attempt("55", "COMPLETED", "success", {}, ended_at=1.0)]
    store.save(session)
    log = tmp_path / "logs" / "job0_55.out"
    log.write_text("done\n")
    declined = _run("cleanup", "--state-dir", str(store.state_dir), stdin="n\n")
    assert declined.returncode == 0, declined.stderr
    assert "archive 1 log file(s)? [y/N]" in declined.stdout
    assert (
        f"session {session.session_id}: declined; nothing cancelled or archived" in declined.stdout
    )
    assert not (tmp_path / "archive").exists()
    unanswered = _run("cleanup", "--state-dir", str(store.state_dir), stdin="")
    assert unanswered.returncode == 2
    assert unanswered.stderr.strip().splitlines()[-1] == (
        "oellm-autoexp: error: cleanup needs a yes/no answer and stdin gave none; pass --yes "
        "to skip the question"
    )
    assert not (tmp_path / "archive").exists()
    done = _run("cleanup", "--state-dir", str(store.state_dir), "--yes")
    assert done.returncode == 0, done.stderr
    archives = list((tmp_path / "archive").glob(f"{session.session_id}-*.tar.gz"))
    assert len(archives) == 1
    import tarfile

    with tarfile.open(archives[0]) as tar:
        assert tar.getnames() == ["job0_55.out"]


def test_status_finds_the_sessions_of_a_config(tmp_path: Path, make_session: Any) -> None:
    session, _ = make_session(tmp_path, jobs=1)
    done = _run("status", "autoexp", "slurm=local", f"project.base_output_dir={tmp_path}")
    assert done.returncode == 0, done.stderr
    assert session.session_id in done.stdout
    empty = tmp_path / "elsewhere"
    none = _run("status", "autoexp", f"project.base_output_dir={empty}")
    assert none.returncode == 0
    assert none.stdout.strip() == f"no sessions in {empty / 'monitoring_state'}"


def test_a_rejected_sbatch_is_one_line_with_its_stderr_and_leaves_a_whole_session(
    tmp_path: Path,
) -> None:
    from oellm_autoexp.persistence import SessionStore

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("squeue", "scontrol", "scancel"):
        (bin_dir / name).write_text("#!/bin/sh\nexit 0\n")
        (bin_dir / name).chmod(0o755)
    sbatch = bin_dir / "sbatch"
    sbatch.write_text(
        "#!/bin/sh\necho 'sbatch: error: Batch job submission failed: Invalid account' >&2\n"
        "exit 1\n"
    )
    sbatch.chmod(0o755)
    example = Path(__file__).resolve().parents[2] / "examples" / "hello_sweep.yaml"
    out = tmp_path / "out"
    done = _run(
        "submit",
        str(example),
        f"project.base_output_dir={out}",
        "--no-monitor",
        "--test-only",
        "never",
        env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"},
    )
    assert done.returncode == 1, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("oellm-autoexp:")]
    assert len(errors) == 1
    assert "Invalid account" in errors[0] and "Traceback" not in done.stderr
    store = SessionStore(out / "monitoring_state")
    (session_id,) = store.ids()
    session = store.load(session_id)  # a whole, loadable file: no half-written state
    assert len(session.jobs) == 4
    assert all(j.job_id is None and j.submit_token is None for j in session.jobs.values())
    assert not list(store.state_dir.glob("*.tmp"))


def test_an_unanswered_sbatch_is_reported_not_counted_and_resolved_by_the_next_monitor(
    tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    # SLURM is the fake here (the boundary): sbatch times out without queuing anything.
    from oellm_autoexp.cli import main
    from oellm_autoexp.cli import monitor as cli_monitor
    from oellm_autoexp.persistence import SessionStore
    from oellm_autoexp.slurm.fake import FakeClock, FakeSlurmClient

    fake = FakeSlurmClient(FakeClock())
    fake.fail_next["sbatch"] = 1
    monkeypatch.setattr(cli_monitor, "_client", lambda: fake)
    example = Path(__file__).resolve().parents[2] / "examples" / "hello_sweep.yaml"
    out = tmp_path / "out"
    args = [str(example), f"project.base_output_dir={out}"]
    rc = main(["submit", *args, "--no-monitor", "--test-only", "never"])
    err = capsys.readouterr().err
    assert rc == 1
    store = SessionStore(out / "monitoring_state")
    (session_id,) = store.ids()
    assert (
        f"session {session_id}: 0 of 4 job(s) confirmed submitted; SLURM did not answer for "
        f"the rest. Resolve with: oellm-autoexp monitor --monitor-session {session_id}"
    ) in err
    assert all(j.submit_token for j in store.load(session_id).jobs.values())

    rc = main(
        ["monitor", "--monitor-session", session_id, "--state-dir", str(store.state_dir), "--once"]
    )
    assert rc == 0
    jobs = store.load(session_id).jobs.values()
    assert all(j.job_id is not None and j.submit_token is None for j in jobs)
    assert len(fake.submissions) == 1  # the lost sbatch never queued; one array now
