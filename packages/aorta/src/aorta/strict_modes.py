"""Trust by ownership, as OpenSSH's StrictModes: state someone else could have written is refused.

A run directory on a shared filesystem can be changed by anyone who can write it. What
`--resume` reads back from it (the recipe, its signature, the SLURM executor's sessions and
task tables) decides what runs, so before any of it is read every one of those paths must be

- owned by the invoking user (or root), and
- writable by no one else: neither group- nor world-writable.

A path that fails is one line naming it and the reason (`SharedStateError`, exit 2). The user
can accept the risk with `--allow-shared-writable` (the caller then skips the check and says
so). Checked with `lstat`: a symbolic link is judged as itself (owned by whoever planted it),
never through its target (`toolkit_core.ownership`, the judgement all three tools share).

Why the directory too, and not only the files: whoever can write a directory can replace any
file in it by a rename, whatever that file's own mode.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from aorta.errors import AortaUsageError
from toolkit_core.ownership import ALLOW_SHARED_WRITABLE_FLAG, untrusted_path_refusal

__all__ = ["SharedStateError", "check_owned_and_private", "refuse_shared_state"]

# A SLURM run holds a handful of files per submission; more than this is not a run aorta wrote.
_MAX_ENTRIES = 100_000

ALLOW_FLAG = ALLOW_SHARED_WRITABLE_FLAG


class SharedStateError(AortaUsageError):
    """State that steers execution is owned by another user or writable by others (exit 2)."""


def check_owned_and_private(path: Path, *, what: str) -> None:
    """Refuse (`SharedStateError`) `path` unless this user or root owns it and no one else can
    write it. A missing path is fine: there is nothing in it to trust."""
    refusal = untrusted_path_refusal(
        path,
        what=what,
        risk="someone else could change what it runs",
        waiver=" to accept that risk",
    )
    if refusal is not None:
        raise SharedStateError(refusal)


def _tree(root: Path) -> Iterator[Path]:
    """`root` and everything below it, links not followed, at most `_MAX_ENTRIES` paths."""
    count = 0
    for top, dirs, files in os.walk(root, followlinks=False):
        for name in (*dirs, *files):
            count += 1
            if count > _MAX_ENTRIES:
                raise SharedStateError(f"{root}: more than {_MAX_ENTRIES} entries; not checked")
            yield Path(top) / name


def refuse_shared_state(run_dir: Path, files: Iterable[str], trees: Iterable[str]) -> None:
    """`check_owned_and_private` for `run_dir`, its `files` and every path in its `trees`
    (relative names): the state a resume of `run_dir` reads before it runs anything."""
    check_owned_and_private(run_dir, what="the run directory")
    for name in files:
        check_owned_and_private(run_dir / name, what="a run file that steers execution")
    for name in trees:
        top = run_dir / name
        check_owned_and_private(top, what="a run folder that steers execution")
        if top.is_dir() and not top.is_symlink():
            for path in _tree(top):
                check_owned_and_private(path, what="a run file that steers execution")
