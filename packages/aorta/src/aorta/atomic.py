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


_UMASK = _process_umask()

# Set to 1 when a run directory is meant to be read by the user's group (docs/security.md).
GROUP_READABLE_VARIABLE = "AORTA_GROUP_READABLE"


def _group_readable() -> bool:
    return os.environ.get(GROUP_READABLE_VARIABLE, "") == "1"


def private_file_mode() -> int:
    """The mode of files that hold environments, argv or recipes: 0600, 0640 for a group run.

    Most of a run directory holds the trials' environment and command lines, which may carry
    secrets that redaction missed; only the owner (and with `AORTA_GROUP_READABLE=1`, the
    group) reads them.
    """
    return 0o640 if _group_readable() else 0o600


def shared_file_mode() -> int:
    """The mode of reports meant for people (matrix.md, the plot): what an ordinary open()
    gives (0666 minus umask), but never writable by group or others, so a resume can trust
    what it reads back (`strict_modes`)."""
    return 0o644 & ~_UMASK


def run_dir_mode() -> int:
    """A run directory is the owner's (0700; 0750 with `AORTA_GROUP_READABLE=1`), so what is
    in it is readable by no one else whatever each file's mode."""
    return 0o750 if _group_readable() else 0o700


def write_bytes_atomic(
    path: Path, data: bytes, *, overwrite: bool = False, shared: bool = False
) -> Path:
    """Write `data` to `path` atomically, mode `private_file_mode()` (`shared_file_mode()` with
    `shared`).

    With `overwrite=False` (the default) an existing `path` is never replaced: the final step
    is a hard link, which fails if the name exists, and `OutputExistsError` is raised. Any
    other failure (a full disk, a quota, a parent that is a file) is `OutputWriteError`, one
    line naming `path`; an earlier file under that name is left as it was.
    """
    try:
        mode = shared_file_mode() if shared else private_file_mode()
        return _write_bytes_atomic(path, data, overwrite=overwrite, mode=mode)
    except OutputExistsError:
        raise
    except OSError as exc:
        reason = exc.strerror or str(exc)
        error = OutputWriteError(f"{path}: cannot write: {reason}")
        error.errno = exc.errno  # still tells ENOSPC from EACCES to code that asks
        raise error from None


def _write_bytes_atomic(path: Path, data: bytes, *, overwrite: bool, mode: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), mode)
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


def write_text_atomic(
    path: Path, text: str, *, overwrite: bool = False, shared: bool = False
) -> Path:
    """Write `text` (UTF-8) to `path` atomically; see `write_bytes_atomic`."""
    return write_bytes_atomic(path, text.encode("utf-8"), overwrite=overwrite, shared=shared)


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

    When `name` is taken (two runs in the same second, or planted by someone else), `-1`,
    `-2`, ... is appended; the directory is created `run_dir_mode()`. With
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
                candidate.mkdir(mode=run_dir_mode())
            except FileExistsError:
                continue
            return candidate
    except OSError as exc:  # unwritable, read-only or a file in the way: the user's path
        raise AortaUsageError(
            f"cannot create a run directory under {parent}: {exc.strerror or exc}"
        ) from None
    raise OutputExistsError(f"could not create a fresh run directory for {name!r} under {parent}")
