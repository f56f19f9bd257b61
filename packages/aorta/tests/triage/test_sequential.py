"""Group-sequential boundaries (Lan-DeMets alpha spending) and the `alpha-spending` adaptive
rule on top of them."""

from __future__ import annotations

import itertools
import math
import random
from statistics import NormalDist

import pytest

from aorta.triage.analysis.adaptive import (
    ADAPTIVE_RULES,
    CURED,
    NOT_CURED,
    OPEN,
    RULES,
    Counts,
    Decision,
    cells_needing_trials,
    decide,
    fixed_verdicts,
)
from aorta.triage.analysis.sequential import boundaries, nominal_levels, spent
from aorta.triage.analysis.spending_rule import conditional_power

FIVE = [0.2, 0.4, 0.6, 0.8, 1.0]


def test_pocock_boundaries_match_the_published_table() -> None:
    # Lan-DeMets Pocock-type spending, 5 equally spaced looks, two-sided 0.05: the classic
    # values 2.438, 2.427, 2.410, 2.397, 2.386 (Jennison & Turnbull 2000, table 7.x; ldbounds).
    got = boundaries(FIVE, 0.05, "pocock")
    assert got == pytest.approx([2.438, 2.427, 2.410, 2.397, 2.386], abs=2e-3)


def test_obrien_fleming_first_look_is_its_closed_form_and_the_last_is_near_fixed() -> None:
    got = boundaries(FIVE, 0.05, "obrien-fleming")
    z = NormalDist().inv_cdf(0.975)
    assert got[0] == pytest.approx(z / math.sqrt(0.2), abs=1e-6)
    assert all(a > b for a, b in itertools.pairwise(got))
    assert z < got[-1] < 2.1  # the last look keeps nearly the fixed design's level


def test_repeated_looks_spend_exactly_alpha_under_the_null() -> None:
    # Monte Carlo of the normal score process: the chance of ever crossing is alpha, where
    # testing each look at 0.05 would give about 0.14.
    rng = random.Random(7)
    bounds = boundaries(FIVE, 0.05, "obrien-fleming")
    runs, crossed = 40_000, 0
    for _ in range(runs):
        score = 0.0
        for t_prev, t, c in zip([0.0, *FIVE], FIVE, bounds, strict=False):
            score += rng.gauss(0.0, math.sqrt(t - t_prev))
            if abs(score) / math.sqrt(t) >= c:
                crossed += 1
                break
    assert crossed / runs == pytest.approx(0.05, abs=0.004)


def test_nominal_levels_rise_over_the_looks() -> None:
    levels = nominal_levels(0.05, 10, "obrien-fleming")
    assert len(levels) == 10 and levels[0] < 1e-4
    assert all(a < b for a, b in itertools.pairwise(levels))
    assert 0.03 < levels[-1] < 0.05


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: spent("linear", 0.5, 0.05), "spending"),
        (lambda: boundaries([0.5, 0.5], 0.05, "pocock"), "increase"),
        (lambda: boundaries([0.5, 1.5], 0.05, "pocock"), "within"),
        (lambda: nominal_levels(0.05, 0, "pocock"), "max_trials"),
    ],
)
def test_bad_arguments_are_refused(call: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()  # type: ignore[operator]


def _decide(base: tuple[int, int], **cells: tuple[int, int]) -> dict[str, Decision]:
    return decide(
        Counts(*base),
        {name: Counts(*c) for name, c in cells.items()},
        {},
        max_trials=20,
        alpha=0.05,
        rule="alpha-spending",
    )


def test_a_clear_cure_is_decided_before_the_maximum() -> None:
    decisions = _decide((10, 14), cure=(0, 14))
    assert decisions["cure"].verdict == CURED


def test_the_same_counts_early_are_still_open() -> None:
    # 0/5 vs 3/5 (Fisher p = 0.17): far from the first looks' strict levels, yet a cure is
    # still within reach.
    decisions = _decide((3, 5), cure=(0, 5))
    assert decisions["cure"].verdict == OPEN


def test_a_cure_out_of_reach_stops_as_not_cured() -> None:
    decisions = _decide((5, 10), same=(6, 10))
    assert decisions["same"].verdict == NOT_CURED
    assert "out of reach" in decisions["same"].reason


def test_a_cure_raises_the_level_of_the_other_cells_within_the_look() -> None:
    # With three cells each is tested at alpha/3; one cure passes its share on (Holm).
    lone = _decide((12, 18), b=(3, 18))
    crowded = _decide((12, 18), a=(0, 18), b=(3, 18), c=(0, 18))
    assert lone["b"].verdict == CURED
    assert crowded["a"].verdict == CURED and crowded["c"].verdict == CURED
    assert crowded["b"].verdict == CURED


def test_decided_cells_keep_their_verdict_and_stop_getting_trials() -> None:
    earlier = {"done": Decision(CURED, "cured after 12 trials", 0.001, "rejected")}
    counts = {"done": Counts(0, 12), "open": Counts(4, 15)}
    decisions = decide(
        Counts(8, 15), counts, earlier, max_trials=20, alpha=0.05, rule="alpha-spending"
    )
    assert decisions["done"] == earlier["done"]
    assert decisions["open"].verdict == OPEN  # p = 0.26 now, a cure still within reach
    assert cells_needing_trials(decisions, counts, 20) == ["open"]


def test_at_the_maximum_an_undecided_cell_says_so_and_stops() -> None:
    # 4/20 vs 11/20: Fisher p = 0.048, below the fixed design's 0.05 but not below the last
    # look's group-sequential level (0.030): the cell ends open, and why.
    decisions = _decide((11, 20), maybe=(4, 20))
    maybe = decisions["maybe"]
    assert (maybe.verdict, maybe.reason) == (OPEN, "max trials reached (20)")
    assert maybe.p_value == pytest.approx(0.0484, abs=1e-4)
    assert cells_needing_trials(decisions, {"maybe": Counts(4, 20)}, 20) == []
    # Without a reachable cure it is decided instead.
    assert _decide((10, 20), same=(5, 20))["same"].verdict == NOT_CURED


def test_fixed_verdicts_are_the_matrix_rule() -> None:
    verdicts = fixed_verdicts(Counts(12, 20), {"a": Counts(0, 20), "b": Counts(11, 20)}, 0.05)
    assert verdicts == {"a": CURED, "b": NOT_CURED}


def test_conditional_power_follows_the_trend() -> None:
    # Half way through 20 trials: a cell far below the baseline is very likely to end cured,
    # one at the baseline's rate almost never; the futility rule stops the latter.
    strong = conditional_power(Counts(0, 10), Counts(7, 10), 20, 0.05)
    none = conditional_power(Counts(5, 10), Counts(5, 10), 20, 0.05)
    assert strong > 0.9
    assert none < 0.01
    decisions = _decide((5, 10), same=(5, 10))
    assert decisions["same"] == Decision(NOT_CURED, "futile after 10 trials", 1.0)


def test_the_recipe_rule_names_are_the_implemented_rules() -> None:
    assert tuple(RULES) == ADAPTIVE_RULES
    assert RULES["alpha-spending"].bound == "guaranteed"
    assert RULES["curtailment"].bound == "measured"
    with pytest.raises(ValueError, match="rule: expected one of curtailment, alpha-spending"):
        decide(Counts(1, 2), {"a": Counts(0, 2)}, {}, max_trials=4, alpha=0.05, rule="bayes")


def test_the_two_rules_differ_where_the_spending_levels_are_strict() -> None:
    # 0/6 against 5/6 (Fisher p = 0.015): curtailment already predicts a cure at 20 trials;
    # the alpha-spending rule's sixth look asks for far less than 0.015 and stays open.
    counts = {"cure": Counts(0, 6)}
    fast = decide(Counts(5, 6), counts, {}, max_trials=20, alpha=0.05)
    guarded = decide(Counts(5, 6), counts, {}, max_trials=20, alpha=0.05, rule="alpha-spending")
    assert fast["cure"].verdict == CURED
    assert guarded["cure"] == Decision(OPEN, "open after 6 trials", pytest.approx(0.0152, abs=1e-4))
