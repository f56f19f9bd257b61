"""How likely the fixed design's verdict is, given the trials so far (pure logic).

A matrix with `N` trials per cell ends with each cell's two-sided Fisher test against the
baseline's `N` trials. Partway through, the trials still to come decide that test; this module
weighs every way they can go:

- `predictive_failures`: the chance of each number of failures among a cell's remaining
  trials, given its failures so far. Each trial fails at the cell's unknown rate; with a
  uniform prior on that rate (Beta(1, 1)) the remaining failures follow a beta-binomial law
  (Laplace's rule of succession, trial by trial).
- `forecast`: the chance that the final test ends with `p < level` and the cell's failure rate
  below the baseline's (a cure at that level), summed over the remaining outcomes of the cell
  and the baseline, which are independent given their trials so far; and whether the outcome
  is already certain (every remaining outcome gives the same answer: deterministic
  curtailment).

This is the *predictive probability* of the final verdict (Spiegelhalter, Freedman &
Blackburn 1986, "Monitoring clinical trials: conditional or predictive power?", Controlled
Clinical Trials 7(1):8-17; as a stopping rule for binary outcomes: Lee & Liu 2008, "A
predictive probability design for phase II cancer clinical trials", Clinical Trials
5(2):93-106). Stopping once the fixed design's verdict is (nearly) determined is stochastic
curtailment (Lan, Simon & Halperin 1982, "Stochastically curtailed tests in long-term clinical
trials", Communications in Statistics C 1(3):207-219); with certainty it is deterministic
curtailment, whose verdict equals the fixed design's by construction.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Final, Literal

from aorta.triage.analysis.stats import fisher_p_value

__all__ = ["Direction", "Forecast", "forecast", "predictive_failures"]

Direction = Literal["drop", "rise"]

# Beta(1, 1): every failure rate equally likely before the first trial.
PRIOR: Final = 1.0


@dataclass(frozen=True)
class Forecast:
    """The chance that the final test beats the level asked, and whether that is sure."""

    probability: float
    certain: bool  # every remaining outcome gives the same answer (probability 0 or 1)


def _log_beta(a: float, b: float) -> float:
    return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)


@lru_cache(maxsize=4096)
def predictive_failures(remaining: int, failures: int, trials: int) -> tuple[float, ...]:
    """P(x of the next `remaining` trials fail), x = 0..remaining, after `failures` of `trials`.

    The beta-binomial law of the uniform prior updated by the trials so far. Raises
    `ValueError` for impossible counts.
    """
    if remaining < 0 or not 0 <= failures <= trials:
        raise ValueError(f"impossible counts: {failures} of {trials}, {remaining} remaining")
    a, b = failures + PRIOR, trials - failures + PRIOR
    base = _log_beta(a, b)
    return tuple(
        math.comb(remaining, x) * math.exp(_log_beta(a + x, b + remaining - x) - base)
        for x in range(remaining + 1)
    )


@lru_cache(maxsize=64)
def _final_p_values(cell_trials: int, base_trials: int) -> Any:
    """The final Fisher p-value for every pair of final failure counts (a numpy matrix)."""
    import numpy as np

    return np.array(
        [
            [fisher_p_value(a, cell_trials, b, base_trials) for b in range(base_trials + 1)]
            for a in range(cell_trials + 1)
        ]
    )


def forecast(
    cell: tuple[int, int],
    baseline: tuple[int, int],
    max_trials: int,
    level: float,
    direction: Direction = "drop",
) -> Forecast:
    """The chance that, with `max_trials` trials each, the cell's final test beats `level`.

    `cell` and `baseline` are (failures, trials) so far; each runs up to `max_trials` (a count
    already at or past it has no trials to come). The final two-sided Fisher p-value must be
    below `level` and the cell's final failure rate below the baseline's (`drop`: a cure)
    or above it (`rise`: it fails more).
    """
    import numpy as np

    (a, n_a), (b, n_b) = cell, baseline
    final_a, final_b = max(n_a, max_trials), max(n_b, max_trials)
    p_cell = np.array(predictive_failures(final_a - n_a, a, n_a))
    p_base = np.array(predictive_failures(final_b - n_b, b, n_b))
    finals = _final_p_values(final_a, final_b)[a : a + len(p_cell), b : b + len(p_base)]
    cell_counts = np.arange(a, a + len(p_cell))[:, None]
    base_counts = np.arange(b, b + len(p_base))[None, :]
    lower, higher = cell_counts * final_b, base_counts * final_a
    sides = {"drop": lower < higher, "rise": lower > higher}
    hit = (finals < level) & sides[direction]
    probability = float(p_cell @ hit @ p_base)
    certain = bool(hit.all() or not hit.any())
    return Forecast(min(1.0, max(0.0, probability)), certain)
