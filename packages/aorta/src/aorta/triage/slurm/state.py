"""`<run dir>/slurm/`: what the SLURM executor submitted, read and written without SLURM.

    slurm/state.json         submissions (oellm-autoexp session id, task file), finished flag
    slurm/tasks-<n>.json     submission n's array: task index -> [cell, trial id]
    slurm/autoexp-<n>.yaml   the oellm-autoexp config submission n was planned from
    slurm/submission-<n>/    its plan, sbatch script and task logs (oellm-autoexp's layout)
    slurm/sessions/          oellm-autoexp's session files (restarts, SLURM ids, outcomes)
    slurm/attempts.jsonl     one line per task start: which SLURM job ran (or skipped) a trial

A run directory may come from someone else: everything read back is checked (`SlurmStateError`
is one line naming the file). Nothing here imports oellm-autoexp, so `aorta triage matrix`
and the trial tasks stay light.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aorta.atomic import write_json_atomic
from aorta.errors import AortaUsageError
from aorta.triage.layout import RunDir
from toolkit_core.timestamps import iso_stamp

STATE_NAME = "state.json"
ATTEMPTS_NAME = "attempts.jsonl"
_MAX_TASKS = 1_000_000


class SlurmStateError(AortaUsageError):
    """A run directory's `slurm/` record is missing or not what aorta wrote."""


@dataclass(frozen=True)
class Submission:
    """One oellm-autoexp plan + session: an array of trial tasks."""

    number: int
    session_id: str | None  # None until oellm-autoexp created the session
    tasks: tuple[tuple[str, int], ...]  # task index -> (cell, trial id)

    def tasks_file(self, run_dir: Path) -> Path:
        """Where this submission's task table lies."""
        return slurm_dir(run_dir) / f"tasks-{self.number}.json"


@dataclass
class SlurmState:
    """Every submission of a run, and whether the driver saw the matrix through."""

    submissions: list[Submission] = field(default_factory=list)
    finished: bool = False

    def to_dict(self) -> dict[str, Any]:
        """The JSON form of `state.json` (task tables live in their own files)."""
        return {
            "version": 1,
            "finished": self.finished,
            "submissions": [
                {"number": s.number, "session_id": s.session_id, "tasks": len(s.tasks)}
                for s in self.submissions
            ],
        }


def slurm_dir(run_dir: Path) -> Path:
    """`<run dir>/slurm`."""
    return RunDir(run_dir).slurm


def sessions_dir(run_dir: Path) -> Path:
    """Where oellm-autoexp keeps this run's session files."""
    return slurm_dir(run_dir) / "sessions"


def is_slurm_run(run_dir: Path) -> bool:
    """Whether the SLURM executor ever recorded anything in `run_dir`."""
    return (slurm_dir(run_dir) / STATE_NAME).is_file()


def _load_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SlurmStateError(f"{path}: unreadable: {' '.join(str(exc).split())[:200]}") from None


def _tasks(path: Path, cells: dict[str, int]) -> tuple[tuple[str, int], ...]:
    raw = _load_json(path)
    if not isinstance(raw, list) or len(raw) > _MAX_TASKS:
        raise SlurmStateError(f"{path}: expected a list of [cell, trial id] pairs")
    tasks = []
    for i, item in enumerate(raw):
        ok = isinstance(item, list) and len(item) == 2
        cell, trial = (item[0], item[1]) if ok else (None, None)
        if not (isinstance(cell, str) and cell in cells and type(trial) is int):
            raise SlurmStateError(f"{path}: [{i}]: expected [cell of the recipe, trial id]")
        if not 0 <= trial < cells[cell]:
            raise SlurmStateError(f"{path}: [{i}]: trial {trial} outside 0..{cells[cell] - 1}")
        tasks.append((cell, trial))
    return tuple(tasks)


def load_state(run_dir: Path, cells: dict[str, int]) -> SlurmState:
    """`state.json` and its task tables; `cells` maps the recipe's cells to their trials."""
    path = slurm_dir(run_dir) / STATE_NAME
    data = _load_json(path)
    if not isinstance(data, dict) or data.get("version") != 1:
        raise SlurmStateError(f"{path}: not a SLURM executor record aorta wrote (version 1)")
    state = SlurmState(finished=data.get("finished") is True)
    raw = data.get("submissions")
    if not isinstance(raw, list):
        raise SlurmStateError(f"{path}: submissions: expected a list")
    for i, item in enumerate(raw):
        number = item.get("number") if isinstance(item, dict) else None
        sid = item.get("session_id") if isinstance(item, dict) else None
        if type(number) is not int or not (sid is None or _safe_id(sid)):
            raise SlurmStateError(f"{path}: submissions[{i}]: expected a number and session id")
        probe = Submission(number, sid, ())
        tasks = _tasks(probe.tasks_file(run_dir), cells)
        state.submissions.append(Submission(number, sid, tasks))
    return state


def _safe_id(value: object) -> bool:
    return isinstance(value, str) and 0 < len(value) <= 128 and value.replace("-", "").isalnum()


def save_state(run_dir: Path, state: SlurmState) -> None:
    """Write `state.json` atomically."""
    write_json_atomic(slurm_dir(run_dir) / STATE_NAME, state.to_dict(), overwrite=True)


def new_submission(
    run_dir: Path, state: SlurmState, tasks: Sequence[tuple[str, int]]
) -> Submission:
    """Record the task table of the next submission (before anything is submitted)."""
    number = max((s.number for s in state.submissions), default=0) + 1
    submission = Submission(number, None, tuple(tasks))
    write_json_atomic(submission.tasks_file(run_dir), [list(t) for t in tasks])
    return submission


def record_attempt(run_dir: Path, cell: str, trial: int, *, ran: bool, note: str) -> None:
    """Append one line to `attempts.jsonl`: which SLURM job started this trial, on which node.

    One `write` of one short line on an O_APPEND descriptor: lines from concurrent tasks do
    not interleave. A trial run twice would show two `ran` lines (the tests count them).
    """
    line = {
        "cell": cell,
        "trial": trial,
        "ran": ran,
        "note": note,
        "job": os.environ.get("SLURM_JOB_ID"),
        "array": _array_id(),
        "node": os.environ.get("SLURMD_NODENAME") or os.uname().nodename,
        "at": iso_stamp(datetime.now(UTC)),
    }
    data = (json.dumps(line) + "\n").encode("utf-8")
    path = slurm_dir(run_dir) / ATTEMPTS_NAME
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def _array_id() -> str | None:
    job, task = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
    return f"{job}_{task}" if job and task else None


def read_attempts(run_dir: Path) -> list[dict[str, Any]]:
    """Every line of `attempts.jsonl` that parses (a torn last line is skipped)."""
    path = slurm_dir(run_dir) / ATTEMPTS_NAME
    if not path.exists():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict):
            rows.append(row)
    return rows
