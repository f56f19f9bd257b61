"""From trial records to a judged matrix, as a recipe asks (pure: nothing is read or written)."""

from __future__ import annotations

from collections.abc import Sequence

from aorta.runner.models import TrialResult
from aorta.triage.analysis.cells import CellStats, aggregate_cell
from aorta.triage.analysis.matrix import Matrix, build_matrix
from aorta.triage.recipe import Cell, Recipe


def cell_stats(cell: Cell, results: Sequence[TrialResult]) -> CellStats:
    """Aggregate a recipe cell's trials with its trial budget and stop rule."""
    return aggregate_cell(
        cell.name,
        results,
        trials_requested=cell.trials,
        stop_after_failures=cell.stop_after_failures,
    )


def stop_rule_met(cell: Cell, results: Sequence[TrialResult]) -> bool:
    """Whether the cell's `stop_after` rule is met: enough of its trials failed."""
    limit = cell.stop_after_failures
    return limit is not None and sum(1 for r in results if r.outcome == "failed") >= limit


def build_recipe_matrix(recipe: Recipe, cells: Sequence[CellStats]) -> Matrix:
    """The matrix of `cells` judged as `recipe` says: baseline, threshold, alpha and order."""
    return build_matrix(
        cells,
        baseline=recipe.baseline,
        threshold=recipe.confound.threshold,
        alpha=recipe.confound.alpha,
        # Interleaved trials ran round by round: their ratios are paired by round.
        paired=recipe.order == "interleaved",
    )
