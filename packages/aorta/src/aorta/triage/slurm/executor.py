"""`SlurmExecutor`: submit the matrix's trials through oellm-autoexp and watch them.

The lifecycle (`aorta.triage.lifecycle`) creates the run directory, probes the host and writes
the matrix as for a local run; this executor probes each environment on the submitting host,
records a submission in `slurm/` and submits one job array through `oellm_autoexp.api`
(plan -> submit). Unless detached, it then polls (`api.monitor_once`: one squeue per poll,
restarts by policy) and reads the trial files as they appear, reporting progress, until every
trial is final.

On a resume it re-attaches to the recorded sessions (oellm-autoexp reconciles them with
SLURM first) and submits a new array only for trials that no session holds any more. A trial
whose resubmission cap is spent becomes an `error` trial (`write_lost_trial`); a trial whose
JSON is on disk is final whatever SLURM says of its task.

An adaptive run (`adaptive: {max_trials: N}`) is submitted in rounds: one array per round,
holding trial k of every cell the rule keeps open (`aorta.triage.run.adaptive.due_round`,
replayed from the trial files at every poll). Once all of round k is on disk the next poll
submits round k + 1 for the cells still open; a round in flight when the driver stopped is
waited for on a resume, never resubmitted (its tasks are in a recorded session).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import yaml

from aorta.atomic import write_text_atomic
from aorta.errors import AortaUsageError
from aorta.runner.models import TrialResult
from aorta.triage.layout import RunDir
from aorta.triage.recipe import Recipe
from aorta.triage.recipe.executor import SlurmSettings
from aorta.triage.report.reporting import CellPlan, MatrixReporter
from aorta.triage.run.adaptive import due_round
from aorta.triage.run.assemble import cell_stats, stop_rule_met
from aorta.triage.run.executor import Execution, RunContext
from aorta.triage.run.local import cell_request
from aorta.triage.run.manifest import ExecutorName
from aorta.triage.run.rundir import trials_on_disk
from aorta.triage.slurm.config import autoexp_config
from aorta.triage.slurm.state import (
    SlurmState,
    Submission,
    is_slurm_run,
    load_state,
    new_submission,
    save_state,
    sessions_dir,
    slurm_dir,
)
from aorta.triage.slurm.trials import (
    JobRow,
    Standing,
    TrialState,
    counts,
    round_robin_tasks,
    trial_states,
    write_lost_trial,
)

if TYPE_CHECKING:
    from oellm_autoexp.persistence import SessionStore
    from oellm_autoexp.slurm.client import SlurmClient


@dataclass(frozen=True)
class CellQueue:
    """One cell's trials on SLURM: how many wait, run and are done; failures so far.

    A stopped cell's remaining trials (stop rule, adaptive decision) and an adaptive run's
    later rounds are in none of the counts: they are not queued, and may never run.
    """

    name: str
    pending: int
    running: int
    done: int
    failed: int
    errors: int


class SlurmProgress(Protocol):
    """What the driver says on top of the matrix events: the queue, and SLURM's news."""

    def queue(self, cells: Sequence[CellQueue]) -> None:
        """The cells' queue counts changed."""

    def notice(self, message: str) -> None:
        """A line from oellm-autoexp (a submission, a restart, a warning)."""


class NullProgress:
    """Says nothing."""

    def queue(self, cells: Sequence[CellQueue]) -> None:
        """Ignore."""

    def notice(self, message: str) -> None:
        """Ignore."""


class _AutoexpReporter:
    """oellm-autoexp's `Reporter`, forwarded to the driver's progress."""

    def __init__(self, progress: SlurmProgress) -> None:
        self.progress = progress

    def info(self, message: str) -> None:
        self.progress.notice(message)

    def warning(self, message: str) -> None:
        self.progress.notice(f"warning: {message}")

    def action(self, action: Any) -> None:
        return None


@dataclass
class _Driver:
    recipe: Recipe
    settings: SlurmSettings
    run_dir: Path
    client: SlurmClient
    reporter: MatrixReporter
    progress: SlurmProgress
    sleep: Callable[[float], None]
    state: SlurmState = field(default_factory=SlurmState)
    clock: Callable[[], float] | None = None  # oellm-autoexp's monitor clock (tests: fake)
    reported: dict[str, set[int]] = field(default_factory=dict)  # trial ids already reported
    finished_cells: set[str] = field(default_factory=set)
    last_queue: tuple[CellQueue, ...] = ()
    resubmissions: dict[tuple[str, int], int] = field(default_factory=dict)  # as last said
    parsed: dict[Path, TrialResult] = field(default_factory=dict)  # trial files read so far

    def session_ids(self) -> list[str]:
        return _session_ids(self.run_dir, self.state)

    def observe(self) -> tuple[list[TrialState], dict[str, list[TrialResult]]]:
        return observe(
            self.recipe, self.run_dir, self.state, self.settings.max_resubmits, self.parsed
        )

    # -- actions --------------------------------------------------------------------------

    def submit(self, trials: Sequence[tuple[str, int]]) -> None:
        """Plan and submit one array of `trials` (round order) through oellm-autoexp."""
        from oellm_autoexp import api
        from oellm_autoexp.errors import AutoexpError

        tasks = round_robin_tasks(self.recipe, trials)
        submission = new_submission(self.run_dir, self.state, tasks)
        config = autoexp_config(self.settings, self.run_dir, submission.number, len(tasks))
        path = slurm_dir(self.run_dir) / f"autoexp-{submission.number}.yaml"
        write_text_atomic(path, yaml.safe_dump(config, sort_keys=False))
        say = _AutoexpReporter(self.progress)
        store = _store(self.run_dir)
        before = set(store.ids()) if sessions_dir(self.run_dir).exists() else set()
        try:
            planned = api.plan(path, reporter=say)
        except AutoexpError as exc:  # settings SLURM's own syntax checks let through
            self._record(Submission(submission.number, None, tuple(tasks)))
            raise AortaUsageError(
                f"{path}: oellm-autoexp cannot plan the trial array: {' '.join(str(exc).split())}"
            ) from None
        try:
            result = api.submit(planned, self.client, reporter=say)
            session_id: str | None = result.session.session_id
        except AutoexpError as exc:
            # The session (if any) is recorded, so a resume can see what reached SLURM.
            created = sorted(set(store.ids()) - before)
            self._record(
                Submission(submission.number, created[0] if created else None, tuple(tasks))
            )
            raise AortaUsageError(
                f"{self.run_dir}: SLURM refused the trial array ({len(tasks)} task(s)); nothing "
                f"was submitted: {' '.join(str(exc).split())}"
            ) from None
        self._record(Submission(submission.number, session_id, tuple(tasks)))

    def _record(self, submission: Submission) -> None:
        self.state.submissions.append(submission)
        save_state(self.run_dir, self.state)

    def poll(self) -> None:
        """One oellm-autoexp monitor pass over the recorded sessions (submit, observe, restart)."""
        from oellm_autoexp import api

        ids = self.session_ids()
        if ids:
            with _one_line(self.run_dir):
                api.monitor_once(
                    _store(self.run_dir),
                    self.client,
                    session_ids=ids,
                    reporter=_AutoexpReporter(self.progress),
                    clock=self.clock,
                )

    def settle(self, states: Sequence[TrialState]) -> None:
        """Trials SLURM lost for good become `error` trials (their cap is spent)."""
        for state in states:
            if state.standing is Standing.LOST:
                cell = self.recipe.cell(state.cell)
                write_lost_trial(self.recipe, self.run_dir, cell, state.trial, state.reason)

    def report(
        self, states: Sequence[TrialState], results: Mapping[str, list[TrialResult]]
    ) -> None:
        """Matrix events for new trial files and finished cells; resubmissions; the queue."""
        self._report_cells(states, results)
        self._report_resubmissions(states)
        queue = tuple(_queue(cell.name, states, results[cell.name]) for cell in self.recipe.cells)
        if queue != self.last_queue:
            self.last_queue = queue
            self.progress.queue(queue)

    def _report_cells(
        self, states: Sequence[TrialState], results: Mapping[str, list[TrialResult]]
    ) -> None:
        for index, cell in enumerate(self.recipe.cells):
            seen = self.reported.setdefault(cell.name, set())
            fresh = [r for r in results[cell.name] if r.trial_id not in seen]
            for result in fresh:
                seen.add(result.trial_id)
                request = cell_request(
                    self.recipe, self.run_dir, cell, [result.trial_id], fresh_process=True
                )
                self.reporter.cell_started(index)
                self.reporter.trial_started(request, result.trial_id, result.seed)
                self.reporter.trial_finished(result)
            tally = counts(states, cell.name)
            open_ = sum(tally[s] for s in _OPEN)
            if not open_ and cell.name not in self.finished_cells:
                self.finished_cells.add(cell.name)
                self.reporter.cell_started(index)
                self.reporter.cell_finished(index, cell_stats(cell, results[cell.name]))

    def _report_resubmissions(self, states: Sequence[TrialState]) -> None:
        for state in states:
            key = (state.cell, state.trial)
            if state.resubmitted > self.resubmissions.get(key, 0):
                self.resubmissions[key] = state.resubmitted
                self.progress.notice(
                    f"cell {state.cell} trial {state.trial + 1}: SLURM lost its task; "
                    f"resubmitted ({state.resubmitted} of {self.settings.max_resubmits})"
                )

    def submit_due(self, states: Sequence[TrialState]) -> None:
        """Submit, as one array, the due trials that no session holds (all of a fixed design's
        at first; an adaptive run's next round once the last one is on disk)."""
        missing = [(s.cell, s.trial) for s in states if s.standing is Standing.UNSUBMITTED]
        if missing:
            self.submit(missing)

    def drive(self, *, detach: bool) -> bool:
        """Submit what is due and no session holds, then (unless `detach`) poll until all
        are final, submitting each adaptive round as it becomes due.

        Returns whether every trial is final.
        """
        self.poll()  # a resume: oellm-autoexp reconciles the sessions with SLURM first
        states, _results = self.observe()
        self.submit_due(states)
        if detach:
            return False
        while True:
            states, results = self.observe()
            self.settle(states)
            if any(s.standing is Standing.LOST for s in states):
                states, results = self.observe()
            self.report(states, results)
            if all(s.standing in (Standing.DONE, Standing.SKIPPED) for s in states):
                return True
            self.submit_due(states)
            self.sleep(self.settings.poll_seconds)
            self.poll()


# Standings of a trial that still has to come: its cell is not finished.
_OPEN = (Standing.UNSUBMITTED, Standing.PENDING, Standing.RUNNING, Standing.LATER)


def _store(run_dir: Path) -> SessionStore:
    from oellm_autoexp.persistence import SessionStore

    # Execution settings never come from the session files: aorta's config never sets a
    # submit command, and its scripts lie in the run directory. Who owns the files is checked
    # for the whole slurm/ tree before a resume (`strict_modes`), or waived by the user.
    return SessionStore(
        sessions_dir(run_dir),
        root=run_dir,
        submit_cmd="sbatch",
        scripts_root=run_dir,
        allow_shared_writable=True,
    )


def _session_ids(run_dir: Path, state: SlurmState) -> list[str]:
    """The recorded sessions whose file is still there (the trials of a lost one: resubmitted)."""
    recorded = [s.session_id for s in state.submissions if s.session_id is not None]
    if not recorded or not sessions_dir(run_dir).is_dir():
        return []
    present = set(_store(run_dir).ids())
    return [sid for sid in recorded if sid in present]


@contextlib.contextmanager
def _one_line(run_dir: Path) -> Iterator[None]:
    """oellm-autoexp's errors (a corrupt or locked session, a refused sbatch) as one line."""
    from oellm_autoexp.errors import AutoexpError

    try:
        yield
    except AutoexpError as exc:
        detail = " ".join(str(exc).split())
        raise AortaUsageError(f"{slurm_dir(run_dir)}: {detail}") from None


def _jobs(run_dir: Path, state: SlurmState, cap: int) -> dict[tuple[str, int], JobRow]:
    """The latest job of every (cell, trial) the recorded sessions hold."""
    from oellm_autoexp import api

    ids = _session_ids(run_dir, state)
    with _one_line(run_dir):
        rows = api.status(_store(run_dir), session_ids=ids) if ids else []
    by_session = {s.session_id: s for s in state.submissions}
    jobs: dict[tuple[str, int], JobRow] = {}
    for row in rows:  # submissions in order: a later one's job replaces an earlier one's
        submission = by_session[row.session_id]
        task = int(row.name.removeprefix("task"))
        jobs[submission.tasks[task]] = JobRow(
            state=row.state,
            slurm_id=row.slurm_id,
            restarts=sum(row.restarts.values()),
            reason=_lost_reason(row, cap),
        )
    return jobs


def observe(
    recipe: Recipe,
    run_dir: Path,
    state: SlurmState,
    cap: int,
    parsed: dict[Path, TrialResult] | None = None,
) -> tuple[list[TrialState], dict[str, list[TrialResult]]]:
    """Every trial's state, and the trial results on disk per cell (`parsed`: files read)."""
    jobs = _jobs(run_dir, state, cap)  # before the files: a task writes its file, then ends
    results = {cell.name: trials_on_disk(run_dir, cell, parsed) for cell in recipe.cells}
    done = {name: {r.trial_id for r in rs} for name, rs in results.items()}
    stopped = {c.name for c in recipe.cells if stop_rule_met(c, results[c.name])}
    due_until = None
    if recipe.adaptive is not None:  # only the due round may be submitted
        due = due_round(recipe, results)
        stopped |= due.stopped
        due_until = due.index
    states = trial_states(recipe, done, stopped, jobs, due_until=due_until)
    return states, results


def _queue(name: str, states: Sequence[TrialState], results: Sequence[TrialResult]) -> CellQueue:
    tally = counts(states, name)
    return CellQueue(
        name=name,
        pending=tally[Standing.PENDING] + tally[Standing.UNSUBMITTED],
        running=tally[Standing.RUNNING],
        done=tally[Standing.DONE],
        failed=sum(1 for r in results if r.outcome == "failed"),
        errors=sum(1 for r in results if r.errored),
    )


def _lost_reason(row: Any, cap: int) -> str:
    """Why SLURM lost a trial for good, from its oellm-autoexp job row."""
    what = row.outcome_error_type or row.outcome_mode or "lost"
    state = f", SLURM state {row.slurm_state}" if row.slurm_state else ""
    restarts = sum(row.restarts.values())
    return (
        f"SLURM lost the trial ({what}{state}, last job {row.slurm_id}); resubmitted "
        f"{restarts} time(s), the cap is {cap} (executor.slurm.max_resubmits)"
    )


def require_slurm(environ: Mapping[str, str]) -> None:
    """One line (exit 2) when the SLURM commands are not on PATH: nothing is created."""
    from oellm_autoexp.errors import AutoexpUsageError
    from oellm_autoexp.slurm.commands import resolve

    try:
        for program in ("sbatch", "squeue", "scancel"):
            resolve(program, environ)
    except AutoexpUsageError as exc:
        raise AortaUsageError(f"executor slurm: {exc}") from None


def default_client() -> SlurmClient:
    """oellm-autoexp's real SLURM client (timeouts and retries on every command)."""
    from oellm_autoexp.slurm.real import RealSlurmClient

    return RealSlurmClient()


def _execution(driver: _Driver, stopped: BaseException | None) -> Execution:
    """Every cell's stats from the trial files, and the cells not finished yet."""
    recipe, run_dir = driver.recipe, driver.run_dir
    stats = tuple(cell_stats(c, trials_on_disk(run_dir, c, driver.parsed)) for c in recipe.cells)
    done = {s.name for s in stats if s.trials_run >= recipe.cell(s.name).trials}
    unfinished = tuple(
        c.name for c in recipe.cells if c.name not in done and c.name not in driver.finished_cells
    )
    return Execution(stats=stats, stopped=stopped, in_progress=unfinished)


@dataclass(frozen=True)
class SlurmExecutor:
    """Every trial one task of a SLURM job array, submitted and watched through oellm-autoexp.

    `progress` hears the queue and oellm-autoexp's news; `detach` returns once the array is
    submitted (a later `--resume` or `aorta triage matrix` writes the matrix). `client`,
    `sleep`, `clock` and `environ` reach SLURM and the world; the defaults are the real ones
    (tests pass oellm-autoexp's fake client with its fake clock, or the real client of a
    throwaway cluster with that cluster's `environ`).
    """

    settings: SlurmSettings
    progress: SlurmProgress | None = None
    detach: bool = False
    client: SlurmClient | None = None
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] | None = None
    environ: Mapping[str, str] | None = None

    @property
    def name(self) -> ExecutorName:
        """`slurm`."""
        return "slurm"

    @property
    def in_process(self) -> bool:
        """No: the trials run in SLURM's tasks."""
        return False

    def check(self) -> None:
        """One line (exit 2) when SLURM's commands are not on PATH."""
        require_slurm(self.environ if self.environ is not None else os.environ)

    def settle(self, run: RunDir, recipe: Recipe) -> None:
        """Nothing here: `execute` lets oellm-autoexp reconcile the sessions with SLURM."""

    def execute(self, context: RunContext) -> Execution:
        """Probe every environment here (the submitting host), submit what no session holds,
        then (unless detached) watch until every trial is final. Ctrl-C stops watching (the
        tasks keep running) and returns what is on disk."""
        recipe, run_dir = context.recipe, context.run.path
        for cell in recipe.cells:
            context.probe_environment(cell.environment.name)
        cells = {cell.name: cell.trials for cell in recipe.cells}
        state = load_state(run_dir, cells) if is_slurm_run(run_dir) else SlurmState()
        driver = _Driver(
            recipe,
            self.settings,
            run_dir,
            self.client or default_client(),
            context.reporter,
            self.progress or NullProgress(),
            self.sleep,
            state=state,
            clock=self.clock,
        )
        save_state(run_dir, driver.state)
        plans = []
        for cell in recipe.cells:  # a resume: trials on disk are done, and said so already
            done = {r.trial_id for r in context.earlier.get(cell.name, ())}
            driver.reported[cell.name] = done
            missing = tuple(i for i in range(cell.trials) if i not in done)
            plans.append(CellPlan(cell.name, cell.trials, cell.steps, missing))
        context.reporter.matrix_started(plans)
        try:
            complete = driver.drive(detach=self.detach)
        except KeyboardInterrupt as exc:
            return _execution(driver, exc)
        if self.detach:
            return Execution(finished=False)
        driver.state.finished = complete
        save_state(run_dir, driver.state)
        return _execution(driver, None)


def slurm_status(recipe: Recipe, run_dir: Path) -> list[CellQueue]:
    """Standing each cell stands, from the run directory and the recorded sessions (no SLURM call).

    The sessions say what the last monitor pass saw; `--resume` brings them up to date.
    """
    cells = {cell.name: cell.trials for cell in recipe.cells}
    state = load_state(run_dir, cells)
    cap = (recipe.executor or SlurmSettings()).max_resubmits
    states, results = observe(recipe, run_dir, state, cap)
    return [_queue(cell.name, states, results[cell.name]) for cell in recipe.cells]
