"""Atomic file writes: temp file in the same directory, fsync, then rename.

A reader never sees a half-written artifact; a crash leaves at most a stray temp file.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from oellm_autoexp.errors import OutputWriteError


def write_text_atomic(
    path: Path, text: str, *, mode: int | None = None, fsync: bool = True
) -> Path:
    """Write `text` to `path` atomically (replacing an older file of that name).

    `fsync=False` is for batches: the caller syncs once (`os.sync()`) after the last file
    instead of paying one journal commit per file. A failure (ENOSPC, a quota, EROFS) is
    `OutputWriteError`, one line naming `path`; an earlier file of that name stays as it was.
    """
    try:
        with open_text_atomic(path, mode=mode, fsync=fsync) as handle:
            handle.write(text)
    except OutputWriteError:
        raise
    except OSError as exc:
        reason = exc.strerror or str(exc)
        error = OutputWriteError(f"{path}: cannot write: {reason}")
        error.errno = exc.errno
        raise error from None
    return path


@contextlib.contextmanager
def open_text_atomic(
    path: Path, *, mode: int | None = None, fsync: bool = True
) -> Iterator[TextIO]:
    """A text handle whose content replaces `path` atomically when the block ends.

    For files written piece by piece (a plan.json of a million jobs is never one string); an
    exception inside the block leaves `path` as it was and removes the temp file.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            yield handle
            handle.flush()
            if fsync:
                os.fsync(handle.fileno())
        if mode is not None:
            tmp.chmod(mode)
        tmp.replace(path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def write_json_atomic(path: Path, data: Any) -> Path:
    """Write `data` as strict JSON (no NaN/Infinity), keys in insertion order, atomically."""
    return write_text_atomic(path, json.dumps(data, indent=2, allow_nan=False) + "\n")
