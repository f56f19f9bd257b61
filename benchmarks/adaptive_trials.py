"""Adaptive trials against the fixed design, on simulated matrices with known failure rates.

Each simulated matrix has a baseline and three mitigation cells with known per-trial failure
rates; every cell's trial outcomes are drawn once (seeded), and both designs read the same
draws: the fixed design all `N` of them, the adaptive rule (`aorta.triage.analysis.adaptive`)
one round at a time, a trial for every open cell and for the baseline while any cell is open,
until every cell is decided or has `N` trials. Scenarios: clear cures, no effect anywhere, small
effects, and a mix.

Reported per scenario and overall:
- agreement: matrices in which every cell gets the same verdict (cured `—` or not) from both
  designs; goal >= 95 %;
- family-wise false `—`: matrices in which some cell whose true rate is not below the
  baseline's is called cured (shown for the fixed design too); the goal, <= alpha, is judged
  on the worst scenario that has such cells;
- trials spent by the adaptive rule as a share of the fixed design's `(cells + 1) * N`;
  goal <= 50 %.

Exit 1 when a goal is missed.
"""

from __future__ import annotations

import argparse
import random
import sys
from dataclasses import dataclass

from aorta.triage.analysis.adaptive import (
    CURED,
    Counts,
    Decision,
    cells_needing_trials,
    decide,
    fixed_verdicts,
)

AGREEMENT_GOAL = 0.95
SPENT_GOAL = 0.50


@dataclass(frozen=True)
class Scenario:
    """A matrix's true failure rates: the baseline's and each mitigation cell's."""

    name: str
    baseline: float
    cells: tuple[float, ...]


SCENARIOS = (
    Scenario("clear cures", 0.6, (0.0, 0.0, 0.05)),
    Scenario("no effect", 0.5, (0.5, 0.5, 0.5)),
    Scenario("small effects", 0.5, (0.35, 0.4, 0.3)),
    Scenario("mixed", 0.6, (0.0, 0.6, 0.3)),
)


@dataclass
class Tally:
    """What one scenario's simulated matrices came to."""

    matrices: int = 0
    agreed: int = 0
    false_cure_adaptive: int = 0
    false_cure_fixed: int = 0
    spent: int = 0
    fixed_cost: int = 0


def _counts(draws: list[bool], n: int) -> Counts:
    return Counts(sum(draws[:n]), n)


def simulate(
    scenario: Scenario, rng: random.Random, n_max: int, alpha: float, tally: Tally
) -> None:
    """One matrix: draw its trials, run both designs, add the outcome to `tally`."""
    names = [f"cell{i}" for i in range(len(scenario.cells))]
    draws = {
        name: [rng.random() < rate for _ in range(n_max)]
        for name, rate in zip(names, scenario.cells, strict=True)
    }
    base_draws = [rng.random() < scenario.baseline for _ in range(n_max)]
    fixed = fixed_verdicts(
        _counts(base_draws, n_max), {n: _counts(draws[n], n_max) for n in names}, alpha
    )

    ran = dict.fromkeys(names, 0)
    base_ran = 0
    decisions: dict[str, Decision] = {}
    while True:
        open_cells = cells_needing_trials(
            {n: decisions.get(n, Decision("open", "")) for n in names},
            {n: Counts(0, ran[n]) for n in names},
            n_max,
        )
        if not open_cells:
            break
        for name in open_cells:
            ran[name] += 1
        base_ran = min(n_max, base_ran + 1)
        decisions = decide(
            _counts(base_draws, base_ran),
            {n: _counts(draws[n], ran[n]) for n in names},
            {n: d for n, d in decisions.items() if d.verdict != "open"},
            max_trials=n_max,
            alpha=alpha,
        )
    adaptive = {n: decisions[n].verdict == CURED for n in names}
    nulls = [n for n, rate in zip(names, scenario.cells, strict=True) if rate >= scenario.baseline]
    tally.matrices += 1
    tally.agreed += all(adaptive[n] == (fixed[n] == CURED) for n in names)
    tally.false_cure_adaptive += any(adaptive[n] for n in nulls)
    tally.false_cure_fixed += any(fixed[n] == CURED for n in nulls)
    tally.spent += sum(ran.values()) + base_ran
    tally.fixed_cost += (len(names) + 1) * n_max


def main() -> int:
    """Simulate every scenario; print the figures; exit 1 when a goal is missed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--matrices", type=int, default=300, help="per scenario")
    parser.add_argument("--max-trials", type=int, default=20)
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    total = Tally()
    worst_false = 0.0  # the family-wise false '—' rate of the worst scenario with null cells
    print(f"N = {args.max_trials} trials per cell, alpha = {args.alpha}, {args.matrices} matrices")
    for scenario in SCENARIOS:
        tally = Tally()
        for _ in range(args.matrices):
            simulate(scenario, rng, args.max_trials, args.alpha, tally)
        if any(rate >= scenario.baseline for rate in scenario.cells):
            worst_false = max(worst_false, tally.false_cure_adaptive / tally.matrices)
        for field in tally.__dataclass_fields__:
            setattr(total, field, getattr(total, field) + getattr(tally, field))
        print(
            f"{scenario.name:>14}: agreement {tally.agreed / tally.matrices:6.1%}, "
            f"false '—' adaptive {tally.false_cure_adaptive / tally.matrices:5.1%} "
            f"(fixed {tally.false_cure_fixed / tally.matrices:5.1%}), "
            f"trials spent {tally.spent / tally.fixed_cost:5.1%} of fixed"
        )
    agreement = total.agreed / total.matrices
    spent = total.spent / total.fixed_cost
    # Judged per scenario that has cells without a true cure (pooling with scenarios that
    # have none would dilute it), the worst one counts.
    false_rate = worst_false
    print(
        f"{'overall':>14}: agreement {agreement:6.1%} (goal >= {AGREEMENT_GOAL:.0%}), "
        f"false '—' {false_rate:5.1%} (worst scenario; goal <= {args.alpha:.0%}), "
        f"trials spent {spent:5.1%} of fixed (goal <= {SPENT_GOAL:.0%})"
    )
    missed = [
        name
        for name, ok in (
            ("agreement", agreement >= AGREEMENT_GOAL),
            ("false '—' rate", false_rate <= args.alpha),
            ("trials spent", spent <= SPENT_GOAL),
        )
        if not ok
    ]
    if missed:
        print(f"goal missed: {', '.join(missed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
