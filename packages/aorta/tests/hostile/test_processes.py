"""Hostile conditions for processes (issue 18 §6): a SIGKILLed parent leaves nothing behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from aorta.runner import lifetime


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (killed, not yet reaped by init) counts as dead.
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(") ", 1)[1].startswith("Z"))


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux-only")
def test_child_dies_when_its_parent_is_sigkilled(tmp_path: Path) -> None:
    parent_code = (
        "import subprocess, sys, time\n"
        "from aorta.runner.lifetime import die_with_parent\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'],"
        " preexec_fn=die_with_parent())\n"
        "print(child.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", parent_code], stdout=subprocess.PIPE, text=True
    )
    assert parent.stdout is not None
    child_pid = int(parent.stdout.readline())
    try:
        assert _alive(child_pid)
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        deadline = time.monotonic() + 5
        while _alive(child_pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(child_pid)
    finally:
        if _alive(child_pid):
            os.kill(child_pid, signal.SIGKILL)


def test_orphaned_child_dirs_are_removed_and_live_ones_kept(tmp_path: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    orphan = tmp_path / f"{lifetime.CHILD_TMP_PREFIX}{dead.pid}-abc"
    mine = tmp_path / f"{lifetime.CHILD_TMP_PREFIX}{os.getpid()}-def"
    odd = tmp_path / f"{lifetime.CHILD_TMP_PREFIX}xyz"
    for path in (orphan, mine, odd):
        path.mkdir()
        (path / "request.json").write_text("{}")
    assert lifetime.remove_orphaned_child_dirs(tmp_path) == [orphan]
    assert not orphan.exists() and mine.exists() and odd.exists()


def test_child_tmp_prefix_names_this_process() -> None:
    assert lifetime.child_tmp_prefix() == f"aorta-child-{os.getpid()}-"
