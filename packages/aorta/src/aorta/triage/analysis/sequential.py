"""Group-sequential boundaries by alpha spending (Lan & DeMets), for repeated looks at a cell.

Looking at a cell's Fisher test after every round and stopping at the first p < alpha would
claim cures far more often than alpha: each look is another chance. A group-sequential design
spends the level over the looks instead. With an *alpha-spending function* `a(t)` (the type I
error spent by information fraction `t` = trials so far / maximum trials, `a(1) = alpha`), the
boundary `c_k` of look `k` is chosen so that the probability, under the null, of first crossing
`|Z| >= c_k` at look `k` is exactly `a(t_k) - a(t_{k-1})`. Because the boundaries account for
the correlation between the looks (the z statistics share their trials), the total chance of
ever crossing is exactly `alpha`, and the last boundary stays close to the fixed design's.

Source: K. K. G. Lan and D. L. DeMets (1983), "Discrete sequential boundaries for clinical
trials", Biometrika 70(3):659-663 (the spending functions below are theirs); the crossing
probabilities are computed by the recursive numerical integration of C. Jennison and
B. W. Turnbull (2000), *Group Sequential Methods with Applications to Clinical Trials*, ch. 19
(after Armitage, McPherson and Rowe 1969), under the normal approximation of the test statistic
with independent increments.

- `obrien-fleming` (the default): `a(t) = 2 - 2 Phi(z_{1-alpha/2} / sqrt(t))`: almost nothing is
  spent early (only overwhelming evidence stops a cell in its first rounds), so the final look
  keeps nearly the fixed design's level, and verdicts agree with the fixed design.
- `pocock`: `a(t) = alpha * ln(1 + (e - 1) t)`: spends evenly, stops clear cases earlier, at the
  price of a stricter last look.

`nominal_levels` turns the boundaries into two-sided p-value levels, which the adaptive rule
(`aorta.triage.analysis.adaptive`) compares with each cell's Fisher p-value: the exact test
replaces the normal one, which is conservative for the small counts of a triage cell.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from functools import lru_cache
from statistics import NormalDist
from typing import Any, Final

__all__ = ["SPENDING_FUNCTIONS", "boundaries", "nominal_levels", "spent"]

_NORMAL: Final = NormalDist()
# Grid of the recursive integration: points per standard deviation of one look's increment.
_GRID_PER_SD: Final = 12
_MAX_Z: Final = 8.0  # a boundary this far out spends nothing measurable


def _obrien_fleming(t: float, alpha: float) -> float:
    return 2.0 - 2.0 * _NORMAL.cdf(_NORMAL.inv_cdf(1.0 - alpha / 2.0) / math.sqrt(t))


def _pocock(t: float, alpha: float) -> float:
    return alpha * math.log(1.0 + (math.e - 1.0) * t)


SPENDING_FUNCTIONS: Final[dict[str, Callable[[float, float], float]]] = {
    "obrien-fleming": _obrien_fleming,
    "pocock": _pocock,
}


def spent(name: str, t: float, alpha: float) -> float:
    """Alpha spent by information fraction `t` (0 < t <= 1) under spending function `name`."""
    if name not in SPENDING_FUNCTIONS:
        raise ValueError(f"spending: expected one of {', '.join(SPENDING_FUNCTIONS)}, got {name!r}")
    if not 0.0 < t <= 1.0:
        raise ValueError(f"information fraction must be within (0, 1], got {t}")
    return min(alpha, SPENDING_FUNCTIONS[name](t, alpha))


def _phi(x: Any) -> Any:
    """The standard normal CDF of a numpy array (Abramowitz & Stegun 7.1.26 erf, |error| <
    1.5e-7: far below the levels compared with it, and numpy has no erf of its own)."""
    import numpy as np

    z = np.abs(x) / math.sqrt(2.0)
    t = 1.0 / (1.0 + 0.3275911 * z)
    poly = t * (
        0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))
    )
    erf = 1.0 - poly * np.exp(-z * z)
    return np.where(x >= 0, 0.5 * (1.0 + erf), 0.5 * (1.0 - erf))


def boundaries(times: Sequence[float], alpha: float, spending: str) -> list[float]:
    """Two-sided z boundaries `c_1..c_K` at information fractions `times` (increasing, <= 1).

    Raises `ValueError` for times that do not increase within (0, 1] or alpha outside (0, 1).
    """
    import numpy as np

    if not times or any(b <= a for a, b in itertools.pairwise(times)):
        raise ValueError(f"times must increase, got {list(times)}")
    if times[0] <= 0.0 or times[-1] > 1.0:
        raise ValueError(f"times must lie within (0, 1], got {list(times)}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be strictly between 0 and 1, got {alpha}")
    result: list[float] = []
    spent_so_far = 0.0
    # Weights of the score S(t) = Z sqrt(t) on the continuation region: grid points and the
    # probability mass each carries (density x spacing). None before the first look.
    grid: Any = None
    mass: Any = None
    previous_t = 0.0
    for t in times:
        target = max(0.0, spent(spending, t, alpha) - spent_so_far)
        sd, root_t = math.sqrt(t - previous_t), math.sqrt(t)
        if grid is None:
            bound = _NORMAL.inv_cdf(1.0 - target / 2.0) if target > 0 else _MAX_Z
            bound = min(bound, _MAX_Z)
            spent_so_far += 2.0 * (1.0 - _NORMAL.cdf(bound))
        else:
            bound = _solve(grid, mass, sd, root_t, target)
            spent_so_far += _crossing(grid, mass, sd, bound * root_t)
        result.append(bound)
        # Carry the mass to t, keeping what did not cross (midpoint rule on the new grid).
        edge = bound * root_t
        points = max(8, int(2.0 * edge / sd * _GRID_PER_SD))
        spacing = 2.0 * edge / points
        new_grid = -edge + (np.arange(points) + 0.5) * spacing
        if grid is None:
            new_mass = np.exp(-0.5 * (new_grid / sd) ** 2) / (sd * math.sqrt(2 * math.pi))
        else:
            kernel = np.exp(-0.5 * ((new_grid[:, None] - grid[None, :]) / sd) ** 2)
            new_mass = kernel @ mass / (sd * math.sqrt(2 * math.pi))
        grid, mass, previous_t = new_grid, new_mass * spacing, t
    return result


def _crossing(grid: Any, mass: Any, sd: float, edge: float) -> float:
    """P(|S_new| >= edge, having continued so far): the mass carried one increment on."""
    outside = _phi((-edge - grid) / sd) + 1.0 - _phi((edge - grid) / sd)
    return float(outside @ mass)


def _solve(grid: Any, mass: Any, sd: float, root_t: float, target: float) -> float:
    """The boundary z whose crossing probability at this look is `target` (bisection)."""
    if target <= 0.0 or _crossing(grid, mass, sd, _MAX_Z * root_t) > target:
        return _MAX_Z
    low, high = 0.0, _MAX_Z
    for _ in range(40):
        mid = (low + high) / 2.0
        if _crossing(grid, mass, sd, mid * root_t) > target:
            low = mid
        else:
            high = mid
    return high


@lru_cache(maxsize=64)
def nominal_levels(alpha: float, max_trials: int, spending: str) -> tuple[float, ...]:
    """Two-sided nominal p-value levels for a look after every trial, n = 1..max_trials.

    Level `n - 1` is what a test after `n` of `max_trials` trials must beat (`p <= level`).
    """
    if max_trials < 1:
        raise ValueError(f"max_trials must be >= 1, got {max_trials}")
    times = [n / max_trials for n in range(1, max_trials + 1)]
    return tuple(2.0 * (1.0 - _NORMAL.cdf(z)) for z in boundaries(times, alpha, spending))
