"""The predictive probability of the fixed design's verdict, against brute-force enumeration."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import pytest

from aorta.triage.analysis.curtailment import forecast, predictive_failures
from aorta.triage.analysis.stats import fisher_p_value


def _sequences(remaining: int, failures: int, trials: int) -> dict[tuple[bool, ...], Fraction]:
    """Every sequence of the remaining trials with its chance, trial by trial by Laplace's rule
    of succession (the next trial fails with chance (failures + 1) / (trials + 2))."""
    chances: dict[tuple[bool, ...], Fraction] = {}
    for seq in itertools.product((False, True), repeat=remaining):
        chance, f, t = Fraction(1), failures, trials
        for failed in seq:
            fail = Fraction(f + 1, t + 2)
            chance *= fail if failed else 1 - fail
            f, t = f + failed, t + 1
        chances[seq] = chance
    return chances


@pytest.mark.parametrize(
    ("remaining", "failures", "trials"), [(0, 0, 3), (4, 0, 0), (5, 2, 3), (6, 7, 9)]
)
def test_predictive_failures_is_the_rule_of_succession_summed(
    remaining: int, failures: int, trials: int
) -> None:
    expected = [Fraction(0)] * (remaining + 1)
    for seq, chance in _sequences(remaining, failures, trials).items():
        expected[sum(seq)] += chance
    got = predictive_failures(remaining, failures, trials)
    assert got == pytest.approx([float(e) for e in expected], abs=1e-12)
    assert math.fsum(got) == pytest.approx(1.0, abs=1e-12)


def _brute(
    cell: tuple[int, int], base: tuple[int, int], n: int, level: float, rise: bool
) -> Fraction:
    total = Fraction(0)
    cell_seqs = _sequences(n - cell[1], *cell)
    base_seqs = _sequences(n - base[1], *base)
    for (cs, cp), (bs, bp) in itertools.product(cell_seqs.items(), base_seqs.items()):
        a, b = cell[0] + sum(cs), base[0] + sum(bs)
        side = a > b if rise else a < b
        if fisher_p_value(a, n, b, n) < level and side:
            total += cp * bp
    return total


@pytest.mark.parametrize(
    ("cell", "base", "level", "rise"),
    [
        ((0, 3), (2, 3), 0.05, False),
        ((1, 4), (3, 3), 0.0167, False),
        ((0, 2), (1, 4), 0.05, False),
        ((3, 3), (0, 4), 0.05, True),
        ((2, 6), (5, 6), 0.05, False),
    ],
)
def test_forecast_sums_every_remaining_outcome(
    cell: tuple[int, int], base: tuple[int, int], level: float, rise: bool
) -> None:
    n = 6
    got = forecast(cell, base, n, level, "rise" if rise else "drop")
    assert got.probability == pytest.approx(float(_brute(cell, base, n, level, rise)), abs=1e-12)


def test_the_verdict_is_fixed_exactly_when_no_remaining_outcome_changes_it() -> None:
    # Deterministic curtailment, checked on every state of a 5-trial design: `certain` holds
    # exactly when every way the remaining trials can go gives the same final answer.
    n, level = 5, 0.05
    for k, j in itertools.product(range(1, n + 1), repeat=2):
        for a, b in itertools.product(range(k + 1), range(j + 1)):
            finals = {
                fisher_p_value(a + x, n, b + y, n) < level and a + x < b + y
                for x in range(n - k + 1)
                for y in range(n - j + 1)
            }
            got = forecast((a, k), (b, j), n, level)
            assert got.certain == (len(finals) == 1), (a, k, b, j)
            if got.certain:
                assert got.probability == pytest.approx(1.0 if finals == {True} else 0.0)


def test_with_every_trial_run_the_forecast_is_the_fixed_test() -> None:
    assert forecast((0, 10), (6, 10), 10, 0.05).probability == 1.0  # p = 0.011
    assert forecast((1, 10), (5, 10), 10, 0.05).probability == 0.0  # p = 0.14
    assert forecast((1, 10), (5, 10), 10, 0.05).certain


def test_impossible_counts_are_refused() -> None:
    with pytest.raises(ValueError, match="impossible counts"):
        predictive_failures(3, 4, 2)
