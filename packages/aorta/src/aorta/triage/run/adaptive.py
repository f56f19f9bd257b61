"""Adaptive trials in a run: the trial records' outcomes as the adaptive rule reads them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from aorta.runner.models import TrialResult
from aorta.triage.analysis.adaptive_replay import AdaptiveRule, Outcomes
from aorta.triage.recipe import Recipe


def outcomes(results: Iterable[TrialResult]) -> dict[int, bool]:
    """Trial id -> failed, for the trials that measured something (errors left out)."""
    return {r.trial_id: r.outcome == "failed" for r in results if r.outcome != "error"}


@dataclass(frozen=True)
class AdaptiveLook:
    """What the adaptive rule says before a round: which cells stop now."""

    stopping: frozenset[str]  # cells (the baseline included) that get no more trials


def look_before_round(
    rule: AdaptiveRule,
    recipe: Recipe,
    results: Mapping[str, Iterable[TrialResult]],
    round_index: int,
) -> AdaptiveLook:
    """Advance `rule` over the rounds before `round_index`; the cells it has stopped.

    A decided cell stops; the baseline stops once no other cell needs trials.
    """
    cells: dict[str, Outcomes] = {
        name: outcomes(trials) for name, trials in results.items() if name != recipe.baseline
    }
    rule.advance(outcomes(results.get(recipe.baseline, ())), cells, round_index)
    needing = set(rule.needing(cells))
    stopping = {name for name in cells if name not in needing}
    if not needing:
        stopping.add(recipe.baseline)
    return AdaptiveLook(frozenset(stopping))
