"""`LocalExecutor`: run every cell's trials in this interpreter, in the recipe's order.

One `run_trials` call per cell (a Python call, never a subprocess of `aorta`), or one
`open_trials` session per cell when trials interleave. Each environment is probed just before
its first cell. A cell whose environment cannot run (or whose request is rejected) becomes an
`error` row; the other cells still run. Ctrl-C or a crash of the runner ends the attempt with
the trials that finished (the lifecycle writes them as a partial matrix, then re-raises).
On a resume only the trials with no `trial_<id>.json` yet run (same ids, same seeds).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from aorta.atomic import write_json_atomic, write_text_atomic
from aorta.runner.launchers import image_digest
from aorta.runner.models import RunRequest, TrialResult
from aorta.runner.trials import TrialSessionLike, open_trials, run_trials
from aorta.triage.analysis.adaptive_replay import AdaptiveRule
from aorta.triage.analysis.cells import NOT_RUN, CellStats, error_cell
from aorta.triage.layout import RunDir
from aorta.triage.recipe import Cell, Recipe
from aorta.triage.report.reporting import CellPlan
from aorta.triage.run.adaptive import look_before_round
from aorta.triage.run.assemble import cell_stats, stop_rule_met
from aorta.triage.run.executor import Execution, RunContext
from aorta.triage.run.inflight import settle_trials_in_flight
from aorta.triage.run.manifest import ExecutorName
from aorta.triage.run.rundir import trials_on_disk
from aorta.triage.run.schedule import round_order
from toolkit_core.errors import ToolkitError


def cell_request(
    recipe: Recipe, run_dir: Path, cell: Cell, trial_ids: Sequence[int], *, fresh_process: bool
) -> RunRequest:
    """The `RunRequest` of `cell`'s `trial_ids` in `run_dir` (same ids and seeds on any host).

    The SLURM executor's trial tasks build their request here too, so a trial that runs as an
    array task is the trial the local scheduler would have run.
    """
    return RunRequest(
        workload=recipe.workload,
        output_dir=RunDir(run_dir).cell(cell.name),
        mitigations=cell.mitigations,
        environment=cell.environment,
        extra_env=cell.extra_env,
        trials=cell.trials,
        steps=cell.steps,
        # A fresh cell asks for every trial (the request reads as the spec's); a resumed one
        # for the ids that are missing.
        trial_ids=None if len(trial_ids) == cell.trials else tuple(trial_ids),
        command=recipe.command,
        command_args=cell.command_args,
        cell=cell.name,
        fresh_process=fresh_process,
        # What the recipe resolved (or recorded, when re-run or resumed), not today's registry.
        pinned_mitigations=cell.mitigation_entries,
        fingerprint_kernels=recipe.fingerprint_kernels,
        locate=recipe.locate,
    )


def _request(
    context: RunContext, cell: Cell, trial_ids: Sequence[int], *, fresh_process: bool
) -> RunRequest:
    return cell_request(
        context.recipe, context.run.path, cell, trial_ids, fresh_process=fresh_process
    )


def _plan(recipe: Recipe, earlier: dict[str, list[TrialResult]]) -> list[CellPlan]:
    plans = []
    for cell in recipe.cells:
        done = {r.trial_id for r in earlier.get(cell.name, ())}
        missing = tuple(i for i in range(cell.trials) if i not in done)
        if stop_rule_met(cell, earlier.get(cell.name, ())):
            missing = ()  # an earlier attempt already reached the cell's stop rule
        plans.append(CellPlan(cell.name, cell.trials, cell.steps, missing))
    return plans


_ERROR_LOG_TAIL_CHARS = 4000


def _write_error_file(context: RunContext, cell: Cell, reason: str, trace: str | None) -> None:
    """`cells/<name>/error.txt`: every errored row of the matrix has a place to look."""
    if not context.writer:
        return
    text = reason + "\n"
    if trace:
        text += f"\nlog tail of the first errored trial:\n{trace[-_ERROR_LOG_TAIL_CHARS:]}\n"
    # overwrite: a resume may error again
    write_text_atomic(context.run.error_file(cell.name), text, overwrite=True)


@dataclass
class _CellRun:
    """One cell's progress in this invocation."""

    index: int
    cell: Cell
    plan: CellPlan
    results: list[TrialResult]  # earlier attempts' trials, then this invocation's
    pending: list[int]  # trial ids still to run, ascending
    trials: TrialSessionLike | None = None
    error: str | None = None
    started: bool = False
    done: bool = False

    def stats(self) -> CellStats:
        if self.error is not None:
            return error_cell(self.cell.name, self.error, trials_requested=self.cell.trials)
        return cell_stats(self.cell, self.results)


class _Scheduler:
    """Runs the cells' trials in the recipe's order and keeps every cell's state.

    `sequential`: each cell in turn, as one `run_trials` call (the spec's nested loop; trial by
    trial when the cell has a stop rule). `interleaved`: round k of every cell before round
    k+1, cells shuffled per round (`aorta.triage.run.schedule`), one `open_trials` session per
    cell so that a round costs no more set-up than one trial. When any cell needs child
    processes, every cell runs its trials in child processes (`RunRequest.fresh_process`): a
    warm parent process is never compared with cold children.
    """

    def __init__(self, context: RunContext) -> None:
        self.context = context
        recipe = context.recipe
        plans = _plan(recipe, context.earlier)
        self.runs = [
            _CellRun(
                index=i,
                cell=cell,
                plan=plan,
                results=list(context.earlier.get(cell.name, [])),
                pending=list(plan.to_run),
            )
            for i, (cell, plan) in enumerate(zip(recipe.cells, plans, strict=True))
        ]
        self.fresh_process = any(cell.needs_fresh_process for cell in recipe.cells)
        self.rounds: list[list[str]] = []
        adaptive = recipe.adaptive
        self.rule = (
            None
            if adaptive is None
            else AdaptiveRule(adaptive.max_trials, recipe.confound.alpha, adaptive.rule)
        )

    def _start(self, run: _CellRun, *, whole_cell: bool) -> None:
        """Probe the cell's environment if new and (unless `whole_cell`) open its session."""
        context, cell = self.context, run.cell
        run.started = True
        if run.pending:
            context.probe_environment(cell.environment.name)
        if whole_cell or not run.pending:
            return
        request = _request(context, cell, run.pending, fresh_process=self.fresh_process)
        try:
            run.trials = open_trials(request, context.reporter)
        except ToolkitError as exc:  # environment unavailable, bad workload parameter, a write
            run.error = str(exc)

    def _finish(self, run: _CellRun) -> None:
        run.done = True
        context, stats = self.context, run.stats()
        if run.error is not None:  # the cell could not run at all
            _write_error_file(context, run.cell, run.error, None)
        elif stats.error is not None:  # every trial errored
            trace = next((r.traceback for r in run.results if r.errored and r.traceback), None)
            _write_error_file(context, run.cell, stats.error, trace)
        if context.writer and run.plan.to_run and run.error is None:
            _record_image_digest(context, run.cell)
        context.reporter.cell_finished(run.index, stats)

    def _run_one(self, run: _CellRun, trial_id: int) -> None:
        assert run.trials is not None  # opened by _start
        run.pending.remove(trial_id)
        run.results.append(run.trials.run(trial_id))
        if stop_rule_met(run.cell, run.results):
            run.pending.clear()

    def sequential(self) -> None:
        """Every cell in turn, in recipe order."""
        for run in self.runs:
            whole = run.cell.stop_after_failures is None
            self._start(run, whole_cell=whole)
            self.context.reporter.cell_started(run.index)
            if whole and run.pending:
                request = _request(
                    self.context, run.cell, run.pending, fresh_process=self.fresh_process
                )
                try:
                    run.results.extend(run_trials(request, self.context.reporter))
                except ToolkitError as exc:
                    run.error = str(exc)
                run.pending.clear()
            while run.error is None and run.pending:
                self._run_one(run, run.pending[0])
            self._finish(run)

    def interleaved(self) -> None:
        """Round k of every cell before round k+1; a cell leaves once it is done."""
        names = [run.cell.name for run in self.runs]
        by_name = {run.cell.name: run for run in self.runs}
        for run in self.runs:
            if not run.pending:  # everything on disk already (a resume): report it as done
                self._start(run, whole_cell=True)
                self.context.reporter.cell_started(run.index)
                self._finish(run)
        rounds = max((run.cell.trials for run in self.runs), default=0)
        for k in range(rounds):
            self._stop_decided(k)
            ran: list[str] = []
            self.rounds.append(ran)
            for name in round_order(self.context.recipe.order_seed, k, names):
                run = by_name[name]
                if run.done or k not in run.pending:
                    continue
                if not run.started:
                    self._start(run, whole_cell=False)
                self.context.reporter.cell_started(run.index)
                if run.error is None:
                    self._run_one(run, k)
                    ran.append(name)
                if run.error is not None or not run.pending:
                    self._finish(run)

    def _stop_decided(self, round_index: int) -> None:
        """Adaptive runs: before a round, end the cells that the looks so far decided (and
        the baseline once no cell needs it); a resume replays the same looks."""
        if self.rule is None or round_index == 0:
            return
        # A cell that could not run at all is no hypothesis: it must not hold the baseline.
        results = {r.cell.name: r.results for r in self.runs if r.error is None or r.results}
        look = look_before_round(self.rule, self.context.recipe, results, round_index)
        for run in self.runs:
            if run.done or run.cell.name not in look.stopping:
                continue
            run.pending.clear()
            if not run.started:  # a resumed cell the earlier attempts had already decided
                self._start(run, whole_cell=True)
                self.context.reporter.cell_started(run.index)
            self._finish(run)

    def interrupted(self) -> None:
        """After Ctrl-C or a crash: take the trials a cell in progress left on disk."""
        for run in self.runs:
            if run.started and not run.done and self.context.writer:
                run.results = trials_on_disk(self.context.run.path, run.cell)

    def execution(self, stopped: BaseException | None) -> Execution:
        """What the attempt came to: every cell's stats, the cells never reached."""
        stats: list[CellStats] = []
        not_run: list[str] = []
        for run in self.runs:
            if run.done or run.error is not None or run.results:
                stats.append(run.stats())
            else:
                not_run.append(run.cell.name)
                stats.append(error_cell(run.cell.name, NOT_RUN, trials_requested=run.cell.trials))
        return Execution(
            stats=tuple(stats),
            stopped=stopped,
            cells_not_run=tuple(not_run),
            rounds=tuple(tuple(names) for names in self.rounds if names),
        )


def _record_image_digest(context: RunContext, cell: Cell) -> None:
    """After a docker environment's first cell ran (the engine pulled it): which image ran."""
    env = cell.environment
    if env.kind != "docker" or env.image is None or env.name in context.digests:
        return
    digest = image_digest(env.image)
    context.digests[env.name] = digest
    path = context.run.image_json(env.name)
    write_json_atomic(path, {"image": env.image, "digest": digest}, overwrite=True)


@dataclass(frozen=True)
class LocalExecutor:
    """Trials in this interpreter (or its child processes), cell by cell or interleaved."""

    @property
    def name(self) -> ExecutorName:
        """`local`."""
        return "local"

    @property
    def in_process(self) -> bool:
        """Yes: under torchrun every rank runs every cell (the collectives need all ranks)."""
        return True

    def check(self) -> None:
        """Nothing to check: this interpreter is here."""

    def settle(self, run: RunDir, recipe: Recipe) -> None:
        """A trial an earlier attempt started may still run in a process that outlived it:
        refuse (`TrialStillRunningError`); records of dead owners are removed."""
        settle_trials_in_flight(run.path, recipe)

    def execute(self, context: RunContext) -> Execution:
        """Run the missing trials in the recipe's order; a Ctrl-C or a crash of the runner
        itself ends the attempt with what finished (returned as `stopped`)."""
        scheduler = _Scheduler(context)
        context.reporter.matrix_started([run.plan for run in scheduler.runs])
        try:
            if context.recipe.order == "sequential":
                scheduler.sequential()
            else:
                scheduler.interleaved()
        except (KeyboardInterrupt, Exception) as exc:
            # Workload errors are failed trials and environment errors are error cells, so
            # this is Ctrl-C, a bug or e.g. a full disk: either way the trials that finished
            # go into a matrix before it surfaces.
            scheduler.interrupted()
            return scheduler.execution(exc)
        return scheduler.execution(None)
