"""matrix.md's "Adaptive trials" section and matrix.json's `adaptive` (rendering only).

For a run with `adaptive`, the looks are replayed from the matrix's trial summaries
(`aorta.triage.analysis.adaptive_replay`) with the run's own alpha and rule: per cell, how many
trials it ran, how it stopped (`decided cured`, `decided not cured`, `reached max trials`,
or `open` when the run ended before the rule did) and the rule's reason.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aorta.triage.analysis.adaptive import RULES
from aorta.triage.analysis.adaptive_replay import AdaptiveRule, CellStop, stop_of
from aorta.triage.analysis.cells import TrialSummary
from aorta.triage.analysis.matrix import Matrix
from aorta.triage.recipe import Recipe

__all__ = ["BASELINE_STOP", "adaptive_json", "adaptive_section", "adaptive_stops"]

BASELINE_STOP = "ran while a cell needed it"
# What each rule does and the family-wise bound it carries, for matrix.md (N, alpha).
_RULE_WORDS: dict[str, Callable[[int, float], str]] = {
    "curtailment": lambda n, alpha: (
        f"{RULES['curtailment'].name}: a cell stops once the {n}-trial Holm verdict at "
        f"family-wise alpha {alpha:g} is settled; the chance of a false cure (`—`) in the "
        f"matrix is measured at or below alpha on simulated matrices, not guaranteed"
    ),
    "alpha-spending": lambda n, alpha: (
        f"{RULES['alpha-spending'].name}: a cell stops once its Fisher test beats its share "
        f"of alpha spent over the looks (group-sequential Holm); the chance of a false cure "
        f"(`—`) in the matrix is at most {alpha:g} by construction, over all the looks"
    ),
}


def _outcomes(trials: tuple[TrialSummary, ...]) -> dict[int, bool]:
    return {t.trial_id: t.outcome == "failed" for t in trials if t.measured}


def adaptive_stops(matrix: Matrix, recipe: Recipe) -> dict[str, CellStop] | None:
    """Each non-baseline cell's stop, replayed from its trials; None for a fixed design."""
    if recipe.adaptive is None:
        return None
    max_trials = recipe.adaptive.max_trials
    # A cell that could not run at all took no part in the rule (as in the run's scheduler).
    trials = {
        row.name: row.stats.trials
        for row in matrix.rows
        if row.stats.error is None or row.stats.trials
    }
    base = _outcomes(trials.get(recipe.baseline, ()))
    cells = {name: _outcomes(t) for name, t in trials.items() if name != recipe.baseline}
    looks = 1 + max((t.trial_id for ts in trials.values() for t in ts), default=-1)
    rule = AdaptiveRule(max_trials, recipe.confound.alpha, recipe.adaptive.rule)
    rule.advance(base, cells, looks)
    return {
        name: stop_of(rule.decisions.get(name), len(trials[name]), max_trials) for name in cells
    }


def adaptive_json(matrix: Matrix, recipe: Recipe) -> dict[str, Any] | None:
    """matrix.json's `adaptive`: the settings and each non-baseline cell's stop."""
    stops = adaptive_stops(matrix, recipe)
    if stops is None or recipe.adaptive is None:
        return None
    return {
        "max_trials": recipe.adaptive.max_trials,
        "alpha": recipe.confound.alpha,
        "rule": RULES[recipe.adaptive.rule].name,
        "family_wise_bound": RULES[recipe.adaptive.rule].bound,
        "cells": {
            name: {
                "trials": stop.trials,
                "stopped": stop.stop,
                "reason": stop.reason,
                "p_value": stop.p_value,
            }
            for name, stop in stops.items()
        },
    }


def adaptive_section(matrix: Matrix, recipe: Recipe) -> list[str]:
    """The section's lines (empty for a fixed design)."""
    stops = adaptive_stops(matrix, recipe)
    if stops is None or recipe.adaptive is None:
        return []
    n, alpha = recipe.adaptive.max_trials, recipe.confound.alpha
    lines = [
        "## Adaptive trials",
        "",
        f"Rounds ran until every cell was decided or had {n} trials "
        f"({_RULE_WORDS[recipe.adaptive.rule](n, alpha)}).",
        "",
        "| Cell | Trials | Stopped | Why |",
        "|---|---|---|---|",
    ]
    base_trials = next((len(r.stats.trials) for r in matrix.rows if r.name == recipe.baseline), 0)
    lines.append(f"| {recipe.baseline} | {base_trials} | {BASELINE_STOP} | |")
    for name, stop in stops.items():
        lines.append(f"| {name} | {stop.trials} | {stop.stop} | {stop.reason} |")
    return [*lines, ""]
