"""Before a resume: trials a previous attempt left in flight (`aorta.runner.ownership`).

A driver killed mid-trial leaves the trial's owner record behind. Its trial may still be
running in a process that outlived the driver, writing `trial_<id>.json` and `.log`; a resume
that re-ran it would race that process for the same files. So, under the run lock and before
anything runs, every record left in the run directory is judged: a live process on this host
stops the resume (one line naming the trial and PID; exit 2), a record from another host stops
it too (this host cannot look at that one's processes), and a dead one is removed so that
its trial runs again. A record whose trial has its JSON already is only a leftover.

While the driver itself still runs, it holds the run lock: `busy_message` then names its PID
(written into the lock file) and the trial it is running.
"""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path

from aorta.errors import AortaUsageError
from aorta.runner.ownership import OWNER_SUFFIX, TrialOwner, read_owner, trial_liveness
from aorta.triage.layout import RunDir
from aorta.triage.recipe import Recipe

_OWNER_NAME = re.compile(rf"trial_(\d{{1,9}}){re.escape(OWNER_SUFFIX)}")


class TrialStillRunningError(AortaUsageError):
    """A trial of the run directory is (or may be) still running in another process."""


def settle_trials_in_flight(run_dir: Path, recipe: Recipe) -> list[Path]:
    """Judge the owner records of `run_dir`'s cells; call it holding the run lock.

    Raises `TrialStillRunningError` for the first trial still owned by a live process on this
    host or started on another host; otherwise removes the records of dead owners (and the
    leftovers of finished trials) and returns their paths: those trials run again.
    """
    removed = []
    for cell in recipe.cells:
        for path in sorted(RunDir(run_dir).cell(cell.name).glob(f"trial_*{OWNER_SUFFIX}")):
            match = _OWNER_NAME.fullmatch(path.name)
            if match is None:
                continue  # not a name aorta gives a record
            trial_id = int(match.group(1))
            if not (path.parent / f"trial_{trial_id}.json").exists():
                _refuse_if_owned(path, f"cell {cell.name!r}, trial {trial_id}")
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            removed.append(path)
    return removed


def _refuse_if_owned(path: Path, trial: str) -> None:
    try:
        owner = read_owner(path)
    except ValueError as exc:
        raise AortaUsageError(f"{path}: not a trial owner record aorta wrote: {exc}") from None
    live = trial_liveness(owner)
    if live.state == "running":
        raise TrialStillRunningError(
            f"{trial} is still running in process {live.pid} on this host"
            f" (a previous aorta triage run started it; record {path}): wait for it to end"
            f" or stop it (kill {live.pid}), then resume again"
        )
    if live.state == "elsewhere":
        pids = ", ".join(str(p.pid) for p in owner.processes)
        raise TrialStillRunningError(
            f"{trial} was started on host {owner.host!r} (process {pids}); this host cannot"
            f" tell whether it still runs: resume on {owner.host!r}, or delete {path} once"
            " you know it has ended"
        )


def busy_message(run_dir: Path, lock: Path) -> str:
    """The line for a run directory another process holds: its PID and the trial it runs."""
    pid = _lock_holder(lock)
    holder = "" if pid is None else f" (PID {pid})"
    message = f"{run_dir}: another aorta triage process{holder} is working in this run directory"
    if pid is None:
        return message
    owned = [(path, owner) for path, owner in _records(run_dir) if _driven_by(owner, pid)]
    if owned:
        path, owner = owned[0]
        message += f", running cell {path.parent.name!r}, trial {owner.trial_id}"
    return message


def _lock_holder(lock: Path) -> int | None:
    """The PID the holder wrote into the lock file (a few bytes; no links followed)."""
    try:
        fd = os.open(lock, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        text = handle.read(32).decode("ascii", errors="replace").strip()
    return int(text) if text.isdigit() else None


def _records(run_dir: Path) -> list[tuple[Path, TrialOwner]]:
    found = []
    for path in sorted(RunDir(run_dir).cells.glob(f"*/trial_*{OWNER_SUFFIX}")):
        with contextlib.suppress(ValueError):  # only for a message: a bad record is skipped
            found.append((path, read_owner(path)))
    return found


def _driven_by(owner: TrialOwner, pid: int) -> bool:
    return any(p.role == "driver" and p.pid == pid for p in owner.processes)
