"""`hold_lock`: one holder at a time across processes, released on exit and on death."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from toolkit_core.locks import LockBusyError, hold_lock

_HOLDER = (
    "import sys, time\n"
    "from pathlib import Path\n"
    "from toolkit_core.locks import hold_lock\n"
    "with hold_lock(Path(sys.argv[1])):\n"
    "    print('held', flush=True)\n"
    "    time.sleep(float(sys.argv[2]))\n"
)


def _start_holder(path: Path, seconds: float) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(path), str(seconds)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline() == "held\n"
    return proc


def test_a_second_process_is_refused_at_once_and_waits_when_asked(tmp_path: Path) -> None:
    path = tmp_path / "x.lock"
    holder = _start_holder(path, 1.0)
    try:
        with pytest.raises(LockBusyError, match="held by another process"), hold_lock(path):
            pass
        start = time.monotonic()
        with hold_lock(path, timeout_s=30):  # the holder lets go after ~1 s
            assert holder.poll() is not None or time.monotonic() - start > 0.1
    finally:
        holder.wait(timeout=30)


def test_a_killed_holder_leaves_no_stale_lock(tmp_path: Path) -> None:
    path = tmp_path / "x.lock"
    holder = _start_holder(path, 60)
    holder.kill()
    holder.wait(timeout=30)
    with hold_lock(path) as fd:
        os.write(fd, b"123\n")
    assert path.read_text() == "123\n"  # kept (remove=False) and not truncated by the lock


def test_remove_unlinks_the_file_and_a_planted_symlink_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "x.lock"
    with hold_lock(path, remove=True):
        assert path.exists()
    assert not path.exists()
    target = tmp_path / "victim"
    target.write_text("keep")
    path.symlink_to(target)
    with pytest.raises(OSError), hold_lock(path):
        pass
    assert target.read_text() == "keep"
