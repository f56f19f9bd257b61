"""Baselines someone else could have written are not compared against (StrictModes).

A baseline decides whether a kernel passes: whoever can rewrite one can make a changed kernel
pass. So before `check` (and the hooks' comparison) reads a baseline, the baselines directory
and the file must be owned by the invoking user (or root) and writable by no one else
(`toolkit_core.ownership`, shared with aorta and oellm-autoexp). A path that fails is one line
naming it, exit 2. `--allow-shared-writable` (or `TRITON_INVARIANCE_ALLOW_SHARED_WRITABLE=1`
where there is no command line: the hooks inside a test run) accepts the risk, for a
baselines directory a team deliberately shares by group write.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from toolkit_core.ownership import ALLOW_SHARED_WRITABLE_FLAG, untrusted_path_refusal
from triton_invariance.errors import InvarianceUsageError

__all__ = [
    "ALLOW_ENV",
    "ALLOW_FLAG",
    "SharedBaselinesError",
    "refuse_shared_baselines",
    "shared_writable_allowed",
]

ALLOW_FLAG = ALLOW_SHARED_WRITABLE_FLAG
ALLOW_ENV = "TRITON_INVARIANCE_ALLOW_SHARED_WRITABLE"


class SharedBaselinesError(InvarianceUsageError):
    """A baselines directory or file is another user's or writable by others (exit 2)."""


def shared_writable_allowed() -> bool:
    """True when `TRITON_INVARIANCE_ALLOW_SHARED_WRITABLE=1` waives the check."""
    return os.environ.get(ALLOW_ENV, "").strip() == "1"


def refuse_shared_baselines(directory: Path, files: Iterable[Path] = ()) -> None:
    """`SharedBaselinesError` for the first of `directory` and `files` that this user (or root)
    does not own or that group or others can write; missing paths pass. Waived by the env."""
    if shared_writable_allowed():
        return
    for path, what in [(directory, "the baselines directory")] + [
        (file, "a baseline file") for file in files
    ]:
        refusal = untrusted_path_refusal(
            path,
            what=what,
            risk="someone else could make a changed kernel pass",
            waiver=f" ({ALLOW_ENV}=1) to accept that risk",
        )
        if refusal is not None:
            raise SharedBaselinesError(refusal)
