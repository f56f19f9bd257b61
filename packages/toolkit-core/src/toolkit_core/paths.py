"""Paths in shared directories: directories created without following planted symlinks, and
bounded reads of regular files.

Output trees (run directories, plans, logs, session state) live where colleagues can write too.
A link planted at ``<root>/plans -> /elsewhere`` would make the next write land outside the
root, and a FIFO or ``/dev/zero`` planted under an input's name would hang or exhaust a reader.
Errors are `PathError`s with the path and the problem apart, so a tool can re-raise them as its
own error type naming the config key involved.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from toolkit_core.errors import FileTooLargeError, MissingFileError, PathError

__all__ = ["check_no_links", "make_dirs_inside", "read_regular_bytes"]


def _below(path: Path, root: Path) -> list[str]:
    normal, base = Path(os.path.normpath(path)), Path(os.path.normpath(root))
    try:
        return list(normal.relative_to(base).parts)
    except ValueError:
        raise PathError(path, f"is outside the output root {root}", sentence=True) from None


def make_dirs_inside(path: Path, root: Path, *, mode: int = 0o777) -> Path:
    """`mkdir -p path`, refusing a symlink (or a non-directory) at any component below `root`.

    Each component is created (or checked with `lstat`) before anything is created inside it;
    `root` itself is the user's own choice and may be a link (``/scratch/me -> /lustre/...``).
    `mode` applies to the directories created here (umask still applies). Returns `path`.
    """
    parts = _below(path, root)
    Path(root).mkdir(parents=True, exist_ok=True)
    current = Path(os.path.normpath(root))
    for part in parts:
        current = current / part
        try:
            current.mkdir(mode)  # no parents=True: mkdir never follows a link at `current`
            continue
        except FileExistsError:
            pass
        _require_real_dir(current, root)
    return path


def check_no_links(path: Path, root: Path) -> None:
    """Refuse `path` if an existing component below `root` is a symlink or not a directory.

    For trees created later by someone else (a job's own output directory): checked now.
    """
    current = Path(os.path.normpath(root))
    for part in _below(path, root):
        current = current / part
        if not os.path.lexists(current):
            return
        _require_real_dir(current, root)


def _require_real_dir(path: Path, root: Path) -> None:
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode):
        raise PathError(
            path,
            f"is a symlink (to {path.readlink()}); refusing to write through a symbolic link "
            f"below {root}: remove the link",
            sentence=True,
        )
    if not stat.S_ISDIR(info.st_mode):
        raise PathError(path, "exists and is not a directory", sentence=True)


def read_regular_bytes(path: Path, *, max_bytes: int | None) -> bytes:
    """The bytes of `path` if it is a regular file (or a link to one) of at most `max_bytes`.

    Opened non-blocking and checked with fstat on the open descriptor (no race with a swapped
    path) before reading: a FIFO, a device (``/dev/zero``) or a directory is a `PathError`
    instead of a hang, an endless read or a traceback. A file that grows past `max_bytes`
    while being read is refused too: at most `max_bytes + 1` bytes are ever read.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError as exc:
        raise MissingFileError(path, f"cannot read: {exc.strerror or exc}") from None
    except OSError as exc:
        raise PathError(path, f"cannot read: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise PathError(path, "not a regular file (a FIFO, device or directory)")
        if max_bytes is not None and info.st_size > max_bytes:
            raise FileTooLargeError(path, info.st_size, max_bytes)
        chunks = []
        budget = None if max_bytes is None else max_bytes + 1
        while budget is None or budget > 0:
            chunk = os.read(fd, 1 << 24 if budget is None else min(1 << 24, budget))
            if not chunk:
                break
            chunks.append(chunk)
            if budget is not None:
                budget -= len(chunk)
    except OSError as exc:
        raise PathError(path, f"cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if max_bytes is not None and len(data) > max_bytes:
        raise FileTooLargeError(path, len(data), max_bytes)
    return data
