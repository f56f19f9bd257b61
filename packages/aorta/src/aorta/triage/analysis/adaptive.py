"""Adaptive trials: which rule judges the open cells after each round (pure logic).

After every round (one more trial for each open cell, and for the baseline while any cell is
open) `decide` judges the open cells; a decided cell gets no more trials. Two rules are
offered, chosen once per run (`adaptive: {rule: ...}`, `--adaptive-rule`):

- `curtailment` (the default; `aorta.triage.analysis.curtailment_rule`): stop a cell once the
  fixed design's `max_trials` verdict is (nearly) settled, by its predictive probability.
  Fewest trials, verdicts the fixed design's; its family-wise false-cure rate is measured
  (`benchmarks/adaptive_trials.py`), not guaranteed.
- `alpha-spending` (`aorta.triage.analysis.spending_rule`): Lan-DeMets alpha spending over the
  looks within a group-sequential Holm procedure: the family-wise false-cure rate is at most
  alpha by construction, at the price of more trials and of borderline cells left open.

Both share the cell counts, the decisions and the Holm step-down within a look
(`aorta.triage.analysis.adaptive_base`), re-exported here for the callers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

from aorta.triage.analysis import curtailment_rule, spending_rule
from aorta.triage.analysis.adaptive_base import (
    ADAPTIVE_RULES,
    CURED,
    DEFAULT_ADAPTIVE_RULE,
    NOT_CURED,
    OPEN,
    Counts,
    Decision,
    Judge,
    cells_needing_trials,
    fixed_verdicts,
    step_down,
)

__all__ = [
    "ADAPTIVE_RULES",
    "CURED",
    "DEFAULT_ADAPTIVE_RULE",
    "NOT_CURED",
    "OPEN",
    "RULES",
    "Counts",
    "Decision",
    "Rule",
    "cells_needing_trials",
    "decide",
    "fixed_verdicts",
]


@dataclass(frozen=True)
class Rule:
    """An adaptive rule: its judge, its name in matrix.json and the bound it carries."""

    judge: Judge
    name: str  # matrix.json's `adaptive.rule`
    bound: Literal["guaranteed", "measured"]  # its family-wise false-cure rate <= alpha


RULES: Final[Mapping[str, Rule]] = {
    "curtailment": Rule(curtailment_rule.judge, curtailment_rule.NAME, "measured"),
    "alpha-spending": Rule(spending_rule.judge, spending_rule.NAME, "guaranteed"),
}


def decide(
    baseline: Counts,
    cells: Mapping[str, Counts],
    decided: Mapping[str, Decision],
    *,
    max_trials: int,
    alpha: float,
    rule: str = DEFAULT_ADAPTIVE_RULE,
) -> dict[str, Decision]:
    """Judge every cell not in `decided` (the verdicts of earlier looks, which stand) by
    `rule` (one of `ADAPTIVE_RULES`), Holm step-down within the look."""
    if rule not in RULES:
        raise ValueError(f"rule: expected one of {', '.join(RULES)}, got {rule!r}")
    return step_down(
        baseline, cells, decided, max_trials=max_trials, alpha=alpha, judge=RULES[rule].judge
    )
