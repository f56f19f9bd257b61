"""One triage run's lifecycle: `start`, `resume`, `reanalyse` (and `run_recipe` on top).

    start     create the run directory, write the recipe and `run.json`, lock, probe the host,
              run the trials on the recipe's executor, write the matrix and `run.json`
    resume    read the recipe back (trust-checked), lock, settle trials left in flight, probe
              what was never probed, archive the matrix, run only the missing trials, write
    reanalyse read the recipe back, lock, archive the matrix, rebuild it from the trial files

Each step is written once here; the executors (`aorta.triage.run.local.LocalExecutor`,
`aorta.triage.slurm.executor.SlurmExecutor`) only run trials. The executor comes from the
recipe (`executor: slurm` -> SLURM), so a library caller gets what the CLI gets. Ctrl-C
writes a valid matrix of what ran, marked interrupted, then raises `TriageInterrupted`; a
crash of the local runner does the same and re-raises the crash. Under torchrun every rank
runs a local recipe's cells and only rank 0 probes and writes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from aorta.atomic import write_json_atomic
from aorta.errors import AortaUsageError
from aorta.instrumentation.environment import collect_env
from aorta.runner.trials import distributed_rank
from aorta.triage.analysis.cells import CellStats, error_cell
from aorta.triage.analysis.confound import alpha_problem, threshold_problem
from aorta.triage.layout import RunDir
from aorta.triage.recipe import Cell, Recipe
from aorta.triage.recipe.trust import check_run_trust
from aorta.triage.report.output import MatrixReport, new_run_dir
from aorta.triage.report.reporting import MatrixReporter, NullMatrixReporter
from aorta.triage.report.writer import PlotDrawer, write_report
from aorta.triage.run.adaptive import due_round
from aorta.triage.run.assemble import build_recipe_matrix, cell_stats
from aorta.triage.run.executor import Execution, Probe, RunContext, TrialExecutor
from aorta.triage.run.local import LocalExecutor
from aorta.triage.run.manifest import ExecutorName, RunManifest, read_manifest, write_manifest
from aorta.triage.run.rundir import (
    archive_matrix,
    image_digests,
    load_run_recipe,
    partial_scopes,
    read_run_recipe,
    run_dir_lock,
    trials_on_disk,
    write_run_recipe,
)
from toolkit_core.timestamps import iso_stamp

if TYPE_CHECKING:
    from aorta.triage.slurm.executor import SlurmProgress

NO_TRIALS = "no trial results on disk"
ON_SLURM = "not finished: its trials are still queued or running on SLURM"


class TriageInterrupted(KeyboardInterrupt):
    """Ctrl-C during a run, after the partial matrix was written (see `.report`)."""

    def __init__(self, report: MatrixReport) -> None:
        super().__init__(f"interrupted; partial matrix in {report.run_dir}")
        self.report = report


@dataclass(frozen=True)
class RunOutcome:
    """Where a run went, and its report (None: detached, the trials still run on SLURM)."""

    run_dir: Path
    report: MatrixReport | None


def executor_for(
    recipe: Recipe, *, progress: SlurmProgress | None = None, detach: bool = False
) -> TrialExecutor:
    """The executor `recipe` names: SLURM for `executor: slurm`, else this interpreter.

    `progress` and `detach` apply to SLURM only; `detach` with a local recipe is refused.
    """
    if recipe.executor is None:
        if detach:
            raise AortaUsageError("--detach: only with the SLURM executor")
        return LocalExecutor()
    from aorta.triage.slurm.executor import SlurmExecutor

    return SlurmExecutor(recipe.executor, progress=progress, detach=detach)


def _probe_host(run: RunDir, probe: Probe) -> None:
    """`host_env.json`, unless an earlier attempt took it."""
    if not run.host_env.exists():
        write_json_atomic(run.host_env, probe(scope="host").to_dict())


def _conclude(
    context: RunContext, manifest: RunManifest, execution: Execution
) -> MatrixReport | None:
    """Assemble the report of `execution` (the one place a matrix report is put together),
    write it and `run.json`, and raise what stopped the attempt; None when detached."""
    if not execution.finished:
        return None
    recipe = context.recipe
    manifest = dataclasses.replace(
        manifest,
        rounds=(*manifest.rounds, *execution.rounds),
        interrupted=execution.stopped is not None,
        cells_not_run=execution.cells_not_run,
        cell_errors={s.name: s.error for s in execution.stats if s.error},
    )
    report = _report(recipe, context.run, manifest, execution.stats, execution.in_progress)
    if context.writer:
        write_report(report, plot_drawer=context.plot_drawer)
        write_manifest(context.run, manifest)
    if isinstance(execution.stopped, KeyboardInterrupt):
        raise TriageInterrupted(report) from None
    if execution.stopped is not None:
        raise execution.stopped
    return report


def _report(
    recipe: Recipe,
    run: RunDir,
    manifest: RunManifest,
    stats: Sequence[CellStats],
    in_progress: tuple[str, ...] = (),
) -> MatrixReport:
    exists = run.path.is_dir()  # a torchrun rank other than 0 has no run directory
    return MatrixReport(
        recipe=recipe,
        matrix=build_recipe_matrix(recipe, stats),
        run_dir=run.path,
        run_timestamp=manifest.run_timestamp,
        partial_scopes=partial_scopes(run.path) if exists else (),
        interrupted=manifest.interrupted,
        cells_not_run=manifest.cells_not_run,
        resumed_at=manifest.resumed_at,
        rounds=manifest.rounds,
        image_digests=image_digests(run.path) if exists else {},
        in_progress=in_progress,
    )


def start(
    recipe: Recipe,
    output_root: Path,
    *,
    executor: TrialExecutor | None = None,
    reporter: MatrixReporter | None = None,
    probe: Probe = collect_env,
    now: datetime | None = None,
    plot_drawer: PlotDrawer | None = None,
) -> RunOutcome:
    """Run `recipe` in a new run directory under `output_root` on its executor.

    Creates `<output_root>/<ticket>/<workload>/<timestamp>/` (never reused) and fills it as
    `aorta.triage.layout` lays out. `executor`: default `executor_for(recipe)`; it is checked
    before anything is created (SLURM not installed: one-line `AortaUsageError`).
    `plot_drawer`: see `write_report`.
    """
    executor = executor or executor_for(recipe)
    executor.check()
    moment = now or datetime.now(UTC)
    rank, _ = distributed_rank()
    reporter = reporter or NullMatrixReporter()
    manifest = RunManifest(
        run_timestamp=iso_stamp(moment),
        executor=executor.name,
        order_seed=recipe.order_seed if recipe.order == "interleaved" else None,
    )
    if executor.in_process and rank != 0:  # trains with rank 0; writes nothing
        run = RunDir(output_root / f"_rank{rank}_writes_nothing")
        context = RunContext(recipe, run, reporter, probe, writer=False)
        return RunOutcome(run.path, _conclude(context, manifest, executor.execute(context)))
    path, _stamp = new_run_dir(output_root, recipe, moment)
    run = RunDir(path)
    write_run_recipe(path, recipe)
    write_manifest(run, manifest)
    with run_dir_lock(path):
        _probe_host(run, probe)
        context = RunContext(recipe, run, reporter, probe, plot_drawer=plot_drawer)
        return RunOutcome(path, _conclude(context, manifest, executor.execute(context)))


def resume(
    run_dir: Path,
    *,
    executor: TrialExecutor | None = None,
    reporter: MatrixReporter | None = None,
    probe: Probe = collect_env,
    now: datetime | None = None,
    trust_environments: bool = False,
    progress: SlurmProgress | None = None,
    detach: bool = False,
    allow_shared_writable: bool = False,
) -> RunOutcome:
    """Run the trials `run_dir` is missing, in `run_dir`, and rebuild its matrix.

    The recipe is the one the run executed (`recipe.resolved.yaml`), on the executor it
    names. Trials with a `trial_<id>.json` are kept and not run again; the missing ids run
    with the seeds the first attempt would have used; cells that errored or were never
    reached run in full. The previous matrix files are kept under `previous/<timestamp>/`;
    `host_env.json` and existing `env.json` files are kept (an environment never probed is
    probed before its first cell). Raises `AortaUsageError` when `run_dir` is not a triage
    run directory or another aorta process works in it, `TrialStillRunningError` when a
    trial an earlier attempt started is still running in a process that outlived it,
    `TriageInterrupted` on Ctrl-C (after writing the partial matrix). A run directory whose
    recipe would execute something this machine's registry does not vouch for raises
    `UntrustedRecipeError` unless `trust_environments` is set, or this user started the run
    from the recipe as it is now (`recipe.signature`). A run directory another user owns or
    others can write is refused (`strict_modes`) unless `allow_shared_writable`.
    """
    recipe, digest = read_run_recipe(run_dir)
    label = str(RunDir(run_dir).resolved_recipe)
    check_run_trust(
        recipe,
        run_dir,
        digest,
        label=label,
        trusted=trust_environments,
        allow_shared_writable=allow_shared_writable,
    )
    executor = executor or executor_for(recipe, progress=progress, detach=detach)
    executor.check()
    moment = now or datetime.now(UTC)
    run = RunDir(run_dir)
    rank, _ = distributed_rank()
    reporter = reporter or NullMatrixReporter()
    if executor.in_process and rank != 0:
        manifest = _manifest(run, recipe, moment).resumed(iso_stamp(moment))
        context = _resume_context(recipe, run, reporter, probe, writer=False)
        return RunOutcome(run_dir, _conclude(context, manifest, executor.execute(context)))
    with run_dir_lock(run_dir):
        executor.settle(run, recipe)
        # Read under the lock: the trials on disk are final only once no other process writes.
        manifest = _manifest(run, recipe, moment).resumed(iso_stamp(moment))
        context = _resume_context(recipe, run, reporter, probe, writer=True)
        _probe_host(run, probe)  # the first attempt may have died before its probe
        archive_matrix(run_dir, moment)
        # run.json is rewritten with the matrix: a detached resume (no matrix) records nothing.
        return RunOutcome(run_dir, _conclude(context, manifest, executor.execute(context)))


def _resume_context(
    recipe: Recipe, run: RunDir, reporter: MatrixReporter, probe: Probe, *, writer: bool
) -> RunContext:
    return RunContext(
        recipe,
        run,
        reporter,
        probe,
        writer=writer,
        earlier={cell.name: trials_on_disk(run.path, cell) for cell in recipe.cells},
        digests=image_digests(run.path),
    )


def _manifest(run: RunDir, recipe: Recipe, moment: datetime) -> RunManifest:
    """The run's manifest (`run.json`, or derived from an older run's `matrix.json`); a
    fresh one when the run died before writing either."""
    from aorta.triage.slurm.state import is_slurm_run

    recorded: ExecutorName = "slurm" if is_slurm_run(run.path) else "local"
    manifest = read_manifest(run, executor=recorded, fallback_timestamp=iso_stamp(moment))
    if manifest is None:
        seed = recipe.order_seed if recipe.order == "interleaved" else None
        manifest = RunManifest(iso_stamp(moment), recorded, order_seed=seed)
    return manifest


def _cell_stats(run: RunDir, cell: Cell, previous_errors: dict[str, str]) -> CellStats:
    results = trials_on_disk(run.path, cell)
    if not results:
        reason = previous_errors.get(cell.name, NO_TRIALS)
        return error_cell(cell.name, reason, trials_requested=cell.trials)
    return cell_stats(cell, results)


def _slurm_unfinished(run: RunDir, recipe: Recipe) -> bool:
    """Whether `run` is a SLURM run whose executor has not seen every trial final."""
    from aorta.triage.slurm.state import is_slurm_run, load_state

    if not is_slurm_run(run.path):
        return False
    return not load_state(run.path, {cell.name: cell.trials for cell in recipe.cells}).finished


def _in_progress(recipe: Recipe, run: RunDir, stats: Sequence[CellStats]) -> tuple[str, ...]:
    """The cells of an unfinished SLURM run whose trials are not all on disk and that no
    rule has stopped (their stop rule, or the adaptive rule on the rounds complete so far)."""
    decided: frozenset[str] = frozenset()
    if recipe.adaptive is not None:
        results = {cell.name: trials_on_disk(run.path, cell) for cell in recipe.cells}
        decided = due_round(recipe, results).stopped
    return tuple(
        s.name
        for s in stats
        if s.trials_run < recipe.cell(s.name).trials
        and not s.stopped_early
        and s.name not in decided
    )


def reanalyse(
    run_dir: Path,
    *,
    threshold: float | None = None,
    alpha: float | None = None,
    now: datetime | None = None,
) -> MatrixReport:
    """Rebuild and rewrite `run_dir`'s matrix from its files (optionally with another
    threshold or alpha); nothing runs. A cell with no trial files keeps the error the run
    recorded for it; the replaced matrix is kept under `previous/<timestamp>/`."""
    for flag, value, check in (
        ("--confound-threshold", threshold, threshold_problem),
        ("--alpha", alpha, alpha_problem),
    ):
        problem = None if value is None else check(value)
        if problem:
            raise AortaUsageError(f"{flag}: {problem}, got {value!r}")
    recipe = load_run_recipe(run_dir, threshold=threshold, alpha=alpha)
    run = RunDir(run_dir)
    moment = now or datetime.now(UTC)
    with run_dir_lock(run_dir):
        manifest = _manifest(run, recipe, moment)
        errors = dict(manifest.cell_errors)
        unfinished = _slurm_unfinished(run, recipe)
        if unfinished:  # a cell without trials yet is waiting, not broken
            errors = {cell.name: ON_SLURM for cell in recipe.cells}
        stats = [_cell_stats(run, cell, errors) for cell in recipe.cells]
        # Cells an interrupted run never reached, unless their trials have appeared since.
        not_run = tuple(s.name for s in stats if s.error and s.name in manifest.cells_not_run)
        manifest = dataclasses.replace(
            manifest,
            cells_not_run=not_run,
            cell_errors={s.name: s.error for s in stats if s.error},
        )
        in_progress = _in_progress(recipe, run, stats) if unfinished else ()
        report = _report(recipe, run, manifest, stats, in_progress)
        archive_matrix(run_dir, moment)
        write_report(report)
        write_manifest(run, manifest)
    return report


def run(
    recipe: Recipe,
    target: Path,
    *,
    resuming: bool = False,
    reporter: MatrixReporter | None = None,
    trust_environments: bool = False,
    progress: SlurmProgress | None = None,
    detach: bool = False,
    plot_drawer: PlotDrawer | None = None,
    allow_shared_writable: bool = False,
) -> RunOutcome:
    """`aorta triage run` in one call: `start` `recipe` under the output root `target`, or
    (`resuming`) `resume` the run directory `target` whose recorded recipe `recipe` is; on
    the executor the recipe names (`progress`, `detach`: SLURM's)."""
    if resuming:
        return resume(
            target,
            reporter=reporter,
            trust_environments=trust_environments,
            progress=progress,
            detach=detach,
            allow_shared_writable=allow_shared_writable,
        )
    executor = executor_for(recipe, progress=progress, detach=detach)
    return start(recipe, target, executor=executor, reporter=reporter, plot_drawer=plot_drawer)


def run_recipe(
    recipe: Recipe,
    output_root: Path,
    *,
    reporter: MatrixReporter | None = None,
    probe: Probe = collect_env,
    now: datetime | None = None,
    plot_drawer: PlotDrawer | None = None,
) -> MatrixReport:
    """Run `recipe` under `output_root` on the executor it names and return the report.

    `start` without a detach: the report is always there. Under torchrun the ranks other
    than 0 return an unwritten report whose `run_dir` does not exist.
    """
    outcome = start(
        recipe, output_root, reporter=reporter, probe=probe, now=now, plot_drawer=plot_drawer
    )
    assert outcome.report is not None  # only a detached SLURM run has none
    return outcome.report


def resume_run(
    run_dir: Path,
    *,
    reporter: MatrixReporter | None = None,
    probe: Probe = collect_env,
    now: datetime | None = None,
    trust_environments: bool = False,
    allow_shared_writable: bool = False,
) -> MatrixReport:
    """`resume` without a detach: the report is always there."""
    outcome = resume(
        run_dir,
        reporter=reporter,
        probe=probe,
        now=now,
        trust_environments=trust_environments,
        allow_shared_writable=allow_shared_writable,
    )
    assert outcome.report is not None  # only a detached SLURM run has none
    return outcome.report
