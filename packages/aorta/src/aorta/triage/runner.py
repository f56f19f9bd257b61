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

from aorta.atomic import write_json_atomic, write_text_atomic
from aorta.errors import AortaError
from aorta.instrumentation.environment import collect_env
from aorta.instrumentation.models import EnvSnapshot
from aorta.runner.launchers import image_digest
from aorta.runner.models import RunRequest, TrialResult
from aorta.runner.trials import distributed_rank, run_trials
from aorta.timestamps import iso_stamp
from aorta.triage.matrix import CellStats, aggregate_cell, error_cell
from aorta.triage.output import MatrixReport, cell_dir, new_run_dir, write_report
from aorta.triage.recipe import Cell, Recipe, build_recipe_matrix, check_trust, dump_resolved_yaml
from aorta.triage.reporting import CellPlan, MatrixReporter, NullMatrixReporter
from aorta.triage.rundir import (
    IMAGE_FILE,
    RESOLVED_NAME,
    archive_matrix,
    image_digests,
    load_run_recipe,
    partial_scopes,
    previous_matrix,
    run_dir_lock,
    trials_on_disk,
)

# Injected by tests that need a specific probe outcome; the real probe by default.
Probe = Callable[..., EnvSnapshot]

NOT_RUN = "not run: the run was interrupted before this cell"


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
    digests: dict[str, str] = field(default_factory=dict)  # docker environment -> image digest


def _request(recipe: Recipe, cell: Cell, run_dir: Path, trial_ids: Sequence[int]) -> RunRequest:
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
        # What the recipe resolved (or recorded, when re-run or resumed), not today's registry.
        pinned_mitigations=cell.mitigation_entries,
        fingerprint_kernels=recipe.fingerprint_kernels,
    )


def _plan(recipe: Recipe, earlier: dict[str, list[TrialResult]]) -> list[CellPlan]:
    plans = []
    for cell in recipe.cells:
        done = {r.trial_id for r in earlier.get(cell.name, ())}
        missing = tuple(i for i in range(cell.trials) if i not in done)
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


def _run_cell(session: _Session, cell: Cell, plan: CellPlan) -> CellStats:
    earlier = session.earlier.get(cell.name, [])
    if not plan.to_run:
        return aggregate_cell(cell.name, earlier, trials_requested=cell.trials)
    request = _request(session.recipe, cell, session.run_dir, plan.to_run)
    try:
        results = run_trials(request, session.reporter)
    except AortaError as exc:  # environment unavailable, bad workload parameter, ...
        _write_error_file(session, cell, str(exc), None)
        return error_cell(cell.name, str(exc), trials_requested=cell.trials)
    everything = [*earlier, *results]
    stats = aggregate_cell(cell.name, everything, trials_requested=cell.trials)
    if stats.error is not None:  # every trial errored
        trace = next((r.traceback for r in everything if r.errored and r.traceback), None)
        _write_error_file(session, cell, stats.error, trace)
    return stats


def _probe_environment(session: _Session, env_name: str, partial: list[str]) -> None:
    # Before the environment's first cell and before any mitigation is applied.
    snapshot = session.probe(scope="environment", environ=dict(os.environ))
    path = session.run_dir / "environments" / env_name / "env.json"
    write_json_atomic(path, snapshot.to_dict())
    session.probed.add(env_name)
    if snapshot.partial:
        partial.append(f"environment {env_name}")


def _record_image_digest(session: _Session, cell: Cell) -> None:
    """After a docker environment's first cell ran (the engine pulled it): which image ran."""
    env = cell.environment
    if env.kind != "docker" or env.image is None or env.name in session.digests:
        return
    digest = image_digest(env.image)
    session.digests[env.name] = digest
    path = session.run_dir / "environments" / env.name / IMAGE_FILE
    write_json_atomic(path, {"image": env.image, "digest": digest}, overwrite=True)


def _finish_interrupted(session: _Session, cell: Cell) -> CellStats | None:
    """What the cell Ctrl-C hit finished: its trial files on disk are complete."""
    if not session.writer:
        results = session.earlier.get(cell.name, [])
    else:
        results = trials_on_disk(session.run_dir, cell)
    if not results:
        return None
    return aggregate_cell(cell.name, results, trials_requested=cell.trials)


def _run_cells(session: _Session, partial: list[str]) -> MatrixReport:
    recipe = session.recipe
    plans = _plan(recipe, session.earlier)
    session.reporter.matrix_started(plans)
    stats: dict[str, CellStats] = {}
    stopped: BaseException | None = None
    try:
        for index, (cell, plan) in enumerate(zip(recipe.cells, plans, strict=True)):
            env_name = cell.environment.name
            if session.writer and plan.to_run and env_name not in session.probed:
                _probe_environment(session, env_name, partial)
            session.reporter.cell_started(index)
            stats[cell.name] = _run_cell(session, cell, plan)
            if session.writer and plan.to_run:
                _record_image_digest(session, cell)
            session.reporter.cell_finished(index, stats[cell.name])
    except (KeyboardInterrupt, Exception) as exc:
        # Ctrl-C, or a crash of the runner itself (workload errors are failed trials and
        # environment errors are error cells, so this is a bug or e.g. a full disk): either
        # way the trials that finished are written into a matrix before it surfaces.
        stopped = exc
        current = next((c for c in recipe.cells if c.name not in stats), None)
        finished = current and _finish_interrupted(session, current)
        if current and finished:
            stats[current.name] = finished
    not_run = tuple(c.name for c in recipe.cells if c.name not in stats)
    for cell in recipe.cells:
        if cell.name in not_run:
            earlier = session.earlier.get(cell.name)
            stats[cell.name] = (
                aggregate_cell(cell.name, earlier, trials_requested=cell.trials)
                if earlier
                else error_cell(cell.name, NOT_RUN, trials_requested=cell.trials)
            )
    ordered = [stats[c.name] for c in recipe.cells]
    matrix = build_recipe_matrix(recipe, ordered)
    report = MatrixReport(
        recipe=recipe,
        matrix=matrix,
        run_dir=session.run_dir,
        run_timestamp=session.run_timestamp,
        partial_scopes=tuple(partial),
        interrupted=stopped is not None,
        cells_not_run=not_run,
        resumed_at=session.resumed_at,
        image_digests=dict(session.digests),
    )
    if session.writer:
        write_report(report)
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
) -> MatrixReport:
    """Run `recipe` under `output_root` and return the written report.

    Creates `<output_root>/<ticket>/<workload>/<timestamp>/` (never reused), writes
    `recipe.resolved.yaml`, `host_env.json`, per-environment `env.json`, per-cell trial JSONs
    and finally `matrix.json` / `matrix.png` / `matrix.md`. Under torchrun every rank runs every
    cell (the workload's collectives need all ranks) and only rank 0 probes and writes; the
    other ranks return an unwritten report whose `run_dir` does not exist. Ctrl-C writes the
    partial matrix and raises `TriageInterrupted`.
    """
    rank, _ = distributed_rank()
    writer = rank == 0
    moment = now or datetime.now(UTC)
    if writer:
        run_dir, stamp = new_run_dir(output_root, recipe, moment)
        write_text_atomic(run_dir / RESOLVED_NAME, dump_resolved_yaml(recipe))
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
    process works in it, `TriageInterrupted` on Ctrl-C (after writing the partial matrix).
    Everything read back is validated like a recipe; a run directory whose recipe would execute
    something this machine's registry does not vouch for (a venv interpreter, a docker image,
    changed mitigation variables, `LD_PRELOAD`-like variables) raises `UntrustedRecipeError`
    unless `trust_environments` is set.
    """
    recipe = load_run_recipe(run_dir)
    check_trust(recipe, label=str(run_dir / RESOLVED_NAME), trusted=trust_environments)
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
            digests=image_digests(run_dir),
        )

    if rank != 0:
        return _run_cells(session(), [])
    with run_dir_lock(run_dir):
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
