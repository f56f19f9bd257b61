"""Trust by ownership, as OpenSSH's StrictModes: who else could have written a path.

State that steers what a tool runs or concludes (a run directory on resume, a session file, a
baseline) is trusted only when the invoking user (or root) owns it and neither group nor others
can write it. Whoever can write a directory can replace any file in it by a rename, so the
directories count as much as the files. Each tool words its own refusal (what the path is, the
`--allow-shared-writable` waiver); the judgement is this one.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

__all__ = [
    "ALLOW_SHARED_WRITABLE_FLAG",
    "ownership_problem",
    "path_ownership_problem",
    "untrusted_path_refusal",
]

# The one waiver flag of all three tools: accept state that others could have written.
ALLOW_SHARED_WRITABLE_FLAG = "--allow-shared-writable"


def ownership_problem(info: os.stat_result, uid: int) -> str | None:
    """Why `info` (an `lstat` result) is not to be trusted by user `uid`, or None.

    A symbolic link is judged as itself: its owner is whoever planted it, and its own mode bits
    mean nothing (always 0777); who may replace it is its directory's business.
    """
    if info.st_uid not in (uid, 0):
        return f"owned by uid {info.st_uid}, not by you (uid {uid}) or root"
    if not stat.S_ISLNK(info.st_mode) and info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        who = "group and others" if info.st_mode & stat.S_IWOTH else "group"
        return f"writable by {who} (mode {stat.S_IMODE(info.st_mode):04o})"
    return None


def path_ownership_problem(path: Path) -> str | None:
    """`ownership_problem` of `path` (not followed) for this process's user; None for a path
    that does not exist (nothing there to trust). Other `lstat` failures raise `OSError`."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    return ownership_problem(info, os.geteuid())


def untrusted_path_refusal(path: Path, *, what: str, risk: str, waiver: str = "") -> str | None:
    """The one-line refusal of `path` (`what` it is, the `risk` of trusting it), or None when
    it may be trusted. The line names the waiver flag, followed by `waiver` (a tool's own words
    on it); a path that cannot be checked gets no waiver text."""
    try:
        problem = path_ownership_problem(path)
    except OSError as exc:
        return f"{path}: cannot check {what}: {exc.strerror}"
    if problem is None:
        return None
    return (
        f"{path}: {what} is {problem}; {risk}; make it yours and not writable by others "
        f"(chmod go-w), or pass {ALLOW_SHARED_WRITABLE_FLAG}{waiver}"
    )
