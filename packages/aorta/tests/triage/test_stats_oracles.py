"""The standard-library statistics in `aorta.triage.analysis.stats` agree with scipy's / numpy's.

A triage run imports neither scipy nor (without step times to bootstrap) numpy any more:
importing `scipy.stats` cost more than a short matrix. They stay the oracles here, to 1e-12
relative. Exhaustive over small tables, where triage cells live, plus a
few large ones.
"""

from __future__ import annotations

import itertools
import math
import random

import numpy as np
import pytest

from aorta.triage.analysis.stats import (
    _normal_quantile,
    fisher_p_value,
    percentile,
    sample_std,
    wilson_interval,
)

scipy_stats = pytest.importorskip("scipy.stats")

REL = 1e-12


def _close(ours: float, theirs: float) -> bool:
    return math.isclose(ours, theirs, rel_tol=REL, abs_tol=1e-300)


def test_fisher_matches_scipy_on_every_small_table() -> None:
    for cell_trials, base_trials in itertools.product(range(1, 13), repeat=2):
        for a, b in itertools.product(range(cell_trials + 1), range(base_trials + 1)):
            table = [[a, cell_trials - a], [b, base_trials - b]]
            theirs = min(1.0, float(scipy_stats.fisher_exact(table).pvalue))
            ours = fisher_p_value(a, cell_trials, b, base_trials)
            assert _close(ours, theirs), (table, ours, theirs)


@pytest.mark.parametrize(
    ("a", "n", "b", "m"), [(3, 200, 17, 180), (0, 500, 9, 500), (40, 97, 5, 61)]
)
def test_fisher_matches_scipy_on_large_tables(a: int, n: int, b: int, m: int) -> None:
    theirs = min(1.0, float(scipy_stats.fisher_exact([[a, n - a], [b, m - b]]).pvalue))
    assert _close(fisher_p_value(a, n, b, m), theirs)


@pytest.mark.parametrize("confidence", [0.8, 0.9, 0.95, 0.99])
def test_wilson_matches_scipy(confidence: float) -> None:
    for trials in [*range(1, 31), 100, 1000]:
        for failures in range(trials + 1):
            ci = scipy_stats.binomtest(failures, trials).proportion_ci(
                confidence_level=confidence, method="wilson"
            )
            low, high = wilson_interval(failures, trials, confidence)
            assert _close(low, max(0.0, float(ci.low))), (failures, trials)
            assert _close(high, min(1.0, float(ci.high))), (failures, trials)


def test_normal_quantile_matches_scipy() -> None:
    for probability in [1e-12, 1e-6, 0.01, 0.025, 0.2, 0.5, 0.8, 0.9, 0.975, 0.995, 1 - 1e-9]:
        theirs = float(scipy_stats.norm.ppf(probability))
        assert _close(_normal_quantile(probability), theirs), probability


def test_percentile_and_std_match_numpy() -> None:
    rng = random.Random(5)
    for size in [1, 2, 3, 7, 100, 1001]:
        values = [rng.lognormvariate(3.0, 0.4) for _ in range(size)]
        for q in [0, 1, 25, 50, 75, 99, 100]:
            assert percentile(values, q) == float(np.percentile(values, q)), (size, q)
        if size > 1:
            assert _close(sample_std(values), float(np.std(values, ddof=1)))
