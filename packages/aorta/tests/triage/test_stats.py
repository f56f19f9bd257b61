"""`analysis.stats`: known values, determinism and edge cases of the matrix's evidence."""

from __future__ import annotations

import pytest
from scipy.stats import binom, binomtest, fisher_exact  # type: ignore[import-untyped]

from aorta.triage.analysis.stats import (
    bootstrap_ratio_interval,
    fisher_p_value,
    holm_adjust,
    rate_difference_interval,
    trials_needed,
    wilson_interval,
)


def test_wilson_4_of_8_matches_scipy_and_the_textbook_value() -> None:
    low, high = wilson_interval(4, 8)
    # Textbook Wilson score interval for 4/8 at 95 %: 0.2152 .. 0.7848.
    assert low == pytest.approx(0.2152, abs=1e-4)
    assert high == pytest.approx(0.7848, abs=1e-4)
    ci = binomtest(4, 8).proportion_ci(confidence_level=0.95, method="wilson")
    assert (low, high) == pytest.approx((ci.low, ci.high))


def test_wilson_at_the_extremes_stays_within_unit_interval_and_is_not_degenerate() -> None:
    low, high = wilson_interval(0, 8)
    assert low == 0.0
    assert 0.3 < high < 0.4  # 0/8 still leaves room for a ~1 in 3 failure rate
    low, high = wilson_interval(8, 8)
    assert 0.6 < low < 0.7
    assert high == 1.0


def test_wilson_widens_with_confidence() -> None:
    wide = wilson_interval(4, 8, confidence=0.99)
    narrow = wilson_interval(4, 8, confidence=0.80)
    assert wide[0] < narrow[0] < narrow[1] < wide[1]


@pytest.mark.parametrize(
    ("failures", "trials", "confidence"), [(0, 0, 0.95), (9, 8, 0.95), (-1, 8, 0.95), (1, 8, 1.0)]
)
def test_wilson_rejects_impossible_input(failures: int, trials: int, confidence: float) -> None:
    with pytest.raises(ValueError, match=r"trials|failures|confidence"):
        wilson_interval(failures, trials, confidence)


def test_fisher_4_of_8_vs_0_of_8_is_about_0_077() -> None:
    p = fisher_p_value(4, 8, 0, 8)
    assert p == pytest.approx(0.0769, abs=1e-4)  # exactly 1/13
    assert p == pytest.approx(fisher_exact([[4, 4], [0, 8]], alternative="two-sided").pvalue)


def test_fisher_8_of_8_vs_0_of_8_is_highly_significant() -> None:
    assert fisher_p_value(8, 8, 0, 8) < 0.001
    assert fisher_p_value(0, 8, 8, 8) < 0.001  # two-sided: direction does not matter


def test_fisher_identical_counts_give_p_of_one() -> None:
    assert fisher_p_value(3, 8, 3, 8) == 1.0


def test_fisher_rejects_impossible_counts() -> None:
    with pytest.raises(ValueError, match="cell"):
        fisher_p_value(9, 8, 0, 8)
    with pytest.raises(ValueError, match="baseline"):
        fisher_p_value(0, 8, 0, 0)


CELL = [515.0, 520.0, 510.0, 518.0, 512.0, 525.0, 509.0, 516.0]
BASE = [412.0, 415.0, 409.0, 414.0, 410.0, 418.0, 411.0, 413.0]


def test_bootstrap_interval_contains_the_point_ratio() -> None:
    point = (sum(CELL) / len(CELL)) / (sum(BASE) / len(BASE))
    interval = bootstrap_ratio_interval(CELL, BASE)
    assert interval is not None
    low, high = interval
    assert low < point < high
    assert high - low < 0.05  # tight data, tight interval


def test_bootstrap_is_deterministic_for_a_seed_and_varies_with_it() -> None:
    first = bootstrap_ratio_interval(CELL, BASE, seed=7)
    assert first == bootstrap_ratio_interval(CELL, BASE, seed=7)
    assert first != bootstrap_ratio_interval(CELL, BASE, seed=8)


def test_bootstrap_of_constant_samples_is_the_exact_ratio() -> None:
    assert bootstrap_ratio_interval([2.0, 2.0, 2.0], [1.0, 1.0]) == pytest.approx((2.0, 2.0))


@pytest.mark.parametrize(
    ("cell", "base"),
    [([1.0], [1.0, 2.0]), ([1.0, 2.0], [1.0]), ([], []), ([1.0, 2.0], [0.0, 0.0])],
)
def test_bootstrap_needs_two_samples_each_and_a_positive_baseline(
    cell: list[float], base: list[float]
) -> None:
    assert bootstrap_ratio_interval(cell, base) is None


def test_bootstrap_ignores_non_finite_samples() -> None:
    with_nan = bootstrap_ratio_interval([*CELL, float("nan")], [*BASE, float("inf")], seed=3)
    assert with_nan == bootstrap_ratio_interval(CELL, BASE, seed=3)


def test_trials_needed_is_none_without_a_difference() -> None:
    assert trials_needed(0.5, 0.5) is None
    assert trials_needed(0.0, 0.0) is None


def test_trials_needed_is_symmetric_and_grows_as_the_difference_shrinks() -> None:
    assert trials_needed(0.5, 0.0) == trials_needed(0.0, 0.5)
    big, small = trials_needed(0.5, 0.0), trials_needed(0.5, 0.25)
    assert big is not None and small is not None
    assert big < small


def _fisher_power(n: int, p1: float, p2: float, alpha: float = 0.05) -> float:
    """Exact power of the two-sided Fisher test with n trials per group (full enumeration)."""
    power = 0.0
    for x in range(n + 1):
        for y in range(n + 1):
            if fisher_exact([[x, n - x], [y, n - y]]).pvalue < alpha:
                power += float(binom.pmf(x, n, p1) * binom.pmf(y, n, p2))
    return power


def test_trials_needed_gives_fisher_at_least_the_requested_power() -> None:
    # The continuity-corrected approximation must not promise power Fisher cannot deliver.
    n = trials_needed(0.5, 0.0)
    assert n == 15
    assert _fisher_power(n, 0.5, 0.0) >= 0.8
    n = trials_needed(0.75, 0.25)
    assert n is not None
    assert _fisher_power(n, 0.75, 0.25) >= 0.8


@pytest.mark.parametrize(
    ("p_base", "p_cell", "alpha", "power"),
    [(-0.1, 0.5, 0.05, 0.8), (0.5, 1.1, 0.05, 0.8), (0.5, 0.0, 0.0, 0.8), (0.5, 0.0, 0.05, 1.0)],
)
def test_trials_needed_rejects_bad_input(
    p_base: float, p_cell: float, alpha: float, power: float
) -> None:
    with pytest.raises(ValueError, match="must be"):
        trials_needed(p_base, p_cell, alpha=alpha, power=power)


def test_holm_adjusts_a_hand_computed_family() -> None:
    # Sorted: 0.005 x4 = 0.02, 0.01 x3 = 0.03, 0.03 x2 = 0.06, 0.04 x1 = 0.04 -> 0.06 (running
    # maximum: an adjusted p never falls below a smaller p's).
    adjusted = holm_adjust([0.01, 0.04, 0.03, 0.005])
    assert adjusted == pytest.approx([0.03, 0.06, 0.06, 0.02])


def test_holm_caps_at_one_keeps_ties_and_skips_untested_cells() -> None:
    # None (no test: baseline, errored cell) is not part of the family: m = 2 here.
    assert holm_adjust([None, 0.02, None, 0.6]) == [None, pytest.approx(0.04), None, 0.6]
    # Ties: 0.02 x3 = 0.06, then 0.02 x2 = 0.04 -> 0.06 for both; 0.5 x1 -> 0.5.
    assert holm_adjust([0.02, 0.5, 0.02]) == pytest.approx([0.06, 0.5, 0.06])
    assert holm_adjust([0.4, 0.9, 0.7]) == [1.0, 1.0, 1.0]  # 0.4 x3 = 1.2, capped
    assert holm_adjust([0.03]) == [0.03]  # a family of one is not adjusted
    assert holm_adjust([]) == []
    assert holm_adjust([None]) == [None]


def test_holm_of_ten_cells_at_p_0_01_is_no_longer_significant_each() -> None:
    # Ten mitigations at p = 0.01 each: unadjusted, every one would read "trust it".
    assert holm_adjust([0.01] * 10) == pytest.approx([0.1] * 10)


@pytest.mark.parametrize("bad", [-0.1, 1.5, float("nan")])
def test_holm_rejects_impossible_p_values(bad: float) -> None:
    with pytest.raises(ValueError, match="p-values"):
        holm_adjust([0.1, bad])


@pytest.mark.parametrize(
    ("counts", "expected"),
    [
        # Newcombe (1998), Statistics in Medicine 17:873, Table II, method 10.
        ((56, 70, 48, 80), (0.0524, 0.3339)),
        ((9, 10, 3, 10), (0.1705, 0.8090)),
        ((6, 7, 2, 7), (0.0582, 0.8062)),
        ((5, 56, 0, 29), (-0.0381, 0.1926)),
    ],
)
def test_rate_difference_interval_matches_newcombes_published_values(
    counts: tuple[int, int, int, int], expected: tuple[float, float]
) -> None:
    assert rate_difference_interval(*counts) == pytest.approx(expected, abs=1e-4)


def test_rate_difference_interval_at_the_extremes() -> None:
    # 8/8 vs 8/8: the rates may still differ by up to 1 - (Wilson lower bound of 8/8).
    low, high = rate_difference_interval(8, 8, 8, 8)
    assert high == pytest.approx(1.0 - wilson_interval(8, 8)[0])
    assert low == pytest.approx(-high)
    # 8/8 vs 0/8: the difference is at most 1 and the interval stays within [-1, 1].
    low, high = rate_difference_interval(8, 8, 0, 8)
    assert 0.0 < low < 1.0 and high == 1.0
    with pytest.raises(ValueError, match="trials"):
        rate_difference_interval(0, 0, 1, 2)
