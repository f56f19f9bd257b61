"""B2: `run_recipe` — run every cell of a recipe in this interpreter and write the matrix.

One `run_trials` call per cell (a Python call, never a subprocess of `aorta`), probes through
`collect_env` as a library function: `host_env.json` once per invocation, and
`environments/<env>/env.json` once per distinct environment, just before that environment's
first cell. A cell whose environment cannot run (or whose request is rejected) becomes an
`error` row; the other cells still run. Ctrl-C writes a valid matrix of what ran, marked
interrupted with the cells that did not run, then re-raises.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from aorta.atomic import write_json_atomic, write_text_atomic
from aorta.errors import AortaError
from aorta.instrumentation.environment import collect_env
from aorta.instrumentation.models import EnvSnapshot
from aorta.runner.models import RunRequest, TrialResult
from aorta.runner.reporting import TrialReporter
from aorta.runner.trials import distributed_rank, run_trials
from aorta.triage.matrix import CellStats, aggregate_cell, build_matrix, error_cell
from aorta.triage.output import MatrixReport, cell_dir, new_run_dir, write_report
from aorta.triage.recipe import Cell, Recipe, dump_resolved_yaml

# Injected by tests that need a specific probe outcome; the real probe by default.
Probe = Callable[..., EnvSnapshot]

NOT_RUN = "not run: the run was interrupted before this cell"


def _request(recipe: Recipe, cell: Cell, run_dir: Path) -> RunRequest:
    return RunRequest(
        workload=recipe.workload,
        output_dir=cell_dir(run_dir, cell.name),
        mitigations=cell.mitigations,
        environment=cell.environment,
        extra_env=cell.extra_env,
        trials=cell.trials,
        steps=cell.steps,
    )


def _run_cell(
    recipe: Recipe, cell: Cell, run_dir: Path, reporter: TrialReporter | None
) -> CellStats:
    try:
        results = run_trials(_request(recipe, cell, run_dir), reporter)
    except AortaError as exc:  # environment unavailable, bad workload parameter, ...
        return error_cell(cell.name, str(exc), trials_requested=cell.trials)
    return aggregate_cell(cell.name, results, trials_requested=cell.trials)


def _trials_on_disk(recipe: Recipe, cell: Cell, run_dir: Path) -> CellStats | None:
    """What an interrupted cell finished before Ctrl-C: its trial files are complete."""
    paths = sorted(cell_dir(run_dir, cell.name).glob("trial_*.json"))
    results = [TrialResult.from_dict(json.loads(p.read_text(encoding="utf-8"))) for p in paths]
    if not results:
        return None
    return aggregate_cell(cell.name, results, trials_requested=cell.trials)


def _write_probe(path: Path, snapshot: EnvSnapshot) -> None:
    write_json_atomic(path, snapshot.to_dict())


def run_recipe(
    recipe: Recipe,
    output_root: Path,
    *,
    reporter: TrialReporter | None = None,
    probe: Probe = collect_env,
    now: datetime | None = None,
) -> MatrixReport:
    """Run `recipe` under `output_root` and return the written report.

    Creates `<output_root>/<ticket>/<workload>/<timestamp>/` (never reused), writes
    `recipe.resolved.yaml`, `host_env.json`, per-environment `env.json`, per-cell trial JSONs
    and finally `matrix.json` / `matrix.md`. Under torchrun every rank runs every cell (the
    workload's collectives need all ranks) and only rank 0 probes and writes; the other ranks
    return an unwritten report whose `run_dir` does not exist.
    """
    rank, _ = distributed_rank()
    writer = rank == 0
    moment = now or datetime.now(UTC)
    if writer:
        run_dir, stamp = new_run_dir(output_root, recipe, moment)
        write_text_atomic(run_dir / "recipe.resolved.yaml", dump_resolved_yaml(recipe))
    else:
        run_dir = output_root / f"_rank{rank}_writes_nothing"
        stamp = moment.strftime("%Y-%m-%dT%H:%M:%SZ")
    partial: list[str] = []
    if writer:
        host = probe(scope="host")
        _write_probe(run_dir / "host_env.json", host)
        if host.partial:
            partial.append("host")

    probed: set[str] = set()
    stats: list[CellStats] = []
    interrupted = False
    try:
        for cell in recipe.cells:
            env_name = cell.environment.name
            if writer and env_name not in probed:
                # Before the environment's first cell and before any mitigation is applied.
                snapshot = probe(scope="environment", environ=dict(os.environ))
                _write_probe(run_dir / "environments" / env_name / "env.json", snapshot)
                probed.add(env_name)
                if snapshot.partial:
                    partial.append(f"environment {env_name}")
            stats.append(_run_cell(recipe, cell, run_dir, reporter))
    except KeyboardInterrupt:
        interrupted = True
        current = recipe.cells[len(stats)] if len(stats) < len(recipe.cells) else None
        partial_cell = current and _trials_on_disk(recipe, current, run_dir)
        if partial_cell:
            stats.append(partial_cell)
    done = {s.name for s in stats}
    not_run = tuple(c.name for c in recipe.cells if c.name not in done)
    stats.extend(
        error_cell(c.name, NOT_RUN, trials_requested=c.trials)
        for c in recipe.cells
        if c.name in not_run
    )
    matrix = build_matrix(stats, baseline=recipe.baseline, threshold=recipe.confound.threshold)
    report = MatrixReport(
        recipe=recipe,
        matrix=matrix,
        run_dir=run_dir,
        run_timestamp=stamp,
        partial_scopes=tuple(partial),
        interrupted=interrupted,
        cells_not_run=not_run,
    )
    if writer:
        write_report(report)
    if interrupted:
        raise TriageInterrupted(report)
    return report


class TriageInterrupted(KeyboardInterrupt):
    """Ctrl-C during `run_recipe`, after the partial matrix was written (see `.report`)."""

    def __init__(self, report: MatrixReport) -> None:
        super().__init__(f"interrupted; partial matrix in {report.run_dir}")
        self.report = report
