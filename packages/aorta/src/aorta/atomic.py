"""aorta's mode policy over `toolkit_core.atomic`: owner-only result files by default.

Most of a run directory holds the trials' environment and command lines, which may carry
secrets that redaction missed, so files are 0600 and run directories 0700; with
`AORTA_GROUP_READABLE=1` (docs/security.md) the group may read them (0640/0750). Reports meant
for people (matrix.md, the plot) are `shared`: readable by all, never writable by group or
others, so a resume can trust what it reads back (`strict_modes`). The writing itself (temp
file, fsync, hard link or rename, fsync of the directory) is `toolkit_core.atomic`'s.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from aorta.errors import AortaUsageError, OutputExistsError
from toolkit_core import atomic as _core
from toolkit_core.errors import UsageError


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
    """The mode of files that hold environments, argv or recipes: 0600, 0640 for a group run."""
    return 0o640 if _group_readable() else 0o600


def shared_file_mode() -> int:
    """The mode of reports meant for people: 0644 less the umask (never group/other-writable)."""
    return 0o644 & ~_UMASK


def run_dir_mode() -> int:
    """A run directory is the owner's (0700; 0750 with `AORTA_GROUP_READABLE=1`)."""
    return 0o750 if _group_readable() else 0o700


def write_bytes_atomic(
    path: Path, data: bytes, *, overwrite: bool = False, shared: bool = False
) -> Path:
    """`toolkit_core.atomic.write_bytes_atomic` with mode `private_file_mode()`
    (`shared_file_mode()` with `shared`)."""
    mode = shared_file_mode() if shared else private_file_mode()
    return _core.write_bytes_atomic(path, data, overwrite=overwrite, mode=mode)


def write_text_atomic(
    path: Path, text: str, *, overwrite: bool = False, shared: bool = False
) -> Path:
    """Write `text` (UTF-8) to `path` atomically; see `write_bytes_atomic`."""
    return write_bytes_atomic(path, text.encode("utf-8"), overwrite=overwrite, shared=shared)


def write_json_atomic(path: Path, data: Any, *, overwrite: bool = False) -> Path:
    """Write `data` as strict JSON (no NaN/Infinity) atomically, owner-only."""
    return _core.write_json_atomic(path, data, overwrite=overwrite, mode=private_file_mode())


def create_run_dir(parent: Path, name: str, *, root: Path | None = None) -> Path:
    """`toolkit_core.atomic.create_run_dir`, the directory created `run_dir_mode()`.

    A path that cannot hold it (a file in the way, a symbolic link below `root`, no
    permission) is a one-line `AortaUsageError`, as every aorta usage error is.
    """
    try:
        return _core.create_run_dir(parent, name, root=root, mode=run_dir_mode())
    except OutputExistsError:
        raise
    except UsageError as exc:
        raise AortaUsageError(str(exc)) from None
