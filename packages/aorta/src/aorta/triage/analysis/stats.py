"""Evidence for the triage matrix: how sure each cell's failure rate and step-time ratio are.

Every matrix cell reports

- a 95 % Wilson interval for its failure rate (`wilson_interval`),
- a two-sided Fisher exact p-value of its failures against the baseline's (`fisher_p_value`),
  Holm-adjusted across the matrix's cells (`holm_adjust`: a matrix is many tests),
- an interval of the drop in failure rate from the baseline's (`rate_difference_interval`), which
  says whether the data rule out a cure,
- a bootstrap 95 % interval of its step-time ratio to the baseline (`bootstrap_ratio_interval`;
  resampling rounds, `paired`, when the cells ran interleaved),

and, when no cell differs significantly from the baseline, the matrix says how many trials per cell
would detect the observed difference (`trials_needed`).

Fisher's test, the Wilson interval and the normal quantiles are computed here from the standard
library (exact integer hypergeometric sums; `statistics.NormalDist` for quantiles): importing
`scipy.stats` costs 1.4-1.7 s on the 2-core machine, more than a whole one-trial matrix of a
short command should. The test suite checks them against scipy to 1e-12 relative. The bootstrap
uses numpy, imported inside the function (aggregation imports it anyway), so that merely importing
this module (or `aorta.triage.analysis.matrix`) never pays for it; `aorta --help` must not.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from statistics import NormalDist

__all__ = [
    "bootstrap_ratio_interval",
    "fisher_p_value",
    "holm_adjust",
    "paired_ratio",
    "percentile",
    "rate_difference_interval",
    "sample_std",
    "trials_needed",
    "wilson_interval",
]


def _check_counts(failures: int, trials: int, what: str) -> None:
    if trials < 1:
        raise ValueError(f"{what}: trials must be >= 1, got {trials}")
    if not 0 <= failures <= trials:
        raise ValueError(f"{what}: failures must be within 0..{trials}, got {failures}")


def _check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be strictly between 0 and 1, got {confidence}")


def wilson_interval(failures: int, trials: int, confidence: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval for a failure rate of `failures` out of `trials`.

    Wilson rather than the normal ("Wald") interval because triage cells hold few trials and
    rates at or near 0 % / 100 %, where Wald collapses to a zero-width interval. Newcombe's
    (1998) closed form, as `scipy.stats.binomtest(...).proportion_ci(method="wilson")` computes
    it (a bound at 0 failures is exactly 0, at `trials` failures exactly 1). Raises `ValueError`
    for `trials < 1` (there is no rate to bound) or `failures` outside `0..trials`.
    """
    _check_counts(failures, trials, "wilson_interval")
    _check_confidence(confidence)
    z = _normal_quantile(0.5 + 0.5 * confidence)
    rate = failures / trials
    denom = 2.0 * (trials + z**2)
    center = (2.0 * trials * rate + z**2) / denom
    delta = z / denom * math.sqrt(4.0 * trials * rate * (1.0 - rate) + z**2)
    low = 0.0 if failures == 0 else center - delta
    high = 1.0 if failures == trials else center + delta
    # Clamp: the closed form can land a hair outside [0, 1] in floating point.
    return max(0.0, low), min(1.0, high)


def _normal_quantile(probability: float) -> float:
    """The standard normal quantile (Wichura's AS241, accurate to about 1e-16)."""
    return NormalDist().inv_cdf(probability)


def fisher_p_value(
    cell_failures: int, cell_trials: int, base_failures: int, base_trials: int
) -> float:
    """Two-sided Fisher exact p-value: does the cell's failure count differ from the baseline's?

    The 2x2 table is (failed, passed) x (cell, baseline). Exact rather than chi-squared because
    the counts are small (a handful of trials per cell). Raises `ValueError` on impossible counts.

    With the margins fixed, the cell's failure count x follows a hypergeometric law; the p-value
    is the total probability of every x no more likely than the observed one (the definition
    `scipy.stats.fisher_exact` uses). The probabilities are compared and summed as exact
    integers (binomial coefficients over a common denominator), so ties are exact ties rather
    than a float tolerance, and the sum is rounded to float once.
    """
    _check_counts(cell_failures, cell_trials, "fisher_p_value (cell)")
    _check_counts(base_failures, base_trials, "fisher_p_value (baseline)")
    failures = cell_failures + base_failures
    # Weight of x cell failures (the denominator comb(all trials, failures) is common to all).
    weights = [
        math.comb(cell_trials, x) * math.comb(base_trials, failures - x)
        for x in range(max(0, failures - base_trials), min(failures, cell_trials) + 1)
    ]
    observed = math.comb(cell_trials, cell_failures) * math.comb(base_trials, base_failures)
    extreme = sum(w for w in weights if w <= observed)
    return min(1.0, float(Fraction(extreme, sum(weights))))


def holm_adjust(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm-Bonferroni adjusted p-values, in the order given; None (no test) stays None.

    The family is the non-None entries, m of them. Sorted ascending, the k-th smallest p
    (k = 1..m) becomes `(m - k + 1) * p`, capped at 1, and then the running maximum of those
    (adjusted values never decrease with p). Rejecting every hypothesis whose adjusted p is
    below `alpha` keeps the chance of any false rejection in the family at most `alpha`, under
    any dependence between the tests (Holm 1979), which a matrix's cells have: they are all
    compared with one baseline. Holm rather than plain Bonferroni: the same guarantee, never
    less power. Raises `ValueError` for a p outside [0, 1] (NaN included).
    """
    for p in p_values:
        if p is not None and not 0.0 <= p <= 1.0:
            raise ValueError(f"p-values must be within [0, 1], got {p}")
    tested = sorted((p, i) for i, p in enumerate(p_values) if p is not None)
    adjusted: list[float | None] = [None] * len(p_values)
    running = 0.0
    for rank, (p, index) in enumerate(tested):
        running = max(running, min(1.0, (len(tested) - rank) * p))
        adjusted[index] = running
    return adjusted


def rate_difference_interval(
    failures_a: int, trials_a: int, failures_b: int, trials_b: int, confidence: float = 0.95
) -> tuple[float, float]:
    """Interval of the failure-rate difference `rate_a - rate_b` (Newcombe's hybrid score).

    Newcombe (1998), method 10: combines the two Wilson intervals (`wilson_interval`), so it
    keeps their behaviour at small counts and at 0 % / 100 %, where the Wald interval of a
    difference collapses to a point. With rates p_a, p_b and Wilson intervals (l_a, u_a),
    (l_b, u_b):

        low  = p_a - p_b - sqrt((p_a - l_a)^2 + (u_b - p_b)^2)
        high = p_a - p_b + sqrt((u_a - p_a)^2 + (p_b - l_b)^2)

    Raises `ValueError` for impossible counts or a confidence outside (0, 1).
    """
    low_a, high_a = wilson_interval(failures_a, trials_a, confidence)
    low_b, high_b = wilson_interval(failures_b, trials_b, confidence)
    rate_a, rate_b = failures_a / trials_a, failures_b / trials_b
    diff = rate_a - rate_b
    low = diff - math.hypot(rate_a - low_a, high_b - rate_b)
    high = diff + math.hypot(high_a - rate_a, rate_b - low_b)
    return max(-1.0, low), min(1.0, high)


def bootstrap_ratio_interval(
    cell_times: Sequence[float],
    baseline_times: Sequence[float],
    *,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
    paired: bool = False,
) -> tuple[float, float] | None:
    """Percentile bootstrap interval of `mean(cell_times) / mean(baseline_times)`.

    Unpaired, the two samples are resampled independently (they come from different cells).
    `paired` (interleaved order: the sequences align round by round) resamples whole rounds,
    the two values of a round together: drift moves both values of a pair alike, so the
    interval measures how much the ratio varies from round to round, not how much the machine
    drifted between cells; the statistic is then `paired_ratio`. `resamples` draws from a numpy
    generator seeded by `seed`, so the same inputs and seed always give the same interval. The
    percentile method (not BCa) because BCa is undefined for degenerate samples (e.g. identical
    step times, common with a coarse timer), while percentile then just returns the point
    ratio for both bounds.

    Returns None when either side has fewer than 2 finite samples (pairs, when paired) or the
    baseline mean is not positive (the ratio is undefined). Non-finite samples are ignored
    (when paired, with their partner).
    """
    _check_confidence(confidence)
    if resamples < 1:
        raise ValueError(f"resamples must be >= 1, got {resamples}")
    finite_pairs = _finite_pairs(cell_times, baseline_times) if paired else []
    finite_cell = [t for t in cell_times if math.isfinite(t)]
    finite_base = [t for t in baseline_times if math.isfinite(t)]
    if paired and (len(finite_pairs) < 2 or math.fsum(b for _, b in finite_pairs) <= 0.0):
        return None
    if not paired and (
        len(finite_cell) < 2 or len(finite_base) < 2 or math.fsum(finite_base) <= 0.0
    ):
        return None
    # numpy only now: a matrix without step times (or with one trial) never pays its import.
    import numpy as np

    rng = np.random.default_rng(seed)
    if paired:
        pairs = np.asarray(finite_pairs, dtype=np.float64)
        picks = pairs[rng.integers(0, len(pairs), size=(resamples, len(pairs)))].mean(axis=1)
        cell_means, base_means = picks[:, 0], picks[:, 1]
    else:
        cell = np.asarray(finite_cell, dtype=np.float64)
        base = np.asarray(finite_base, dtype=np.float64)
        # One (resamples x n) index draw per side: vectorised, and memory stays small because
        # the matrix passes per-trial means (a few dozen values), not every step time.
        cell_means = cell[rng.integers(0, cell.size, size=(resamples, cell.size))].mean(axis=1)
        base_means = base[rng.integers(0, base.size, size=(resamples, base.size))].mean(axis=1)
    # A resample of a positive-mean sample can still average <= 0 only if it holds non-positive
    # values; drop those draws rather than divide by zero.
    valid = base_means > 0.0
    if not bool(valid.any()):
        return None
    ratios = cell_means[valid] / base_means[valid]
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(ratios, [tail, 1.0 - tail])
    return float(low), float(high)


def paired_ratio(cell_times: Sequence[float], baseline_times: Sequence[float]) -> float | None:
    """`sum(cell) / sum(baseline)` over paired rounds (the two sequences align round by round).

    The ratio of the rounds' means: a round in which the whole machine was slow weighs on both
    sides alike. None without a pair or with a non-positive baseline sum. Pairs with a
    non-finite value on either side are dropped.
    """
    pairs = _finite_pairs(cell_times, baseline_times)
    base = math.fsum(b for _, b in pairs)
    if not pairs or base <= 0.0:
        return None
    return math.fsum(c for c, _ in pairs) / base


def _finite_pairs(
    cell_times: Sequence[float], baseline_times: Sequence[float]
) -> list[tuple[float, float]]:
    if len(cell_times) != len(baseline_times):
        raise ValueError(
            f"paired samples need equal lengths, got {len(cell_times)} and {len(baseline_times)}"
        )
    return [
        (float(c), float(b))
        for c, b in zip(cell_times, baseline_times, strict=True)
        if math.isfinite(c) and math.isfinite(b)
    ]


def percentile(values: Sequence[float], q: float) -> float:
    """The `q`-th percentile (0..100) of non-empty `values`, numpy's default ("linear") method.

    Rank `h = q / 100 * (n - 1)` between sorted neighbours, interpolated as numpy does (from
    the upper neighbour at or past the midpoint, so the result equals `np.percentile`'s), here
    without importing numpy for a handful of numbers.
    """
    ordered = sorted(values)
    rank = q / 100.0 * (len(ordered) - 1)  # in numpy's order of operations: same rounding
    below = math.floor(rank)
    above = min(below + 1, len(ordered) - 1)
    a, b, t = ordered[below], ordered[above], rank - below
    return b - (b - a) * (1.0 - t) if t >= 0.5 else a + (b - a) * t


def sample_std(values: Sequence[float]) -> float:
    """The sample standard deviation (ddof=1) of two or more `values`, summed with `math.fsum`."""
    mean = math.fsum(values) / len(values)
    return math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1))


def trials_needed(
    p_base: float, p_cell: float, alpha: float = 0.05, power: float = 0.8
) -> int | None:
    """Trials per cell at which a two-sided test would detect `p_base` vs `p_cell` failure rates.

    Uses the normal-approximation sample size for two independent proportions with equal group
    sizes (pooled variance under the null), with the Fleiss continuity correction:

        n  = (z_{1-alpha/2} * sqrt(2 * pbar * (1 - pbar))
              + z_{power} * sqrt(p1 * (1 - p1) + p2 * (1 - p2)))^2 / (p1 - p2)^2
        n' = n / 4 * (1 + sqrt(1 + 4 / (n * |p1 - p2|)))^2

    The continuity-corrected `n'` approximates what Fisher's exact test (the test the matrix
    actually reports) needs; the plain normal approximation is too optimistic for small counts.
    Solving Fisher's exact power directly means enumerating every outcome table for every
    candidate n, which is needlessly slow for a sizing hint. The result is rounded up.

    Returns None when the rates are equal (no difference to detect). Raises `ValueError` for
    rates outside [0, 1] or alpha / power outside (0, 1).
    """
    for name, value in (("p_base", p_base), ("p_cell", p_cell)):
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"{name} must be within [0, 1], got {value}")
    for name, value in (("alpha", alpha), ("power", power)):
        if not 0.0 < value < 1.0:
            raise ValueError(f"{name} must be strictly between 0 and 1, got {value}")
    delta = abs(p_base - p_cell)
    if delta == 0.0:
        return None
    z_alpha = _normal_quantile(1.0 - alpha / 2.0)
    z_power = _normal_quantile(power)
    p_bar = (p_base + p_cell) / 2.0
    numerator = z_alpha * math.sqrt(2.0 * p_bar * (1.0 - p_bar)) + z_power * math.sqrt(
        p_base * (1.0 - p_base) + p_cell * (1.0 - p_cell)
    )
    n = numerator**2 / delta**2
    n_corrected = n / 4.0 * (1.0 + math.sqrt(1.0 + 4.0 / (n * delta))) ** 2
    # Guard the ceil against float noise such as 15.000000000000002.
    return max(2, math.ceil(n_corrected - 1e-9))
