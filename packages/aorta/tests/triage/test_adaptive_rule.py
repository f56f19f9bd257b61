"""The adaptive rule: stop a cell once the fixed design's Holm verdict is (nearly) settled."""

from __future__ import annotations

import random

import pytest

from aorta.triage.analysis.adaptive import (
    CURED,
    NOT_CURED,
    OPEN,
    Counts,
    Decision,
    cells_needing_trials,
    decide,
    fixed_verdicts,
)


def _decide(base: tuple[int, int], n: int = 20, **cells: tuple[int, int]) -> dict[str, Decision]:
    return decide(
        Counts(*base),
        {name: Counts(*c) for name, c in cells.items()},
        {},
        max_trials=n,
        alpha=0.05,
    )


def test_a_clear_cure_is_decided_before_the_maximum() -> None:
    decisions = _decide((10, 14), cure=(0, 14))
    assert decisions["cure"].verdict == CURED
    assert decisions["cure"].reason == "cured after 14 trials (a cure at 20 trials 99 % likely)"


def test_the_same_counts_early_are_still_open() -> None:
    # 0/5 vs 3/5: the 20-trial verdict is likely a cure, but not yet 95 % likely.
    decisions = _decide((3, 5), cure=(0, 5))
    assert decisions["cure"].verdict == OPEN


def test_a_cell_like_the_baseline_is_futile() -> None:
    decisions = _decide((5, 10), same=(6, 10))
    assert decisions["same"].verdict == NOT_CURED
    assert decisions["same"].reason == "futile after 10 trials (a cure at 20 trials 1 % likely)"


def test_a_cell_that_never_failed_is_not_futile_on_a_quiet_baseline() -> None:
    # The baseline has not failed yet either: nothing says the cell cannot cure it.
    assert _decide((0, 6), quiet=(0, 6))["quiet"].verdict == OPEN
    assert _decide((0, 6), quiet=(1, 6))["quiet"].verdict == NOT_CURED


def test_the_other_cells_verdicts_set_a_cells_level_as_holm_does() -> None:
    # b alone at 20 trials: p = 0.048, a cure at alpha. Beside two cures it is tested at alpha
    # too (they pass their shares on); beside two cells like the baseline at alpha / 3.
    assert _decide((11, 20), b=(4, 20))["b"].verdict == CURED
    crowded = _decide((11, 20), a=(0, 20), b=(4, 20), c=(0, 20))
    assert [crowded[n].verdict for n in "abc"] == [CURED, CURED, CURED]
    kept = _decide((11, 20), a=(11, 20), b=(4, 20), c=(12, 20))
    assert [kept[n].verdict for n in "abc"] == [NOT_CURED, NOT_CURED, NOT_CURED]
    assert kept["b"].reason == "a cure out of reach after 20 trials"


def test_a_cell_that_fails_more_is_not_cured_and_counts_as_rejected() -> None:
    decisions = _decide((3, 20), worse=(12, 20), b=(0, 20))
    assert decisions["worse"] == Decision(
        NOT_CURED,
        "fails more after 20 trials (verdict fixed)",
        pytest.approx(0.0079, abs=1e-4),
        "rejected",
    )


def test_at_the_maximum_the_verdicts_are_the_fixed_designs() -> None:
    # With every trial run each verdict is certain; cured exactly where the fixed design says
    # `—` (Holm-adjusted Fisher p < alpha, rate dropped), on random matrices.
    rng = random.Random(3)
    for _ in range(300):
        n = 10
        base = Counts(rng.randint(0, n), n)
        cells = {f"c{i}": Counts(rng.randint(0, n), n) for i in range(3)}
        decisions = decide(base, cells, {}, max_trials=n, alpha=0.05)
        fixed = fixed_verdicts(base, cells, 0.05)
        assert {c: d.verdict == CURED for c, d in decisions.items()} == {
            c: v == CURED for c, v in fixed.items()
        }, (base, cells)


def test_an_undecided_cell_at_the_maximum_says_so() -> None:
    # Two cells at p = 0.041: each would be cured if the other were; Holm cures neither.
    decisions = _decide((10, 20), x=(3, 20), y=(3, 20))
    assert decisions["x"] == Decision(
        OPEN, "max trials reached (20)", pytest.approx(0.0407, abs=1e-4)
    )
    assert cells_needing_trials(decisions, {"x": Counts(3, 20), "y": Counts(3, 20)}, 20) == []


def test_decided_cells_keep_their_verdict_and_stop_getting_trials() -> None:
    earlier = {"done": Decision(CURED, "cured after 12 trials", 0.001, "rejected")}
    counts = {"done": Counts(0, 12), "open": Counts(4, 15)}
    decisions = decide(Counts(8, 15), counts, earlier, max_trials=20, alpha=0.05)
    assert decisions["done"] == earlier["done"]
    assert decisions["open"].verdict == OPEN
    assert cells_needing_trials(decisions, counts, 20) == ["open"]


def test_fixed_verdicts_are_the_matrix_rule() -> None:
    verdicts = fixed_verdicts(Counts(12, 20), {"a": Counts(0, 20), "b": Counts(11, 20)}, 0.05)
    assert verdicts == {"a": CURED, "b": NOT_CURED}


def test_a_bad_maximum_is_refused() -> None:
    with pytest.raises(ValueError, match="max_trials"):
        _decide((1, 1), 0, a=(0, 1))


def test_with_more_looks_each_look_asks_for_more_certainty() -> None:
    # 0/5 against 4/5 with N = 40: a cure at 40 trials is 96 % likely, enough for the 95 % of
    # N = 20 but not for the 97.5 % of twice as many looks.
    decisions = _decide((4, 5), 40, cure=(0, 5))
    assert decisions["cure"].verdict == OPEN
    assert _decide((5, 5), 40, cure=(0, 5))["cure"].verdict == CURED
