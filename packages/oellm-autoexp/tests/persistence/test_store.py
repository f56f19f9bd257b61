"""Session files: round trip, atomic replace, one-line errors, and the cross-process lock."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from oellm_autoexp.errors import AutoexpUsageError
from oellm_autoexp.persistence import (
    JobRecord,
    Session,
    SessionCorruptError,
    SessionLockedError,
    SessionNotFoundError,
    SessionStore,
    new_session_id,
)
from oellm_autoexp.persistence.states import MonitorState


def _session(tmp_path: Path, jobs: int = 2) -> Session:
    session = Session(new_session_id(), "proj", str(tmp_path), config={"project": {"name": "p"}})
    for i in range(jobs):
        job = JobRecord(
            f"k{i}", f"job{i}", "s.sbatch", "arr", "log_%A_%a.out", str(tmp_path), array_index=i
        )
        session.jobs[job.key] = job
    return session


def test_a_session_round_trips_through_its_file(tmp_path: Path) -> None:
    store = SessionStore.for_output_dir(tmp_path)
    session = _session(tmp_path)
    session.jobs["k1"].job_id = "12_1"
    session.jobs["k1"].record_transition(5.0, "pending", "running", "RUNNING")
    path = store.create(session)
    assert path == tmp_path / "monitoring_state" / f"{session.session_id}.json"
    assert len(session.session_id) == 8
    loaded = store.load(session.session_id)
    assert loaded.to_dict() == session.to_dict()
    assert store.ids() == [session.session_id]
    with pytest.raises(AutoexpUsageError, match="exists"):
        store.create(session)


def test_saves_are_atomic_and_leave_no_temp_files(tmp_path: Path) -> None:
    store = SessionStore.for_output_dir(tmp_path)
    session = _session(tmp_path, jobs=200)
    store.create(session)
    session.jobs["k3"].state = MonitorState.COMPLETED
    store.save(session)
    assert [p.name for p in store.state_dir.iterdir()] == [f"{session.session_id}.json"]
    assert store.load(session.session_id).jobs["k3"].state == "completed"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"format": "oellm-autoexp-session", "jobs": [', r"not valid JSON \(line 1, column"),
        ('{"some": "other tool"}', "not an oellm-autoexp session file"),
        ('{"format": "oellm-autoexp-session", "version": 9}', "version: expected 1, found 9"),
        ('{"format": "oellm-autoexp-session", "version": 1, "jobs": []}', "missing key"),
    ],
)
def test_corrupt_or_foreign_files_are_one_line_usage_errors(
    tmp_path: Path, content: str, message: str
) -> None:
    store = SessionStore.for_output_dir(tmp_path)
    store.state_dir.mkdir(parents=True)
    (store.state_dir / "abcd1234.json").write_text(content)
    with pytest.raises(SessionCorruptError, match=message) as info:
        store.load("abcd1234")
    assert "\n" not in str(info.value)
    assert str(store.state_dir / "abcd1234.json") in str(info.value)
    assert info.value.exit_code == 2


def test_a_bad_job_record_names_its_index(tmp_path: Path) -> None:
    store = SessionStore.for_output_dir(tmp_path)
    data = _session(tmp_path).to_dict()
    data["jobs"][1]["surprise"] = 1
    store.state_dir.mkdir(parents=True)
    (store.state_dir / "abcd1234.json").write_text(json.dumps(data))
    with pytest.raises(SessionCorruptError, match=r"jobs\[1\]: .*surprise"):
        store.load("abcd1234")


def test_missing_session_lists_the_known_ids_and_bad_ids_are_refused(tmp_path: Path) -> None:
    store = SessionStore.for_output_dir(tmp_path)
    session = _session(tmp_path)
    store.create(session)
    with pytest.raises(SessionNotFoundError, match=f"known: {session.session_id}"):
        store.load("nope0000")
    with pytest.raises(AutoexpUsageError, match="invalid session id"):
        store.load("../../etc/passwd")


HOLDER = """
import sys, time
from pathlib import Path
from oellm_autoexp.persistence import SessionStore
store = SessionStore(Path(sys.argv[1]))
with store.lock(sys.argv[2]):
    print("locked", flush=True)
    time.sleep(60)
"""


def test_a_second_monitor_cannot_take_the_lock_until_the_first_dies(tmp_path: Path) -> None:
    store = SessionStore.for_output_dir(tmp_path)
    session = _session(tmp_path)
    store.create(session)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(store.state_dir), session.session_id],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "locked"
        with (
            pytest.raises(SessionLockedError, match="being monitored by another process"),
            store.lock(session.session_id),
        ):
            pass
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=10)
    # The OS released the lock with the killed process: a resumed monitor gets it.
    deadline = time.monotonic() + 5
    while True:
        try:
            with store.lock(session.session_id):
                break
        except SessionLockedError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def test_typed_job_records_round_trip_through_the_flat_json_form() -> None:
    from oellm_autoexp.persistence.session import Attempt, JobRecord, Outcome

    record = JobRecord("k", "job", "s.sbatch", "job", "/l/job_%j.out", "/o")
    record.state = MonitorState.FAILED
    record.attempts = [Attempt("7", "FAILED", "crash", {"error_type": "oom"}, 5.0, ["oom"])]
    record.outcome = Outcome.of("crash", {"error_type": "oom", "exit_code": 1}, "no policy")
    data = json.loads(json.dumps(record.to_dict()))
    assert data["state"] == "failed"
    assert data["outcome"] == {
        "mode": "crash",
        "error_type": "oom",
        "decision": "no policy",
        "exit_code": 1,
    }
    back = JobRecord.from_dict(data)
    assert back == record and back.state is MonitorState.FAILED
    assert back.outcome is not None and back.outcome.details == {"exit_code": 1}
    with pytest.raises(ValueError, match="'lost'"):
        JobRecord.from_dict({**data, "state": "lost"})
