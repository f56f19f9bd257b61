"""Exclusive locks between processes: `fcntl.flock` on a lock file next to what it guards.

One implementation for the three tools (before: raw `fcntl` in aorta, the `filelock` package in
the other two). Plain `flock` because it is what `filelock` does on Unix anyway, minus what we
did not want from it: it truncates the lock file on every attempt (so a holder could not leave
its PID there), follows a symlink planted under the lock's name, and imports asyncio (~30 ms, a
fifth of a command's start-up budget). The kernel drops the lock when the holder dies, so a
crashed run never leaves a stale lock behind.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path

from toolkit_core.errors import ToolkitError

__all__ = ["LockBusyError", "hold_lock"]

_POLL_S = 0.05


class LockBusyError(ToolkitError):
    """Another process holds the lock (and did not let go within the timeout)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        super().__init__(f"{path} is held by another process")


@contextlib.contextmanager
def hold_lock(path: Path, *, timeout_s: float = 0.0, remove: bool = False) -> Iterator[int]:
    """Hold an exclusive lock on `path` (created if missing) for the `with` block.

    Waits up to `timeout_s` (0: try once), then raises `LockBusyError`. Yields the lock file's
    descriptor (open for writing, not truncated: the holder may write its PID there). With
    `remove`, the file is unlinked before the lock is released, so a finished directory holds
    no lock file; a waiter that opened the old file then sees it gone and tries the new one.
    A symlink at `path` is refused (`OSError` ELOOP), never followed.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        try:
            if _try_lock(fd) and _still_linked(fd, path):
                break
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)  # closing drops a lock taken on an inode that was removed meanwhile
        if time.monotonic() >= deadline:
            raise LockBusyError(path)
        time.sleep(_POLL_S)
    try:
        yield fd
    finally:
        if remove:  # unlinked while still held: nobody can take this inode meanwhile
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        os.close(fd)  # releases the flock


def _try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _still_linked(fd: int, path: Path) -> bool:
    # A holder with `remove` may have unlinked the file between our open and our flock: then
    # our lock guards an orphan inode while the next process locks a new file at `path`.
    try:
        return os.fstat(fd).st_ino == path.lstat().st_ino
    except FileNotFoundError:
        return False
