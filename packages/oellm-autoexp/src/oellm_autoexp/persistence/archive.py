"""Pack a session's logs into a new tar.gz under ``<base_output_dir>/archive/`` (never replaced)."""

from __future__ import annotations

import tarfile
from collections.abc import Sequence
from pathlib import Path

from toolkit_core.timestamps import dir_stamp, utc_now


def archive_logs(base: Path, session_id: str, logs: Sequence[Path]) -> Path:
    """Pack `logs` into a new ``archive/<session>-<UTC time>.tar.gz``; its path.

    Written as ``.partial`` and renamed when complete; a second archive in the same second gets
    a numeric suffix instead of overwriting the first.
    """
    folder = base / "archive"
    folder.mkdir(parents=True, exist_ok=True)
    stamp = dir_stamp(utc_now())
    target = folder / f"{session_id}-{stamp}.tar.gz"
    suffix = 0
    while target.exists():
        suffix += 1
        target = folder / f"{session_id}-{stamp}-{suffix}.tar.gz"
    partial = target.with_suffix(".partial")
    with tarfile.open(partial, "x:gz") as tar:
        for path in logs:
            tar.add(path, arcname=path.name)
    partial.rename(target)
    return target
