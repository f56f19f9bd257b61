"""Atomic, durable file writes: temp file in the same directory, fsync, rename, fsync the directory.

A reader never sees a half-written file, and a crash leaves at most a stray temp file. The
directory is fsynced after the rename as well as the file before it: without that, a power loss
right after a write can lose the rename itself (ext4, XFS), so a result reported as written
would be gone. `overwrite=False` (the default) never replaces an earlier file: results are kept.
The directory is walked from "/" one component at a time (`paths.open_directory`: openat
with O_NOFOLLOW, a link followed only where no one else could have planted it), and the temp
file, the rename and the fsync all go through the descriptor of the last one: a component
swapped for a planted symlink between a caller's check and the write cannot send the file
elsewhere, nor can a swap during the write. `directory()` holds one walked directory for a
batch of writes into it.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from toolkit_core.errors import OutputExistsError, OutputWriteError, UsageError
from toolkit_core.paths import make_dirs_inside, open_directory

__all__ = [
    "create_run_dir",
    "open_text_atomic",
    "write_bytes_atomic",
    "write_json_atomic",
    "write_text_atomic",
]


def write_bytes_atomic(
    path: Path,
    data: bytes,
    *,
    overwrite: bool = False,
    mode: int | None = None,
    fsync: bool = True,
) -> Path:
    """Write `data` to `path` atomically; returns `path`.

    With `overwrite=False` an existing `path` is never replaced: the final step is a hard link,
    which fails if the name exists (`OutputExistsError`). `mode` defaults to 0666 minus the
    umask (as `open()` gives); oellm-autoexp passes 0600 for files that may hold secrets.
    `fsync=False` skips both fsyncs, for a batch whose caller syncs once at the end
    (`os.sync()`) instead of paying one journal commit per file. Any other failure (a full
    disk, a quota, a parent that is a file) is `OutputWriteError`, one line naming `path`; an
    earlier file under that name is left as it was.
    """
    try:
        with _open_atomic(path, "wb", overwrite=overwrite, mode=mode, fsync=fsync) as handle:
            handle.write(data)
    except (OutputExistsError, OutputWriteError):
        raise
    except OSError as exc:
        raise _write_error(path, exc) from None
    return path


def _write_error(path: Path, exc: OSError) -> OutputWriteError:
    reason = exc.strerror or str(exc)
    error = OutputWriteError(f"{path}: cannot write: {reason}")
    # Still tells ENOSPC from EACCES to code that asks (strerror stays unset: with it, str()
    # would become OSError's "[Errno 28] ..." form instead of the one line above).
    error.errno = exc.errno
    return error


@contextlib.contextmanager
def open_text_atomic(
    path: Path, *, overwrite: bool = True, mode: int | None = None, fsync: bool = True
) -> Iterator[TextIO]:
    """A UTF-8 text handle whose content appears under `path` atomically when the block ends.

    For files written piece by piece (a plan.json of a million jobs is never one string). An
    exception inside the block leaves `path` as it was and removes the temp file; a failed
    write is `OutputWriteError` as in `write_bytes_atomic`. Unlike the one-shot writers it
    replaces an earlier file by default: a streamed file is regenerated output.
    """
    try:
        with _open_atomic(path, "w", overwrite=overwrite, mode=mode, fsync=fsync) as handle:
            yield handle
    except (OutputExistsError, OutputWriteError):
        raise
    except OSError as exc:
        raise _write_error(path, exc) from None


@contextlib.contextmanager
def _open_atomic(
    path: Path, how: str, *, overwrite: bool, mode: int | None, fsync: bool
) -> Iterator[Any]:
    dir_fd = open_directory(path.parent, create=True, naming=path)
    try:
        with _open_in(dir_fd, path, how, overwrite=overwrite, mode=mode, fsync=fsync) as handle:
            yield handle
    finally:
        os.close(dir_fd)


@contextlib.contextmanager
def _open_in(
    dir_fd: int, path: Path, how: str, *, overwrite: bool, mode: int | None, fsync: bool
) -> Iterator[Any]:
    """The temp file of `path` in the directory held by `dir_fd`, published when done."""
    tmp = f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
    # Created with 0666 and the umask of this moment, as an ordinary open() would (mkstemp's
    # 0600 would hide results from a team sharing the directory); an explicit `mode` is
    # exact and set before any byte is written, so a secret is never readable under a
    # wider mode. Every step names the file relative to `dir_fd`: a link swapped in for
    # the directory after it was opened cannot redirect the temp file, the rename or link.
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(tmp, flags, 0o666, dir_fd=dir_fd)
    try:
        encoding = None if "b" in how else "utf-8"
        with os.fdopen(fd, how, encoding=encoding) as handle:
            if mode is not None:
                os.fchmod(handle.fileno(), mode)
            yield handle
            handle.flush()
            if fsync:
                os.fsync(handle.fileno())
        _publish(tmp, path, dir_fd, overwrite=overwrite)
        if fsync:
            os.fsync(dir_fd)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=dir_fd)


def _publish(tmp: str, path: Path, dir_fd: int, *, overwrite: bool) -> None:
    """Give the finished temp file its name: a rename, or a hard link that never replaces."""
    if overwrite:
        os.replace(tmp, path.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        return
    try:
        os.link(tmp, path.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except FileExistsError:
        raise OutputExistsError(f"{path} already exists; refusing to overwrite it") from None


def write_text_atomic(
    path: Path,
    text: str,
    *,
    overwrite: bool = False,
    mode: int | None = None,
    fsync: bool = True,
) -> Path:
    """Write `text` (UTF-8) to `path` atomically; see `write_bytes_atomic`."""
    return write_bytes_atomic(
        path, text.encode("utf-8"), overwrite=overwrite, mode=mode, fsync=fsync
    )


def write_json_atomic(
    path: Path, data: Any, *, overwrite: bool = False, mode: int | None = None
) -> Path:
    """Write `data` as strict JSON (no NaN/Infinity, keys in order) atomically."""
    text = json.dumps(data, indent=2, allow_nan=False) + "\n"
    return write_text_atomic(path, text, overwrite=overwrite, mode=mode)


def create_run_dir(parent: Path, name: str, *, root: Path | None = None, mode: int = 0o777) -> Path:
    """Create a fresh directory `parent/name` (`mode`, less the umask), never reusing one.

    When `name` is taken (two runs in the same second, or planted by someone else), `-1`,
    `-2`, ... is appended. With `root`, no directory between `root` and `parent` may be a
    symbolic link (`paths.make_dirs_inside`).
    """
    try:
        if root is None:
            parent.mkdir(parents=True, exist_ok=True)
        else:
            make_dirs_inside(parent, root)
        for attempt in range(1000):
            candidate = parent / (name if attempt == 0 else f"{name}-{attempt}")
            try:
                candidate.mkdir(mode=mode)
            except FileExistsError:
                continue
            return candidate
    except OSError as exc:  # unwritable, read-only or a file in the way: the user's path
        raise UsageError(
            f"cannot create a run directory under {parent}: {exc.strerror or exc}"
        ) from None
    raise OutputExistsError(f"could not create a fresh run directory for {name!r} under {parent}")
