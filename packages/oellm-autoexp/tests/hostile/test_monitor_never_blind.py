"""The monitor never goes blind and never loses or repeats an action (issue 23 §3).

- A line longer than the 1 MiB read window (a tqdm `\\r` stream, or 2 MB without any line
  end) used to stop the log reader for good: no signal, no `termination_str` after it.
- Actions ran after the poll had saved the log offset: a SIGKILL in between lost them. Now
  each is recorded as an intent in the same write as the offset, marked started before its
  command runs and removed after; SIGKILLs at random moments neither lose nor repeat one,
  nor do SIGKILLs at the racy point: a shell forked for an action that has not yet claimed
  its receipt when the monitor dies (the claim is an O_EXCL create that only one shell wins).
- A full disk while saving the state is one line, exit 2, not a traceback.
"""

from __future__ import annotations

import errno
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from oellm_autoexp.monitor.log_signals import MAX_READ_BYTES, read_new_text
from oellm_autoexp.persistence.intents import RECEIPT_KEEP_S, Receipts

EXE = Path(sys.executable).with_name("oellm-autoexp")


@pytest.mark.parametrize("long_line", [b"x" * (2 << 20), b"it/s\r" * (420_000)])
def test_a_line_longer_than_the_read_window_does_not_stop_the_reader(
    tmp_path: Path, long_line: bytes
) -> None:
    log = tmp_path / "train.log"
    log.write_bytes(b"step 1\n" + long_line + b"\nCUDA out of memory\nTRAINING DONE\n")
    offset, texts = 0, []
    for _ in range(10):
        text, offset = read_new_text(log, offset)
        texts.append(text)
        if offset == log.stat().st_size:
            break
    assert offset == log.stat().st_size
    assert "CUDA out of memory\nTRAINING DONE\n" in texts[-1]
    assert all(len(text.encode()) <= MAX_READ_BYTES for text in texts)


def _monitor_file(tmp_path: Path, action: str, poll: float = 0.1) -> Path:
    path = tmp_path / "watch.yaml"
    data = {
        "monitoring": {
            "termination_str": "TRAINING DONE",
            "poll_interval_seconds": poll,
            "log_signals": [{"name": "ckpt", "pattern": "saved checkpoint", "action": "ckpt"}],
        },
        "watch": [{"name": "train", "log": str(tmp_path / "train.log")}],
        "actions": {"ckpt": action},
    }
    path.write_text(yaml.safe_dump(data))
    return path


def test_a_two_megabyte_line_does_not_blind_the_monitor(tmp_path: Path) -> None:
    path = _monitor_file(tmp_path, "true")
    (tmp_path / "train.log").write_bytes(b"x" * (2 << 20) + b"\nTRAINING DONE\n")
    done = subprocess.run(
        [str(EXE), "monitor", str(path)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    state = json.loads(next((tmp_path / "monitoring_state").glob("m*.json")).read_text())
    assert [job["state"] for job in state["jobs"]] == ["completed"]


def test_sigkills_during_actions_neither_lose_nor_repeat_one(tmp_path: Path) -> None:
    events = tmp_path / "events.txt"
    path = _monitor_file(tmp_path, f"echo {{line}} >> {events}")
    lines = [f"saved checkpoint {i}" for i in range(60)]
    log = tmp_path / "train.log"
    log.write_text("".join(f"{line}\n" for line in lines) + "TRAINING DONE\n")
    rng = random.Random(23)
    argv = [str(EXE), "monitor", str(path)]
    kills = 0
    # SIGKILL at random moments (startup, a poll, an action); the window ends before a quiet
    # machine finishes the whole run (about 0.5 s), so at least one attempt is killed.
    for _attempt in range(10):
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            proc.wait(timeout=rng.uniform(0.05, 0.45))
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            kills += 1
            continue
        break
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    time.sleep(0.5)  # an action a killed monitor had started finishes on its own
    seen = events.read_text().splitlines()
    assert sorted(seen) == sorted(lines), (kills, len(seen))
    assert kills >= 1


def _wait_for_lines(path: Path, count: int, timeout: float = 60.0) -> list[str]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        lines = path.read_text().splitlines() if path.exists() else []
        if len(lines) >= count:
            return lines
        time.sleep(0.01)
    raise AssertionError(f"{path}: fewer than {count} lines after {timeout} s")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_sigkills_between_an_actions_fork_and_its_receipt_never_run_it_twice(
    tmp_path: Path,
) -> None:
    events, forked = tmp_path / "events.txt", tmp_path / "forked.txt"
    path = _monitor_file(tmp_path, f"echo {{line}} >> {events}")
    lines = [f"saved checkpoint {i}" for i in range(4)]
    (tmp_path / "train.log").write_text("".join(f"{line}\n" for line in lines) + "TRAINING DONE\n")
    # bash reads $BASH_ENV before its command: each action's shell says it was forked, then
    # stalls there, before the command line (and so the receipt claim) starts. The monitor is
    # killed in that stall: the old receipt, created by the shell only once it got going,
    # left the restarted monitor no sign of it, and both shells ran the action.
    stall = tmp_path / "stall.sh"
    stall.write_text(f"echo $$ >> {forked}\nsleep 2\n")
    env = {**os.environ, "BASH_ENV": str(stall)}
    argv = [str(EXE), "monitor", str(path)]
    for kill in range(3):
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        _wait_for_lines(forked, kill + 1)  # a shell is forked and stalled before its claim
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert not events.exists() or len(events.read_text().splitlines()) <= kill
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    shells = [int(pid) for pid in forked.read_text().split()]
    deadline = time.monotonic() + 30
    while any(map(_alive, shells)) and time.monotonic() < deadline:
        time.sleep(0.05)  # the killed monitors' shells finish on their own
    assert len(shells) > len(lines)  # some actions had two shells racing for them ...
    assert sorted(events.read_text().splitlines()) == sorted(lines)  # ... each ran once
    assert "not repeated" in done.stderr or len(shells) > len(lines) + 1


def test_a_settled_receipt_is_kept_until_no_late_shell_can_claim_it(tmp_path: Path) -> None:
    receipts = Receipts(tmp_path, "s1")
    for name in ("settled-new", "settled-old", "pending-old"):
        Path(receipts.path(name)).touch()
    old = time.time() - RECEIPT_KEEP_S - 1
    for name in ("settled-old", "pending-old"):
        os.utime(receipts.path(name), (old, old))
    receipts.forget_settled({"pending-old"})
    assert sorted(p.name for p in receipts.folder.iterdir()) == ["pending-old", "settled-new"]


def test_a_full_disk_while_saving_the_state_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from oellm_autoexp.cli import main

    path = _monitor_file(tmp_path, "true")
    (tmp_path / "train.log").write_text("TRAINING DONE\n")

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    # os.fsync is the kernel boundary every atomic write (`toolkit_core.atomic`) goes through.
    monkeypatch.setattr(os, "fsync", full)
    assert main(["monitor", str(path), "--once"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "cannot write" in line and "No space left on device" in line
    assert "monitoring_state" in line
