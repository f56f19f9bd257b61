"""Adaptive trials in a run: the trial records' outcomes as the adaptive rule reads them.

`look_before_round` is the local scheduler's step (it runs round after round in one
process); `due_round` is the same rule read from the trial records alone, for an executor
that cannot hold the rounds in a loop of its own (SLURM submits one array per round and
learns what finished from the trial files).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
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


@dataclass(frozen=True)
class DueRound:
    """Where an adaptive run stands on its trial records: the round now due and who runs it."""

    index: int  # the first round not yet complete (the rule's last round + 1 once it is done)
    cells: tuple[str, ...]  # the cells that run trial `index`, recipe order; () once done
    stopped: frozenset[str]  # cells the rule stopped before round `index` (no more trials)


def due_round(recipe: Recipe, results: Mapping[str, Sequence[TrialResult]]) -> DueRound:
    """Replay the rule over the complete rounds of `results` (trial id k = round k): the first
    round with a trial still to come, or where the rule ended.

    Round k is complete once every cell the rule kept open before it has trial k on disk
    (an `error` record counts: it is final). The looks are `look_before_round`'s, in the same
    order, so any executor that runs exactly the due round's trials ends with the trials the
    local scheduler would have run on the same outcomes.
    """
    if recipe.adaptive is None:
        raise ValueError("due_round: the recipe is not adaptive")
    adaptive = recipe.adaptive
    rule = AdaptiveRule(adaptive.max_trials, recipe.confound.alpha, adaptive.rule)
    on_disk = {name: {r.trial_id for r in trials} for name, trials in results.items()}
    stopped: set[str] = set()
    rounds = max((cell.trials for cell in recipe.cells), default=0)
    for k in range(rounds):
        if k > 0:
            stopped |= look_before_round(rule, recipe, results, k).stopping
        due = tuple(c.name for c in recipe.cells if c.name not in stopped and k < c.trials)
        if not due or any(k not in on_disk.get(name, ()) for name in due):
            return DueRound(k, due, frozenset(stopped))
    return DueRound(rounds, (), frozenset(stopped))
