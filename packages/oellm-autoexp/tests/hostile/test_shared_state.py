"""Session state someone else could have written steers nothing (issue 23 §1).

A co-tenant with write access to `monitoring_state/` plants a session that would run their
command: a new `slurm.submit_cmd`, a `script` outside the plan, or a script in a standalone
monitor's state. Each attack is performed for real here and each holds: a file another user
owns or others can write is refused in one line, the submit command comes from the caller's
config, and a standalone monitor submits nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from oellm_autoexp import api
from oellm_autoexp.cli import main
from oellm_autoexp.persistence import JobRecord, Session, SessionStore, new_session_id
from oellm_autoexp.slurm.client import SubmitRequest
from oellm_autoexp.slurm.fake import FakeClock, FakeSlurmClient


class _RecordingSlurm(FakeSlurmClient):
    def __init__(self) -> None:
        super().__init__(FakeClock())
        self.requests: list[SubmitRequest] = []

    def submit(self, request: SubmitRequest) -> str:
        self.requests.append(request)
        return super().submit(request)


def _unsubmitted(root: Path, *, script: Path, submit_cmd: str) -> Session:
    session = Session(
        new_session_id(),
        "p",
        str(root),
        config={"project": {"name": "p"}, "slurm": {"submit_cmd": submit_cmd}},
    )
    job = JobRecord("k0", "job0", str(script), "job0", str(root / "log"), str(root))
    session.jobs[job.key] = job
    return session


def _planted(tmp_path: Path, **kwargs: object) -> tuple[Path, Session]:
    state = tmp_path / "out" / "monitoring_state"
    script = tmp_path / "out" / "plans" / "job0.sbatch"
    script.parent.mkdir(parents=True)
    script.write_text("#!/bin/bash\n")
    session = _unsubmitted(tmp_path / "out", script=script, submit_cmd="sbatch")
    for key, value in kwargs.items():
        setattr(session.jobs["k0"], key, value)
    SessionStore(state).save(session)
    return state, session


@pytest.mark.parametrize(("target", "mode"), [("dir", 0o770), ("file", 0o622)])
def test_a_session_others_can_write_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], target: str, mode: int
) -> None:
    state, session = _planted(tmp_path)
    path = state if target == "dir" else state / f"{session.session_id}.json"
    path.chmod(mode)
    client = _RecordingSlurm()
    argv = ["monitor", "--monitor-session", session.session_id, "--once"]
    assert main([*argv, "--state-dir", str(state)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert f"{path}: " in line and f"(mode {mode:04o})" in line
    assert "--allow-shared-writable" in line
    # Library callers are held to the same rule; monitor --monitor-all skips it, and says so.
    result = api.monitor_once(SessionStore(state), client)
    assert result.sessions == [] and client.requests == []
    # The user accepts the risk explicitly: the session is monitored.
    shared = SessionStore(state, allow_shared_writable=True)
    assert [s.session_id for s in api.monitor_once(shared, client).sessions] == [session.session_id]


@pytest.mark.skipif(os.geteuid() != 0, reason="planting another user's file needs root")
def test_a_session_file_another_user_owns_is_refused(tmp_path: Path) -> None:
    state, session = _planted(tmp_path)
    os.chown(state / f"{session.session_id}.json", 4242, 4242)
    client = _RecordingSlurm()
    assert api.monitor_once(SessionStore(state), client).sessions == []
    assert client.requests == []


def _plant_submit_cmd(state: Path, session: Session, command: str) -> Path:
    """Rewrite the session file's `slurm.submit_cmd` to `command`; the file's path."""
    path = state / f"{session.session_id}.json"
    data = json.loads(path.read_text())
    data["config"]["slurm"]["submit_cmd"] = command
    path.write_text(json.dumps(data))
    return path


def test_a_planted_submit_cmd_never_runs(tmp_path: Path) -> None:
    canary = tmp_path / "pwned"
    state, session = _planted(tmp_path)
    _plant_submit_cmd(state, session, f"touch {canary}")
    client = _RecordingSlurm()
    store = SessionStore(state, submit_cmd="sbatch --qos=mine")
    api.monitor_once(store, client, session_ids=[session.session_id])
    assert [r.submit_cmd for r in client.requests] == ["sbatch --qos=mine"]
    assert not canary.exists()


def _fake_slurm(tmp_path: Path) -> Path:
    """`sbatch` (records its argv, answers a job id), `squeue` and `sacct` on a PATH of their
    own: the real SLURM client runs them as it would on a cluster."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    scripts = {
        "sbatch": f'echo "$@" >> {tmp_path / "sbatch.argv"}\necho 4242\n',
        "squeue": "echo '{\"jobs\": []}'\n",
        "sacct": "exit 0\n",
    }
    for name, body in scripts.items():
        (bin_dir / name).write_text(f"#!/bin/bash\n{body}")
        (bin_dir / name).chmod(0o755)
    return bin_dir


def test_monitor_session_without_a_config_never_runs_a_planted_submit_cmd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    canary = tmp_path / "pwned"
    state, session = _planted(tmp_path)
    path = _plant_submit_cmd(state, session, f"sh -c 'touch {canary}' planted")
    path.chmod(0o600)  # the user's own file, no one else can write: ownership passes
    bin_dir = _fake_slurm(tmp_path)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    # The planted command is a working submit command: run, it would touch the canary.
    probe = tmp_path / "probe"
    subprocess.run(["sh", "-c", f"touch {probe}", "planted", "--parsable"], check=True)
    assert probe.exists()
    argv = ["monitor", "--monitor-session", session.session_id, "--state-dir", str(state)]
    main([*argv, "--once"])
    assert not canary.exists()
    # The job was submitted, with this machine's default submit command.
    (submitted,) = (tmp_path / "sbatch.argv").read_text().splitlines()
    assert submitted.endswith(str(tmp_path / "out" / "plans" / "job0.sbatch"))
    assert "replaced by 'sbatch'" in caplog.text


def test_monitor_with_config_submits_with_the_configs_submit_cmd(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "project": {"name": "p", "base_output_dir": str(tmp_path / "out")},
                "backend": {"class_name": "CommandBackend", "argv": ["echo", "{lr}"]},
                "sweep": {"axes": {"lr": [1]}},
            }
        )
    )
    plan = api.plan(config, [], test_only="never")
    store = api.store_for_config(plan.config, plan.plan.output_root)
    session = api.submit(plan, _RecordingSlurm()).session
    path = store.path(session.session_id)
    data = json.loads(path.read_text())
    data["config"]["slurm"]["submit_cmd"] = f"touch {tmp_path / 'pwned'}"
    path.write_text(json.dumps(data))
    from oellm_autoexp.cli.monitor import _store

    pinned = _store(None, str(config), [])
    assert pinned.load(session.session_id).config["slurm"]["submit_cmd"] == "sbatch"


def test_a_script_outside_the_scripts_root_is_refused(tmp_path: Path) -> None:
    evil = tmp_path / "elsewhere" / "evil.sbatch"
    evil.parent.mkdir()
    evil.write_text("#!/bin/bash\ntouch /tmp/pwned\n")
    state, _ = _planted(tmp_path, script=str(evil))
    client = _RecordingSlurm()
    store = SessionStore(state, scripts_root=tmp_path / "out")
    assert api.monitor_once(store, client).sessions == []
    assert client.requests == []


def test_a_standalone_monitor_never_submits_a_planted_script(tmp_path: Path) -> None:
    from oellm_autoexp.monitor.standalone import parse_monitor_file, run_monitor_file, store_for

    spec_path = tmp_path / "watch.yaml"
    data = {
        "monitoring": {"termination_str": "DONE", "poll_interval_seconds": 0.1},
        "watch": [{"name": "train", "log": str(tmp_path / "train.log")}],
    }
    spec_path.write_text(yaml.safe_dump(data))
    spec = parse_monitor_file(data, spec_path)
    client = _RecordingSlurm()

    class _Quiet:
        def info(self, message: str) -> None: ...
        def warning(self, message: str) -> None: ...
        def action(self, action: object) -> None: ...

    store, session = run_monitor_file(spec, client, reporter=_Quiet(), once=True)
    path = store.path(session.session_id)
    planted = json.loads(path.read_text())
    evil = tmp_path / "evil.sbatch"
    evil.write_text("#!/bin/bash\n")
    planted["jobs"][0]["script"] = str(evil)
    path.write_text(json.dumps(planted))
    run_monitor_file(spec, client, reporter=_Quiet(), once=True)
    assert client.requests == []
    assert store_for(spec).load(session.session_id).jobs["train"].script == ""


def test_status_refuses_a_shared_writable_session_unless_waived(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state, session = _planted(tmp_path)
    state.chmod(0o770)
    argv = ["status", "--state-dir", str(state), "--session", session.session_id, "--offline"]
    assert main(argv) == 2
    out, err = capsys.readouterr()
    (line,) = err.strip().splitlines()
    assert f"{state}: the session directory is writable by group (mode 0770)" in line
    assert "--allow-shared-writable" in line and "job0" not in out
    assert main([*argv, "--allow-shared-writable"]) == 0
    assert "job0" in capsys.readouterr().out


def test_cleanup_refuses_a_shared_writable_session_unless_waived(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state, session = _planted(tmp_path)
    path = state / f"{session.session_id}.json"
    path.chmod(0o666)
    argv = ["cleanup", "--state-dir", str(state), "--session", session.session_id, "--yes"]
    assert main([*argv, "--no-cancel"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert f"{path}: the session file is writable by group and others (mode 0666)" in line
    # Waived, the session is read (it has nothing live and no logs yet).
    assert main([*argv, "--no-cancel", "--allow-shared-writable"]) == 0
    assert capsys.readouterr().out == f"session {session.session_id}: nothing to do\n"
