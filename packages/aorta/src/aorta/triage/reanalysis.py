"""`aorta triage matrix <run-dir>`: rebuild a run's matrix from the files on disk.

Nothing runs: the recipe comes back from `recipe.resolved.yaml` (the recipe as executed, so
the registry of today plays no part), every cell from its `cells/<cell>/trial_*.json`, and a
cell that has no trial files keeps the error recorded in the previous `matrix.json`. The
previous `matrix.md` / `matrix.json` / `matrix.png` are moved to `previous/<timestamp>/`
first: a re-analysis never destroys the matrix it replaces.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

from aorta.errors import AortaUsageError
from aorta.triage.confound import alpha_problem, threshold_problem
from aorta.triage.matrix import CellStats, error_cell
from aorta.triage.output import MatrixReport, write_report
from aorta.triage.recipe import Cell, Recipe, build_recipe_matrix
from aorta.triage.rundir import (
    archive_matrix,
    cell_stats,
    image_digests,
    load_run_recipe,
    partial_scopes,
    previous_matrix,
    run_dir_lock,
    trials_on_disk,
)
from toolkit_core.timestamps import iso_stamp

NO_TRIALS = "no trial results on disk"
ON_SLURM = "not finished: its trials are still queued or running on SLURM"


def _cell_stats(run_dir: Path, cell: Cell, previous_errors: Mapping[str, str]) -> CellStats:
    results = trials_on_disk(run_dir, cell)
    if not results:
        reason = previous_errors.get(cell.name, NO_TRIALS)
        return error_cell(cell.name, reason, trials_requested=cell.trials)
    return cell_stats(cell, results)


def _slurm_unfinished(run_dir: Path, recipe: Recipe) -> bool:
    """Whether `run_dir` is a SLURM run whose driver has not seen every trial final."""
    from aorta.triage.slurm.state import is_slurm_run, load_state

    if not is_slurm_run(run_dir):
        return False
    return not load_state(run_dir, {cell.name: cell.trials for cell in recipe.cells}).finished


def _in_progress(recipe: Recipe, stats: Sequence[CellStats]) -> tuple[str, ...]:
    """The cells of an unfinished SLURM run whose trials are not all on disk."""
    return tuple(
        s.name for s in stats if s.trials_run < recipe.cell(s.name).trials and not s.stopped_early
    )


def reanalyze(
    run_dir: Path,
    *,
    threshold: float | None = None,
    alpha: float | None = None,
    now: datetime | None = None,
) -> MatrixReport:
    """Rebuild and rewrite `run_dir`'s matrix (optionally with another threshold or alpha)."""
    for flag, value, check in (
        ("--confound-threshold", threshold, threshold_problem),
        ("--alpha", alpha, alpha_problem),
    ):
        problem = None if value is None else check(value)
        if problem:
            raise AortaUsageError(f"{flag}: {problem}, got {value!r}")
    recipe = load_run_recipe(run_dir, threshold=threshold, alpha=alpha)
    with run_dir_lock(run_dir):
        previous = previous_matrix(run_dir)
        errors = {c["name"]: c["error"] for c in previous.get("cells", []) if c.get("error")}
        unfinished = _slurm_unfinished(run_dir, recipe)
        if unfinished:  # a cell without trials yet is waiting, not broken
            errors = {cell.name: ON_SLURM for cell in recipe.cells}
        stats = [_cell_stats(run_dir, cell, errors) for cell in recipe.cells]
        matrix = build_recipe_matrix(recipe, stats)
        moment = now or datetime.now(UTC)
        archive_matrix(run_dir, moment)
        # Cells an interrupted run never reached, unless their trials have appeared since.
        not_run = tuple(
            s.name for s in stats if s.error and s.name in previous.get("cells_not_run", ())
        )
        report = MatrixReport(
            recipe=recipe,
            matrix=matrix,
            run_dir=run_dir,
            run_timestamp=previous.get("run_timestamp") or iso_stamp(moment),
            partial_scopes=partial_scopes(run_dir),
            interrupted=bool(previous.get("interrupted")),
            cells_not_run=not_run,
            resumed_at=tuple(previous.get("resumed_at", ())),
            rounds=tuple(tuple(names) for names in previous.get("order", {}).get("rounds", ())),
            image_digests=image_digests(run_dir),
            in_progress=_in_progress(recipe, stats) if unfinished else (),
        )
        write_report(report)
    return report
