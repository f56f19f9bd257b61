"""Child processes die with their parent; temporary directories of dead parents are removed.

A `SIGKILL` of `aorta triage run` cannot run any cleanup, so a trial child would keep running,
and a resumed run would race it for the same trial files. On Linux each child asks the kernel
(`prctl(PR_SET_PDEATHSIG, SIGKILL)`) to be killed when the thread that started it dies; elsewhere
there is no equivalent and nothing is set. Temporary directories carry the parent's PID in
their name, so the next run removes those whose parent is gone.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

_PR_SET_PDEATHSIG = 1
CHILD_TMP_PREFIX = "aorta-child-"


def die_with_parent() -> Callable[[], None] | None:
    """A `preexec_fn` that makes the child die with this process (Linux), else None."""
    if not sys.platform.startswith("linux"):
        return None
    # Loaded here, before fork: the child between fork and exec should do as little as possible.
    libc = ctypes.CDLL(None, use_errno=True)
    parent = os.getpid()

    def preexec() -> None:
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os.kill(os.getpid(), signal.SIGKILL)

    return preexec


def child_tmp_prefix() -> str:
    """The `tempfile` prefix of this process's child directories (`aorta-child-<pid>-`)."""
    return f"{CHILD_TMP_PREFIX}{os.getpid()}-"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def remove_orphaned_child_dirs(tmp_root: Path | None = None) -> list[Path]:
    """Remove this user's `aorta-child-<pid>-*` directories whose process is gone.

    A directory of a live process, of another user or without a PID in its name is left alone.
    Returns what was removed.
    """
    root = Path(tmp_root or tempfile.gettempdir())
    removed = []
    for path in root.glob(f"{CHILD_TMP_PREFIX}*-*"):
        pid_text = path.name[len(CHILD_TMP_PREFIX) :].split("-", 1)[0]
        if not pid_text.isdigit() or _alive(int(pid_text)):
            continue
        with contextlib.suppress(OSError):
            if path.is_symlink() or path.lstat().st_uid != os.getuid():
                continue
            shutil.rmtree(path)
            removed.append(path)
    return removed
