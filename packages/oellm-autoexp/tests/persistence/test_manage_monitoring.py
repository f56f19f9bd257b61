"""scripts/manage_monitoring.py: list, show, remove (guarded), dump-config."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from oellm_autoexp.persistence.states import MonitorState

SCRIPT = Path(__file__).parents[2] / "scripts" / "manage_monitoring.py"


def _run(state_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--monitoring-state-dir", str(state_dir), *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def test_list_show_dump_and_guarded_remove(tmp_path: Path, make_session: Any) -> None:
    session, store = make_session(tmp_path, jobs=2)
    sid = session.session_id
    session.jobs["k0"].job_id, session.jobs["k0"].state = "9_0", MonitorState.RUNNING
    store.save(session)
    listing = _run(store.state_dir, "list")
    assert listing.returncode == 0
    assert listing.stdout.startswith(f"{sid}  scenario")
    assert "1 pending, 1 running" in listing.stdout
    shown = _run(store.state_dir, "show", sid)
    assert "job0" in shown.stdout and "9_0" in shown.stdout
    dumped = _run(store.state_dir, "dump-config", sid)
    assert json.loads(dumped.stdout) == session.config
    refused = _run(store.state_dir, "remove", sid)
    assert refused.returncode == 2
    assert "still has 1 live job(s) (9_0)" in refused.stderr
    assert store.path(sid).exists()
    forced = _run(store.state_dir, "remove", sid, "--force")
    assert forced.returncode == 0
    assert not store.path(sid).exists()
    missing = _run(store.state_dir, "show", sid)
    assert missing.returncode == 2
    assert missing.stderr.count("\n") == 1
