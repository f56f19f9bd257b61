"""The one interface the monitor uses to talk to SLURM, and the records that cross it.

Two implementations: `oellm_autoexp.slurm.real.RealSlurmClient` (the SLURM commands) and
`oellm_autoexp.slurm.fake.FakeSlurmClient` (scripted timelines for fault-injection tests).

Job ids are strings. An array task is tracked on its own under SLURM's display id
``<array_job_id>_<task_id>``; `query` always answers per task, also while SLURM still shows the
pending tasks of an array as one collapsed record.
"""

from __future__ import annotations

import abc
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from oellm_autoexp.errors import AutoexpRunError, AutoexpUsageError

# SLURM job states (long names, as squeue --json / scontrol print them).
ACTIVE_STATES = frozenset(
    {
        "PENDING",
        "CONFIGURING",
        "RUNNING",
        "COMPLETING",
        "SUSPENDED",
        "REQUEUED",
        "RESIZING",
        "STAGE_OUT",
        "SIGNALING",
        "REQUEUE_HOLD",
        "REQUEUE_FED",
        "RESV_DEL_HOLD",
        "STOPPED",
    }
)
TERMINAL_STATES = frozenset(
    {
        "COMPLETED",
        "FAILED",
        "CANCELLED",
        "TIMEOUT",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
        "PREEMPTED",
        "BOOT_FAIL",
        "DEADLINE",
        "SPECIAL_EXIT",
        "REVOKED",
    }
)


_Job = TypeVar("_Job")


class SlurmNotInstalledError(AutoexpUsageError):
    """A SLURM command is not on PATH (exit code 2: the user runs us on the wrong machine)."""


class SubmissionError(AutoexpRunError):
    """sbatch refused the job; the message carries sbatch's stderr (exit code 1)."""


class SlurmCommandError(AutoexpRunError):
    """A SLURM command kept failing after all retries (controller down, timeouts).

    The monitor treats this as "no news", never as a job failure.
    """


@dataclass(frozen=True)
class SubmitRequest:
    """One sbatch call: a rendered script, optionally as an array, plus extra sbatch options.

    `comment` is stored by slurmctld with the job; the monitor puts a submission token there so
    that a submission whose job id was never recorded (crash right after sbatch) can be found
    again in `squeue`.
    """

    script: Path
    job_name: str
    array: str | None = None
    comment: str | None = None
    extra_args: tuple[str, ...] = ()
    # `slurm.submit_cmd`: the command line `--dry-run` and `--test-only` show, used for real too
    submit_cmd: str = "sbatch"


@dataclass(frozen=True)
class JobInfo:
    """SLURM's view of one job or array task at one poll."""

    job_id: str
    state: str
    reason: str = ""
    name: str = ""
    comment: str = ""
    exit_code: int | None = None
    signal: int | None = None
    time_limit_s: int | None = None
    start_time: float | None = None
    end_time: float | None = None
    array_job_id: str | None = None
    array_task_id: int | None = None
    nodes: str = ""  # the hostlist the job ran on (``gpu[01-04]``); empty before it starts

    @property
    def terminal(self) -> bool:
        """Whether SLURM is done with the job (it will not run again unless resubmitted)."""
        return self.state in TERMINAL_STATES


@dataclass
class QueryResult:
    """The answer of one poll: jobs SLURM knows, and the asked-for ids it no longer knows."""

    jobs: dict[str, JobInfo] = field(default_factory=dict)
    unknown: set[str] = field(default_factory=set)


class SlurmClient(abc.ABC):
    """submit / query / cancel / show; `calls` counts the SLURM commands issued, per command."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()

    @abc.abstractmethod
    def submit(self, request: SubmitRequest) -> str:
        """Submit `request`; return the job id (for an array: the array's job id)."""

    @abc.abstractmethod
    def query(self, job_ids: Iterable[str]) -> QueryResult:
        """The state of every id in `job_ids` in one round trip (one squeue, at most one sacct).

        Array ids of the form ``A_T`` are answered per task. Ids SLURM has forgotten (finished
        longer ago than MinJobAge, no accounting) are listed in `unknown`.
        """

    @abc.abstractmethod
    def find_by_comment(self, comments: Iterable[str]) -> dict[str, list[JobInfo]]:
        """Jobs whose comment is one of `comments` (one squeue), for reconciling lost submits."""

    @abc.abstractmethod
    def cancel(self, job_ids: Iterable[str]) -> None:
        """Cancel the jobs (one scancel for all of them)."""

    @abc.abstractmethod
    def show(self, job_id: str) -> Mapping[str, str]:
        """``scontrol show job`` as key/value pairs (for `status --details`, not for polling)."""

    def exclude_nodes(self, job_ids: Iterable[str], nodes: str) -> list[str]:
        """Set the excluded nodes (a hostlist) of queued jobs; return the ids SLURM updated.

        A job that started meanwhile is not updated and not an error. The default updates
        nothing: a client without a queue (``--local``) has no waiting job to change.
        """
        del job_ids, nodes
        return []


def expand_array_spec(spec: str) -> list[int]:
    """Task ids of a SLURM array spec such as ``0-3``, ``1,4,7-9:2`` or ``0-99%10``."""
    body = spec.split("%", 1)[0]
    tasks: list[int] = []
    for raw in body.split(","):
        item, _, step_text = raw.strip().partition(":")
        if not item:
            continue
        step = int(step_text) if step_text else 1
        if "-" in item:
            lo, hi = item.split("-", 1)
            tasks.extend(range(int(lo), int(hi) + 1, step))
        else:
            tasks.append(int(item))
    return tasks


def dependency_targets(
    extra_args: Iterable[str], task: int | None, jobs: Mapping[str, _Job]
) -> list[tuple[str, _Job]]:
    """What a submission's ``--dependency=kind:id[:id][,kind:id]`` waits for, among `jobs`.

    For the clients that stand in for slurmctld (fake, local): each term's kind (``afterok``,
    ``afterany``, ``aftercorr``) with the job it names. An array job id names all of its tasks;
    ``aftercorr:<array>`` names the task with this task's index. Ids not in `jobs` are ignored.
    """
    terms = [a.partition("=")[2] for a in extra_args if a.startswith("--dependency=")]
    found: list[tuple[str, _Job]] = []
    for term in ",".join(terms).split(","):
        kind, _, ids = term.partition(":")
        for named in filter(None, ids.split(":")):
            wanted = f"{named}_{task}" if kind == "aftercorr" else named
            if wanted in jobs:
                found.append((kind, jobs[wanted]))
                continue
            found += [(kind, job) for key, job in jobs.items() if key.startswith(f"{wanted}_")]
    return found
