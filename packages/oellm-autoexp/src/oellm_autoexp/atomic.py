"""oellm-autoexp's mode policy over `toolkit_core.atomic`: every file it writes is owner-only.

Plans, scripts and the monitor's state hold command lines and environments that may carry
secrets, so files are 0600 unless a caller names another mode (a run script's 0700). Files
here are regenerated output: a write replaces an earlier file of that name. A failed write
(ENOSPC, a quota, EROFS) is `OutputWriteError`, one line naming the path.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from oellm_autoexp.errors import OutputWriteError
from toolkit_core import atomic as _core
from toolkit_core import errors as _core_errors

PRIVATE_FILE_MODE = 0o600


@contextlib.contextmanager
def _as_autoexp_error() -> Iterator[None]:
    # The monitor and the CLI catch oellm-autoexp's own `OutputWriteError` (an `AutoexpError`:
    # exit 2, one line); the errno still tells ENOSPC from EACCES.
    try:
        yield
    except _core_errors.OutputWriteError as exc:
        error = OutputWriteError(str(exc))
        error.errno = exc.errno
        raise error from None


def write_text_atomic(
    path: Path,
    text: str,
    *,
    overwrite: bool = True,
    mode: int | None = PRIVATE_FILE_MODE,
    fsync: bool = True,
) -> Path:
    """Write `text` to `path` atomically, owner-only unless `mode` says otherwise.

    `fsync=False` is for batches: the caller syncs once (`os.sync()`) after the last file.
    """
    with _as_autoexp_error():
        return _core.write_text_atomic(path, text, overwrite=overwrite, mode=mode, fsync=fsync)


@contextlib.contextmanager
def open_text_atomic(
    path: Path, *, mode: int | None = PRIVATE_FILE_MODE, fsync: bool = True
) -> Iterator[TextIO]:
    """A text handle whose content replaces `path` atomically when the block ends."""
    with _as_autoexp_error(), _core.open_text_atomic(path, mode=mode, fsync=fsync) as handle:
        yield handle


def write_json_atomic(
    path: Path, data: Any, *, overwrite: bool = True, mode: int | None = PRIVATE_FILE_MODE
) -> Path:
    """Write `data` as strict JSON (no NaN/Infinity), keys in insertion order, atomically."""
    text = json.dumps(data, indent=2, allow_nan=False) + "\n"
    return write_text_atomic(path, text, overwrite=overwrite, mode=mode)
