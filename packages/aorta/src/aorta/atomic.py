"""Atomic, never-overwriting result files.

Every artifact aorta writes goes through here: the bytes land in a temporary file in the same
directory, are fsynced, and only then appear under their final name. A reader never sees a
half-written file, and a crash leaves at most a stray temp file, never a truncated result.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from aorta.errors import AortaUsageError, OutputExistsError, OutputWriteError


def _process_umask() -> int:
    # os.umask can only be read by setting it; done once, at import, before any thread of ours
    # runs, so no file is ever created under the temporary 0 value.
    mask = os.umask(0)
    os.umask(mask)
    return mask


# mkstemp creates 0600 files; results are meant to be read by the whole team (a shared
# cluster directory), so they get the mode an ordinary open() would give: 0666 minus umask.
_FILE_MODE = 0o666 & ~_process_umask()


def write_bytes_atomic(path: Path, data: bytes, *, overwrite: bool = False) -> Path:
    """Write `data` to `path` atomically.

    With `overwrite=False` (the default) an existing `path` is never replaced: the final step
    is a hard link, which fails if the name exists, and `OutputExistsError` is raised. Any
    other failure (a full disk, a quota, a parent that is a file) is `OutputWriteError`, one
    line naming `path`; an earlier file under that name is left as it was.
    """
    try:
        return _write_bytes_atomic(path, data, overwrite=overwrite)
    except OutputExistsError:
        raise
    except OSError as exc:
        reason = exc.strerror or str(exc)
        error = OutputWriteError(f"{path}: cannot write: {reason}")
        error.errno = exc.errno  # still tells ENOSPC from EACCES to code that asks
        raise error from None


def _write_bytes_atomic(path: Path, data: bytes, *, overwrite: bool) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), _FILE_MODE)
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if overwrite:
            tmp.replace(path)
        else:
            try:
                os.link(tmp, path)
            except FileExistsError:
                raise OutputExistsError(
                    f"{path} already exists; refusing to overwrite it"
                ) from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    return path


def write_text_atomic(path: Path, text: str, *, overwrite: bool = False) -> Path:
    """Write `text` (UTF-8) to `path` atomically; see `write_bytes_atomic`."""
    return write_bytes_atomic(path, text.encode("utf-8"), overwrite=overwrite)


def write_json_atomic(path: Path, data: Any, *, overwrite: bool = False) -> Path:
    """Write `data` as strict JSON (no NaN/Infinity) atomically; see `write_text_atomic`."""
    text = json.dumps(data, indent=2, sort_keys=False, allow_nan=False) + "\n"
    return write_text_atomic(path, text, overwrite=overwrite)


def make_dirs_without_links(root: Path, path: Path) -> None:
    """`mkdir -p path`, refusing (one-line `AortaUsageError`) a symbolic link below `root`.

    Output trees live in shared directories: a link planted at `<out>/<ticket>/<workload>`
    would make aorta write wherever it points. Each component is checked before anything is
    created inside it; `root` itself (the user's choice) may be a link.
    """
    try:
        parts = path.relative_to(root).parts
    except ValueError:
        raise AortaUsageError(f"{path} is not inside {root}") from None
    root.mkdir(parents=True, exist_ok=True)
    here = root
    for part in parts:
        here = here / part
        with contextlib.suppress(FileExistsError):
            here.mkdir()  # mkdir never follows a link at its last component
        if here.is_symlink():
            raise AortaUsageError(
                f"{here} is a symbolic link; refusing to write through it (remove it)"
            )


def create_run_dir(parent: Path, name: str, *, root: Path | None = None) -> Path:
    """Create a fresh directory `parent/name`, never reusing an existing one.

    When `name` is taken (two runs in the same second), `-1`, `-2`, ... is appended. With
    `root`, no directory between `root` and `parent` may be a symbolic link
    (`make_dirs_without_links`).
    """
    try:
        if root is None:
            parent.mkdir(parents=True, exist_ok=True)
        else:
            make_dirs_without_links(root, parent)
        for attempt in range(1000):
            candidate = parent / (name if attempt == 0 else f"{name}-{attempt}")
            try:
                candidate.mkdir()
            except FileExistsError:
                continue
            return candidate
    except OSError as exc:  # unwritable, read-only or a file in the way: the user's path
        raise AortaUsageError(
            f"cannot create a run directory under {parent}: {exc.strerror or exc}"
        ) from None
    raise OutputExistsError(f"could not create a fresh run directory for {name!r} under {parent}")
