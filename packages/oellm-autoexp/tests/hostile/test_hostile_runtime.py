"""Shared run directories and sessions under attack (issue 18 §2, §3, §5, §6): planted symlinks,
secrets in plan files, catastrophic regexes in log signals, corrupt and locked sessions, and the
submit command the dry run shows."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from oellm_autoexp import api
from oellm_autoexp.cli import main
from oellm_autoexp.errors import ConfigError
from oellm_autoexp.monitor.log_signals import SignalSet, parse_signals, read_new_text
from oellm_autoexp.persistence import (
    JobRecord,
    Session,
    SessionLockedError,
    SessionStore,
    new_session_id,
)
from oellm_autoexp.slurm.client import SubmitRequest
from oellm_autoexp.slurm.fake import FakeClock, FakeSlurmClient
from oellm_autoexp.slurm.real import RealSlurmClient

CONFIG = {
    "project": {"name": "p", "base_output_dir": "out"},
    "backend": {
        "class_name": "CommandBackend",
        "argv": ["echo", "{lr}"],
        "env": {"API_TOKEN": "${oc.env:HOSTILE_TEST_SECRET}"},
    },
    "sweep": {"axes": {"lr": [1, 2]}},
}


def _plan(tmp_path: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str]:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(CONFIG))
    code = main(
        [
            "plan",
            str(path),
            f"project.base_output_dir={tmp_path / 'out'}",
            "--test-only",
            "never",
            *extra,
        ]
    )
    return code, capsys.readouterr().err


@pytest.fixture(autouse=True)
def _secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOSTILE_TEST_SECRET", "s3cr3t-value")


def _fake() -> FakeSlurmClient:
    return FakeSlurmClient(FakeClock())


# -- §2 planted symlinks ---------------------------------------------------------------------


@pytest.mark.parametrize("planted", ["plans", "logs", "jobs"])
def test_a_planted_symlink_below_the_output_root_is_not_followed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], planted: str
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / planted).symlink_to(elsewhere)
    code, err = _plan(tmp_path, capsys)
    assert code == 2
    assert err.count("\n") == 1
    assert f"{tmp_path / 'out' / planted} is a symlink (to {elsewhere}); refusing" in err
    assert list(elsewhere.iterdir()) == []


def test_a_symlink_planted_deeper_in_the_plans_tree_is_not_followed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _plan(tmp_path, capsys)[0] == 0
    plan_dir = next((tmp_path / "out" / "plans").iterdir())
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.rmtree(plan_dir)  # the attacker replaces the plan dir by a link
    plan_dir.symlink_to(elsewhere)
    code, err = _plan(tmp_path, capsys)
    assert code == 2 and "is a symlink" in err
    assert list(elsewhere.iterdir()) == []


def test_a_planted_state_dir_symlink_is_not_followed(tmp_path: Path) -> None:
    from oellm_autoexp.monitor.session_builder import store_for

    root = tmp_path / "out"
    root.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (root / "monitoring_state").symlink_to(elsewhere)
    store = store_for({"project": {"name": "p"}}, root)
    session = Session(new_session_id(), "p", str(root))
    with pytest.raises(ConfigError, match="monitoring_state is a symlink"):
        store.save(session)
    assert list(elsewhere.iterdir()) == []


# -- §6 secrets ------------------------------------------------------------------------------


def test_plan_files_that_may_hold_secrets_are_owner_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _plan(tmp_path, capsys)[0] == 0
    plan_dir = next((tmp_path / "out" / "plans").iterdir())
    script = next((plan_dir / "scripts").iterdir())
    assert "s3cr3t-value" in script.read_text()  # ${oc.env:...} is resolved at plan time
    assert stat.S_IMODE(script.stat().st_mode) == 0o700
    for directory in (tmp_path / "out" / "plans", plan_dir, plan_dir / "scripts"):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700, directory
    for name in ("config.yaml", "plan.json", "sweep.json"):
        assert stat.S_IMODE((plan_dir / name).stat().st_mode) == 0o600, name


def test_session_files_are_owner_only(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "state", root=tmp_path)
    path = store.save(Session(new_session_id(), "p", str(tmp_path)))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "state").stat().st_mode) == 0o700


# -- §3 regexes from users run in linear time ------------------------------------------------


def test_a_catastrophic_backtracking_signal_cannot_hang_a_poll() -> None:
    # Python's backtracking engine needs ~2^40 steps for this line (hours); RE2 is linear.
    signals = parse_signals(
        [{"name": "evil", "pattern": "(a+)+$"}, {"name": "x", "pattern": "(x+x+)+y"}]
    )
    hostile = "a" * 40 + "b\n" + "x" * 5000 + "\n"
    assert SignalSet(signals).scan_text(hostile) == []
    assert [h.signal.name for h in SignalSet(signals).scan_text("aaaa\n")] == ["evil"]


def test_a_log_path_that_is_a_directory_or_fifo_reads_as_nothing(tmp_path: Path) -> None:
    fifo = tmp_path / "log.fifo"
    os.mkfifo(fifo)
    assert read_new_text(tmp_path, 0, size=10) == ("", 0)
    assert read_new_text(fifo, 0, size=10) == ("", 0)  # O_NONBLOCK: no wait for a writer


def test_a_monitor_file_whose_log_is_a_directory_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "watch.yaml"
    path.write_text(yaml.safe_dump({"watch": [{"name": "a", "log": str(tmp_path)}]}))
    assert main(["monitor", str(path), "--once"]) == 2
    assert capsys.readouterr().err == (
        f"oellm-autoexp: error: {path}: watch[0].log: {str(tmp_path)!r} is a directory; "
        "expected the job's log file\n"
    )


# -- §5 corrupt and locked sessions ----------------------------------------------------------


def _session(root: Path) -> Session:
    session = Session(new_session_id(), "p", str(root), config={"project": {"name": "p"}})
    job = JobRecord("k0", "job0", "s.sbatch", "job0", str(root / "log"), str(root))
    job.job_id = "4711"
    session.jobs[job.key] = job
    return session


def test_one_corrupt_session_file_does_not_hide_the_healthy_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "state"
    store = SessionStore(state)
    healthy = _session(tmp_path)
    store.save(healthy)
    (state / "broken.json").write_text("{not json")
    (state / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    os.mkfifo(state / "fifo.json")  # would block a plain open() forever
    assert main(["status", "--state-dir", str(state)]) == 0
    out = capsys.readouterr()
    assert "job0" in out.out
    assert f"skipping: {state / 'broken.json'}: not valid JSON" in out.err
    assert f"skipping: {state / 'deep.json'}: JSON nested too deeply" in out.err
    assert f"skipping: {state / 'fifo.json'}: not a regular file" in out.err
    rows = api.status(store)
    assert [r.name for r in rows] == ["job0"]
    # monitor --monitor-all polls the healthy session and reports the corrupt one
    result = api.monitor_once(store, _fake())
    assert [s.session_id for s in result.sessions] == [healthy.session_id]


def test_a_locked_session_names_the_pid_holding_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "state"
    store = SessionStore(state)
    session = _session(tmp_path)
    store.save(session)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                f"""
                import sys, time
                from pathlib import Path
                from oellm_autoexp.persistence import SessionStore
                with SessionStore(Path({str(state)!r})).lock({session.session_id!r}):
                    print("locked", flush=True)
                    time.sleep(60)
                """
            ),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        # Not explicit (what `monitor CONFIG` does): every session is locked -> an error, exit 2
        with pytest.raises(SessionLockedError, match=f"PID {holder.pid} on "):
            api.monitor_once(store, _fake())
        # ... and through the CLI (no SLURM command runs before the lock is tried)
        assert main(["monitor", "--monitor-all", "--once", "--state-dir", str(state)]) == 2
        err = capsys.readouterr().err
        assert f"is being monitored by another process (PID {holder.pid} on " in err
    finally:
        holder.kill()
        holder.wait()
    # the lock died with its holder: monitoring goes on
    assert api.monitor_once(store, _fake()).sessions


# -- §5 the submit command the dry run shows is the one that runs ---------------------------


def test_real_submit_runs_slurm_submit_cmd(tmp_path: Path) -> None:
    wrapper = tmp_path / "my-sbatch"
    calls = tmp_path / "calls.txt"
    wrapper.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" >> {calls}\necho 4242\n')
    wrapper.chmod(0o700)
    client = RealSlurmClient(env={**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"})
    request = SubmitRequest(
        script=tmp_path / "job.sbatch", job_name="j", submit_cmd="my-sbatch --qos=high"
    )
    assert client.submit(request) == "4242"
    args = calls.read_text().splitlines()
    assert args[0] == "--qos=high" and "--parsable" in args and args[-1] == str(request.script)


class _RecordingSlurm(FakeSlurmClient):
    def __init__(self) -> None:
        super().__init__(FakeClock())
        self.requests: list[SubmitRequest] = []

    def submit(self, request: SubmitRequest) -> str:
        self.requests.append(request)
        return super().submit(request)


def test_submit_and_restarts_use_the_plans_submit_cmd(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump({**CONFIG, "slurm": {"submit_cmd": "sbatch --qos=high"}}))
    result = api.plan(config, [f"project.base_output_dir={tmp_path / 'out'}"], test_only="never")
    client = _RecordingSlurm()
    api.submit(result, client)
    assert client.requests and {r.submit_cmd for r in client.requests} == {"sbatch --qos=high"}
    shown = [" ".join(argv) for argv in result.plan.sbatch_commands()]
    assert all(line.startswith("sbatch --qos=high ") for line in shown), shown
    json.dumps(shown)
