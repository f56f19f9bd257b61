"""B2: `run_recipe` — run every cell of a recipe in this interpreter and write the matrix.

One `run_trials` call per cell (a Python call, never a subprocess of `aorta`), probes through
`collect_env` as a library function: `host_env.json` once per invocation, and
`environments/<env>/env.json` once per distinct environment, just before that environment's
first cell. A cell whose environment cannot run (or whose request is rejected) becomes an
`error` row; the other cells still run. Ctrl-C writes a valid matrix of what ran, marked
interrupted with the cells that did not run, then re-raises; so does a crash of the runner.

`resume_run` continues such a run in its own directory: it runs only the trials that have no
`trial_<id>.json` yet (same ids, same seeds as the first attempt), probes only environments
that were never probed, and rebuilds the matrix from every trial, old and new.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from aorta.instrumentation.environment import collect_env
from aorta.instrumentation.models import EnvSnapshot
from aorta.runner.launchers import image_digest
from aorta.runner.models import RunRequest, TrialResult
from aorta.runner.trials import TrialSessionLike, distributed_rank, open_trials, run_trials
from aorta.triage.inflight import settle_trials_in_flight
from aorta.triage.matrix import NOT_RUN, CellStats, error_cell
from aorta.triage.output import (
    MatrixReport,
    PlotDrawer,
    cell_dir,
    new_run_dir,
    write_report,
)
from aorta.triage.recipe import Cell, Recipe, build_recipe_matrix
from aorta.triage.recipe.trust import check_run_trust
from aorta.triage.reporting import CellPlan, MatrixReporter, NullMatrixReporter
from aorta.triage.rundir import (
    IMAGE_FILE,
    RESOLVED_NAME,
    archive_matrix,
    cell_stats,
    image_digests,
    partial_scopes,
    previous_matrix,
    read_run_recipe,
    run_dir_lock,
    trials_on_disk,
    write_run_recipe,
)
from aorta.triage.schedule import round_order
from toolkit_core.atomic import write_json_atomic, write_text_atomic
from toolkit_core.errors import ToolkitError
from toolkit_core.timestamps import iso_stamp

# Injected by tests that need a specific probe outcome; the real probe by default.
Probe = Callable[..., EnvSnapshot]


@dataclass
class _Session:
    """One invocation's state while it fills a run directory."""

    recipe: Recipe
    run_dir: Path
    run_timestamp: str
    writer: bool  # rank 0: probes and writes; other torchrun ranks only train
    reporter: MatrixReporter
    probe: Probe
    probed: set[str]  # environments with an env.json already
    earlier: dict[str, list[TrialResult]]  # trials on disk before this invocation, per cell
    resumed_at: tuple[str, ...] = ()
    earlier_rounds: tuple[tuple[str, ...], ...] = ()  # interleaved rounds of earlier attempts
    digests: dict[str, str] = field(default_factory=dict)  # docker environment -> image digest
    plot_drawer: PlotDrawer | None = None  # see `output.write_report`


def cell_request(
    recipe: Recipe, run_dir: Path, cell: Cell, trial_ids: Sequence[int], *, fresh_process: bool
) -> RunRequest:
    """The `RunRequest` of `cell`'s `trial_ids` in `run_dir` (same ids and seeds on any host).

    The SLURM executor's trial tasks build their request here too, so a trial that runs as an
    array task is the trial the local scheduler would have run.
    """
    return RunRequest(
        workload=recipe.workload,
        output_dir=cell_dir(run_dir, cell.name),
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
    )


def _request(
    session: _Session, cell: Cell, trial_ids: Sequence[int], *, fresh_process: bool
) -> RunRequest:
    return cell_request(
        session.recipe, session.run_dir, cell, trial_ids, fresh_process=fresh_process
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


ERROR_FILE = "error.txt"
_ERROR_LOG_TAIL_CHARS = 4000


def _write_error_file(session: _Session, cell: Cell, reason: str, trace: str | None) -> None:
    """`cells/<name>/error.txt`: every errored row of the matrix has a place to look."""
    if not session.writer:
        return
    text = reason + "\n"
    if trace:
        text += f"\nlog tail of the first errored trial:\n{trace[-_ERROR_LOG_TAIL_CHARS:]}\n"
    path = cell_dir(session.run_dir, cell.name) / ERROR_FILE
    write_text_atomic(path, text, overwrite=True)  # a resume may error again


def stop_rule_met(cell: Cell, results: Sequence[TrialResult]) -> bool:
    """Whether the cell's `stop_after` rule is met: enough of its trials failed."""
    limit = cell.stop_after_failures
    return limit is not None and sum(1 for r in results if r.outcome == "failed") >= limit


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


def _probe_environment(session: _Session, env_name: str, partial: list[str]) -> None:
    # Before the environment's first cell and before any mitigation is applied.
    snapshot = session.probe(scope="environment", environ=dict(os.environ))
    path = session.run_dir / "environments" / env_name / "env.json"
    write_json_atomic(path, snapshot.to_dict())
    session.probed.add(env_name)
    if snapshot.partial:
        partial.append(f"environment {env_name}")


class _Scheduler:
    """Runs the cells' trials in the recipe's order and keeps every cell's state.

    `sequential`: each cell in turn, as one `run_trials` call (the spec's nested loop; trial by
    trial when the cell has a stop rule). `interleaved`: round k of every cell before round
    k+1, cells shuffled per round (`aorta.triage.schedule`), one `open_trials` session per cell
    so that a round costs no more set-up than one trial. When any cell needs child processes,
    every cell runs its trials in child processes (`RunRequest.fresh_process`): a warm parent
    process is never compared with cold children.
    """

    def __init__(self, session: _Session, partial: list[str]) -> None:
        self.session = session
        self.partial = partial
        recipe = session.recipe
        plans = _plan(recipe, session.earlier)
        self.runs = [
            _CellRun(
                index=i,
                cell=cell,
                plan=plan,
                results=list(session.earlier.get(cell.name, [])),
                pending=list(plan.to_run),
            )
            for i, (cell, plan) in enumerate(zip(recipe.cells, plans, strict=True))
        ]
        self.fresh_process = any(cell.needs_fresh_process for cell in recipe.cells)
        self.rounds: list[list[str]] = []

    def _start(self, run: _CellRun, *, whole_cell: bool) -> None:
        """Probe the cell's environment if new and (unless `whole_cell`) open its session."""
        session, cell = self.session, run.cell
        run.started = True
        env_name = cell.environment.name
        if session.writer and run.pending and env_name not in session.probed:
            _probe_environment(session, env_name, self.partial)
        if whole_cell or not run.pending:
            return
        request = _request(session, cell, run.pending, fresh_process=self.fresh_process)
        try:
            run.trials = open_trials(request, session.reporter)
        except ToolkitError as exc:  # environment unavailable, bad workload parameter, a write
            run.error = str(exc)

    def _finish(self, run: _CellRun) -> None:
        run.done = True
        session, stats = self.session, run.stats()
        if run.error is not None:  # the cell could not run at all
            _write_error_file(session, run.cell, run.error, None)
        elif stats.error is not None:  # every trial errored
            trace = next((r.traceback for r in run.results if r.errored and r.traceback), None)
            _write_error_file(session, run.cell, stats.error, trace)
        if session.writer and run.plan.to_run and run.error is None:
            _record_image_digest(session, run.cell)
        session.reporter.cell_finished(run.index, stats)

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
            self.session.reporter.cell_started(run.index)
            if whole and run.pending:
                request = _request(
                    self.session, run.cell, run.pending, fresh_process=self.fresh_process
                )
                try:
                    run.results.extend(run_trials(request, self.session.reporter))
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
                self.session.reporter.cell_started(run.index)
                self._finish(run)
        rounds = max((run.cell.trials for run in self.runs), default=0)
        for k in range(rounds):
            ran: list[str] = []
            self.rounds.append(ran)
            for name in round_order(self.session.recipe.order_seed, k, names):
                run = by_name[name]
                if run.done or k not in run.pending:
                    continue
                if not run.started:
                    self._start(run, whole_cell=False)
                self.session.reporter.cell_started(run.index)
                if run.error is None:
                    self._run_one(run, k)
                    ran.append(name)
                if run.error is not None or not run.pending:
                    self._finish(run)

    def interrupted(self) -> None:
        """After Ctrl-C or a crash: take the trials a cell in progress left on disk."""
        for run in self.runs:
            if run.started and not run.done and self.session.writer:
                run.results = trials_on_disk(self.session.run_dir, run.cell)


def _record_image_digest(session: _Session, cell: Cell) -> None:
    """After a docker environment's first cell ran (the engine pulled it): which image ran."""
    env = cell.environment
    if env.kind != "docker" or env.image is None or env.name in session.digests:
        return
    digest = image_digest(env.image)
    session.digests[env.name] = digest
    path = session.run_dir / "environments" / env.name / IMAGE_FILE
    write_json_atomic(path, {"image": env.image, "digest": digest}, overwrite=True)


def _run_cells(session: _Session, partial: list[str]) -> MatrixReport:
    recipe = session.recipe
    scheduler = _Scheduler(session, partial)
    session.reporter.matrix_started([run.plan for run in scheduler.runs])
    stopped: BaseException | None = None
    try:
        if recipe.order == "sequential":
            scheduler.sequential()
        else:
            scheduler.interleaved()
    except (KeyboardInterrupt, Exception) as exc:
        # Ctrl-C, or a crash of the runner itself (workload errors are failed trials and
        # environment errors are error cells, so this is a bug or e.g. a full disk): either
        # way the trials that finished are written into a matrix before it surfaces.
        stopped = exc
        scheduler.interrupted()
    stats: list[CellStats] = []
    not_run: list[str] = []
    for run in scheduler.runs:
        if run.done or run.error is not None or run.results:
            stats.append(run.stats())
        else:
            not_run.append(run.cell.name)
            stats.append(error_cell(run.cell.name, NOT_RUN, trials_requested=run.cell.trials))
    matrix = build_recipe_matrix(recipe, stats)
    report = MatrixReport(
        recipe=recipe,
        matrix=matrix,
        run_dir=session.run_dir,
        run_timestamp=session.run_timestamp,
        partial_scopes=tuple(partial),
        interrupted=stopped is not None,
        cells_not_run=tuple(not_run),
        resumed_at=session.resumed_at,
        rounds=(*session.earlier_rounds, *(tuple(r) for r in scheduler.rounds if r)),
        image_digests=dict(session.digests),
    )
    if session.writer:
        write_report(report, plot_drawer=session.plot_drawer)
    if isinstance(stopped, KeyboardInterrupt):
        raise TriageInterrupted(report)
    if stopped is not None:
        raise stopped
    return report


def run_recipe(
    recipe: Recipe,
    output_root: Path,
    *,
    reporter: MatrixReporter | None = None,
    probe: Probe = collect_env,
    now: datetime | None = None,
    plot_drawer: PlotDrawer | None = None,
) -> MatrixReport:
    """Run `recipe` under `output_root` and return the written report.

    Creates `<output_root>/<ticket>/<workload>/<timestamp>/` (never reused), writes
    `recipe.resolved.yaml`, `host_env.json`, per-environment `env.json`, per-cell trial JSONs
    and finally `matrix.json` / `matrix.png` / `matrix.md`. Under torchrun every rank runs every
    cell (the workload's collectives need all ranks) and only rank 0 probes and writes; the
    other ranks return an unwritten report whose `run_dir` does not exist. Ctrl-C writes the
    partial matrix and raises `TriageInterrupted`. `plot_drawer`: see `write_report`.
    """
    rank, _ = distributed_rank()
    writer = rank == 0
    moment = now or datetime.now(UTC)
    if writer:
        run_dir, stamp = new_run_dir(output_root, recipe, moment)
        write_run_recipe(run_dir, recipe)
    else:
        run_dir = output_root / f"_rank{rank}_writes_nothing"
        stamp = iso_stamp(moment)
    session = _Session(
        recipe=recipe,
        run_dir=run_dir,
        run_timestamp=stamp,
        writer=writer,
        reporter=reporter or NullMatrixReporter(),
        probe=probe,
        probed=set(),
        earlier={},
        plot_drawer=plot_drawer,
    )
    partial: list[str] = []
    if not writer:
        return _run_cells(session, partial)
    with run_dir_lock(run_dir):
        host = probe(scope="host")
        write_json_atomic(run_dir / "host_env.json", host.to_dict())
        if host.partial:
            partial.append("host")
        return _run_cells(session, partial)


def resume_run(
    run_dir: Path,
    *,
    reporter: MatrixReporter | None = None,
    probe: Probe = collect_env,
    now: datetime | None = None,
    trust_environments: bool = False,
) -> MatrixReport:
    """Run the trials `run_dir` is missing, in `run_dir`, and rebuild its matrix.

    The recipe is the one the run executed (`recipe.resolved.yaml`). Trials with a
    `trial_<id>.json` are kept and not run again; the missing ids run with the seeds the first
    attempt would have used; cells that errored or were never reached run in full. The
    previous matrix files move to `previous/<timestamp>/`; `host_env.json` and existing
    `env.json` files are kept (an environment never probed is probed before its first cell).
    Raises `AortaUsageError` when `run_dir` is not a triage run directory or another aorta
    process works in it, `TrialStillRunningError` when a trial an earlier attempt started is
    still running in a process that outlived it (`aorta.triage.inflight`), `TriageInterrupted`
    on Ctrl-C (after writing the partial matrix).
    Everything read back is validated like a recipe; a run directory whose recipe would execute
    something this machine's registry does not vouch for (a venv interpreter, a docker image,
    changed mitigation variables, `LD_PRELOAD`-like variables, a command) raises
    `UntrustedRecipeError` unless `trust_environments` is set, or this user started the run
    from the recipe as it is now (`recipe.signature`).
    """
    recipe, digest = read_run_recipe(run_dir)
    label = str(run_dir / RESOLVED_NAME)
    check_run_trust(recipe, run_dir, digest, label=label, trusted=trust_environments)
    rank, _ = distributed_rank()
    moment = now or datetime.now(UTC)

    def session() -> _Session:
        # Read under the lock: the trials on disk are final only once no other process writes.
        previous = previous_matrix(run_dir)
        return _Session(
            recipe=recipe,
            run_dir=run_dir,
            run_timestamp=previous.get("run_timestamp") or iso_stamp(moment),
            writer=rank == 0,
            reporter=reporter or NullMatrixReporter(),
            probe=probe,
            probed={p.parent.name for p in (run_dir / "environments").glob("*/env.json")},
            earlier={cell.name: trials_on_disk(run_dir, cell) for cell in recipe.cells},
            resumed_at=(*previous.get("resumed_at", ()), iso_stamp(moment)),
            earlier_rounds=tuple(
                tuple(names) for names in previous.get("order", {}).get("rounds", ())
            ),
            digests=image_digests(run_dir),
        )

    if rank != 0:
        return _run_cells(session(), [])
    with run_dir_lock(run_dir):
        settle_trials_in_flight(run_dir, recipe)  # a trial still running elsewhere: refuse
        resumed = session()
        partial = list(partial_scopes(run_dir))
        if not (run_dir / "host_env.json").exists():  # the first attempt died before its probe
            host = probe(scope="host")
            write_json_atomic(run_dir / "host_env.json", host.to_dict())
            if host.partial:
                partial.append("host")
        archive_matrix(run_dir, moment)
        return _run_cells(resumed, partial)


class TriageInterrupted(KeyboardInterrupt):
    """Ctrl-C during `run_recipe`, after the partial matrix was written (see `.report`)."""

    def __init__(self, report: MatrixReport) -> None:
        super().__init__(f"interrupted; partial matrix in {report.run_dir}")
        self.report = report
