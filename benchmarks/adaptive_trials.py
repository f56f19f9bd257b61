"""Adaptive trials against the fixed design, on simulated matrices with known failure rates.

Each simulated matrix has a baseline and three mitigation cells with known per-trial failure
rates; every cell's trial outcomes are drawn once (seeded), and every design reads the same
draws: the fixed design all `N` of them, each adaptive rule (`aorta.triage.analysis.adaptive`:
`curtailment`, the default, and `alpha-spending`) one round at a time, a trial for every open
cell and for the baseline while any cell is open, until every cell is decided or has `N`
trials. Scenarios: clear cures, no effect anywhere, small effects, and a mix.

Reported per scenario and overall:
- agreement: matrices in which every cell gets the same verdict (cured `—` or not) from both
  designs; goal >= 95 %;
- family-wise false `—`: matrices in which some cell whose true rate is not below the
  baseline's is called cured (shown for the fixed design too); the goal, <= alpha, is judged
  on the worst scenario that has such cells;
- trials spent by the adaptive rule as a share of the fixed design's `(cells + 1) * N`;
  goal <= 50 %.

Both rules' figures are printed; the exit status judges the default rule only (the other is
shown for information: its family-wise bound is guaranteed, and it spends more trials).
Exit 1 when a goal of the default rule is missed.
"""

from __future__ import annotations

import argparse
import random
import sys
from dataclasses import dataclass

from aorta.triage.analysis.adaptive import (
    ADAPTIVE_RULES,
    CURED,
    DEFAULT_ADAPTIVE_RULE,
    RULES,
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
    """What one scenario's simulated matrices came to under one rule."""

    matrices: int = 0
    agreed: int = 0
    false_cure_adaptive: int = 0
    false_cure_fixed: int = 0
    spent: int = 0
    fixed_cost: int = 0

    def add(self, other: Tally) -> None:
        """Pool `other` into this tally."""
        for field in self.__dataclass_fields__:
            setattr(self, field, getattr(self, field) + getattr(other, field))


def _counts(draws: list[bool], n: int) -> Counts:
    return Counts(sum(draws[:n]), n)


def _adaptive(
    draws: dict[str, list[bool]], base_draws: list[bool], n_max: int, alpha: float, rule: str
) -> tuple[dict[str, bool], int]:
    """One adaptive run on the drawn outcomes: each cell's cure and the trials spent."""
    names = list(draws)
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
            rule=rule,
        )
    return {n: decisions[n].verdict == CURED for n in names}, sum(ran.values()) + base_ran


def simulate(
    scenario: Scenario, rng: random.Random, n_max: int, alpha: float, tallies: dict[str, Tally]
) -> None:
    """One matrix: draw its trials, run the fixed design and every rule in `tallies` on the
    same draws, add the outcomes to each rule's tally."""
    names = [f"cell{i}" for i in range(len(scenario.cells))]
    draws = {
        name: [rng.random() < rate for _ in range(n_max)]
        for name, rate in zip(names, scenario.cells, strict=True)
    }
    base_draws = [rng.random() < scenario.baseline for _ in range(n_max)]
    fixed = fixed_verdicts(
        _counts(base_draws, n_max), {n: _counts(draws[n], n_max) for n in names}, alpha
    )
    nulls = [n for n, rate in zip(names, scenario.cells, strict=True) if rate >= scenario.baseline]
    for rule, tally in tallies.items():
        adaptive, spent = _adaptive(draws, base_draws, n_max, alpha, rule)
        tally.matrices += 1
        tally.agreed += all(adaptive[n] == (fixed[n] == CURED) for n in names)
        tally.false_cure_adaptive += any(adaptive[n] for n in nulls)
        tally.false_cure_fixed += any(fixed[n] == CURED for n in nulls)
        tally.spent += spent
        tally.fixed_cost += (len(names) + 1) * n_max


def _report(rule: str, per_scenario: list[tuple[Scenario, Tally]], alpha: float) -> list[str]:
    """Print one rule's figures; the goals it misses."""
    total = Tally()
    worst_false = 0.0  # the family-wise false '—' rate of the worst scenario with null cells
    default = " (default; gates the exit status)" if rule == DEFAULT_ADAPTIVE_RULE else ""
    print(f"rule {rule}: {RULES[rule].name}, family-wise bound {RULES[rule].bound}{default}")
    for scenario, tally in per_scenario:
        if any(rate >= scenario.baseline for rate in scenario.cells):
            worst_false = max(worst_false, tally.false_cure_adaptive / tally.matrices)
        total.add(tally)
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
    print(
        f"{'overall':>14}: agreement {agreement:6.1%} (goal >= {AGREEMENT_GOAL:.0%}), "
        f"false '—' {worst_false:5.1%} (worst scenario; goal <= {alpha:.0%}), "
        f"trials spent {spent:5.1%} of fixed (goal <= {SPENT_GOAL:.0%})"
    )
    return [
        name
        for name, ok in (
            ("agreement", agreement >= AGREEMENT_GOAL),
            ("false '—' rate", worst_false <= alpha),
            ("trials spent", spent <= SPENT_GOAL),
        )
        if not ok
    ]


def main() -> int:
    """Simulate every scenario under both rules; print the figures; exit 1 when the default
    rule misses a goal."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--matrices", type=int, default=1000, help="per scenario")
    parser.add_argument("--max-trials", type=int, default=20)
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    print(f"N = {args.max_trials} trials per cell, alpha = {args.alpha}, {args.matrices} matrices")
    per_rule: dict[str, list[tuple[Scenario, Tally]]] = {rule: [] for rule in ADAPTIVE_RULES}
    for scenario in SCENARIOS:
        tallies = {rule: Tally() for rule in ADAPTIVE_RULES}
        for _ in range(args.matrices):
            simulate(scenario, rng, args.max_trials, args.alpha, tallies)
        for rule, tally in tallies.items():
            per_rule[rule].append((scenario, tally))
    missed: dict[str, list[str]] = {}
    for rule in ADAPTIVE_RULES:
        missed[rule] = _report(rule, per_rule[rule], args.alpha)
        if missed[rule]:
            print(f"rule {rule}: goal missed: {', '.join(missed[rule])}")
    return 1 if missed[DEFAULT_ADAPTIVE_RULE] else 0


if __name__ == "__main__":
    sys.exit(main())
