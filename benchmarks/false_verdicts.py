"""False verdicts of the triage matrix's labels, on simulated matrices whose truth is known.

Each scenario draws `--matrices` matrices (200 by default, one seeded generator) of trials whose
failure probabilities are set by the scenario, and judges them with the real code: the trials
are `TrialResult`s aggregated by `aggregate_cell` and judged by `build_matrix` (Fisher, Holm,
the interval of the drop, `confound.classify`) and read back from `Matrix.to_dict()` (the rows
of matrix.json). Step times are drawn alike for every cell: only the failure counts differ.

- equal rates: a baseline and ten mitigation cells that all fail at 50 % (the null is true
  everywhere). A matrix with any cell whose label claims a significant drop (`—`, or
  `drop significant` after a speed part) is a family-wise false "trust it"; claim: at most
  alpha of the matrices. The same count without the Holm adjustment (raw p < alpha) is printed
  beside it: what the adjustment prevents.
- real cures: a baseline at 50 %, four cells that cure it (to 0 %), three that halve it (the
  smallest cure that matters), three that do nothing. Printed: the power (share of cure cells
  labelled `—` or `drop significant`); claims: no matrix has a false drop claim on a null cell
  more often than alpha, and a real cure reads `no effect` in at most alpha of its cells.
- non-reproducing baselines: a baseline that fails at 5 % (so most draws see 0 failures) and
  cells at 5 % or 0 %. Claim: wherever the baseline saw no failure, the banner is there and no
  cell reads `—`, `drop significant` or `no effect`.
- seed-ignoring scripts: one cell of each matrix runs a script that ignores its seed, so every
  trial is an exact copy (identical `losses`, identical outcome). Claim: no such cell is scored
  as if its trials were independent; counted as a copy cell whose row still carries a p-value
  or a label that does not start with `not independent`.

Exit 1 when a claim fails. benchmarks/triage_false_alarms.py is the companion that runs a real
workload to measure *speed* false alarms under machine drift; this one needs no workload and
takes seconds.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from aorta.runner.models import TrialResult
from aorta.triage.analysis.cells import CellStats, aggregate_cell
from aorta.triage.analysis.confound import DEFAULT_ALPHA, NO_EFFECT, NO_FAILURE_TO_CURE, TRUSTED
from aorta.triage.analysis.matrix import build_matrix

STEPS = 20
BASELINE = "baseline"
COPIES = "seedless"


@dataclass
class Tally:
    """What one scenario counted; `claims` are (description, holds) pairs."""

    lines: list[str]
    claims: list[tuple[str, bool]]


def _drop_claimed(label: str) -> bool:
    """Whether a label says the failure rate dropped significantly (alone or after speed)."""
    return label == TRUSTED or "drop significant" in label


def _trial(
    rng: np.random.Generator, trial_id: int, fails: bool, losses: list[float] | None = None
) -> TrialResult:
    """One trial: a loss trace (NaN at the failing step) and step times of about 100 ms."""
    stop = int(rng.integers(5, STEPS)) if fails else STEPS
    if losses is None:
        losses = [float(v) for v in 4.0 - 0.1 * np.arange(stop) + rng.normal(0.0, 0.05, stop)]
        if fails:
            losses[-1] = math.nan
    times = [float(t) for t in rng.normal(100.0, 5.0, len(losses))]
    return TrialResult(
        trial_id=trial_id,
        workload="simulated",
        mitigations=(),
        environment="local",
        seed=trial_id,
        steps=STEPS,
        passed=not fails,
        failure="non-finite loss" if fails else None,
        step_times_ms=times,
        warmup_steps=0,
        losses=list(losses),
        wall_clock_sec=sum(times) / 1000.0,
        started_at="2026-01-01T00:00:00Z",
        env_applied={},
        env_snapshot={},
        observed={},
        failed_at_step=len(losses) - 1 if fails else None,
    )


def _cell(rng: np.random.Generator, name: str, rate: float, trials: int) -> CellStats:
    results = [_trial(rng, k, bool(rng.random() < rate)) for k in range(trials)]
    return aggregate_cell(name, results, trials_requested=trials)


def _copies_cell(rng: np.random.Generator, trials: int) -> CellStats:
    """A cell whose script ignores the seed: every trial repeats the first one's trace."""
    first = _trial(rng, 0, bool(rng.random() < 0.5))
    results = [first] + [
        _trial(rng, k, not first.passed, losses=first.losses) for k in range(1, trials)
    ]
    return aggregate_cell(COPIES, results, trials_requested=trials)


def _rows(cells: Sequence[CellStats], alpha: float) -> tuple[dict[str, Any], dict[str, Any]]:
    """The matrix of `cells` as matrix.json has it: its dict and its rows by name."""
    data = build_matrix(cells, baseline=BASELINE, alpha=alpha, bootstrap_resamples=500).to_dict()
    return data, {row["name"]: row for row in data["cells"] if not row["is_baseline"]}


def equal_rates(rng: np.random.Generator, matrices: int, alpha: float) -> Tally:
    trials, rate = 12, 0.5
    adjusted = unadjusted = fails_more = 0
    labels: Counter[str] = Counter()
    for _ in range(matrices):
        cells = [_cell(rng, BASELINE, rate, trials)]
        cells += [_cell(rng, f"m{i}", rate, trials) for i in range(10)]
        base_rate = cells[0].nan_rate
        _, rows = _rows(cells, alpha)
        adjusted += any(_drop_claimed(r["confound"]) for r in rows.values())
        unadjusted += any(r["p_value"] < alpha and r["nan_rate"] < base_rate for r in rows.values())
        fails_more += any(r["confound"].startswith("fails more") for r in rows.values())
        labels.update(r["confound"].split(" (")[0] for r in rows.values())
    return Tally(
        lines=[
            f"equal rates: baseline + 10 cells, all 50 %, {trials} trials each, {matrices} "
            "matrices",
            f"  matrices with a false drop claim: {adjusted}/{matrices} = "
            f"{adjusted / matrices:.1%} (Holm-adjusted, as labelled); without the adjustment "
            f"{unadjusted}/{matrices} = {unadjusted / matrices:.1%}",
            f"  matrices with a false `fails more`: {fails_more}/{matrices}",
            f"  labels: {_listed(labels)}",
        ],
        claims=[
            (f"family-wise false drop claims <= alpha {alpha:g}", adjusted / matrices <= alpha),
            (f"family-wise false `fails more` <= alpha {alpha:g}", fails_more / matrices <= alpha),
        ],
    )


def real_cures(rng: np.random.Generator, matrices: int, alpha: float) -> Tally:
    trials = 16
    plan = [("cure", 0.0)] * 4 + [("half", 0.25)] * 3 + [("null", 0.5)] * 3
    shown: Counter[str] = Counter()
    ruled_out: Counter[str] = Counter()
    false_drop = 0
    for _ in range(matrices):
        cells = [_cell(rng, BASELINE, 0.5, trials)]
        cells += [_cell(rng, f"{kind}{i}", rate, trials) for i, (kind, rate) in enumerate(plan)]
        _, rows = _rows(cells, alpha)
        for name, row in rows.items():
            kind = name.rstrip("0123456789")
            shown[kind] += _drop_claimed(row["confound"])
            ruled_out[kind] += row["confound"] == NO_EFFECT
        false_drop += any(
            _drop_claimed(r["confound"]) for n, r in rows.items() if n.startswith("null")
        )
    count = Counter(kind for kind, _ in plan)
    cures = count["cure"] + count["half"]
    missed = (ruled_out["cure"] + ruled_out["half"]) / (cures * matrices)
    return Tally(
        lines=[
            f"real cures: baseline 50 %, 4 cells cure it (0 %), 3 halve it (25 %), 3 do "
            f"nothing, {trials} trials each, {matrices} matrices",
            f"  power (labelled a significant drop): cure "
            f"{shown['cure'] / (count['cure'] * matrices):.1%}, halve "
            f"{shown['half'] / (count['half'] * matrices):.1%}",
            f"  real cures labelled `no effect`: {ruled_out['cure'] + ruled_out['half']}/"
            f"{cures * matrices} cells = {missed:.1%}; null cells labelled `no effect`: "
            f"{ruled_out['null'] / (count['null'] * matrices):.1%}",
            f"  matrices with a false drop claim on a null cell: {false_drop}/{matrices}",
        ],
        claims=[
            (
                f"family-wise false drop claims among null cells <= alpha {alpha:g}",
                false_drop / matrices <= alpha,
            ),
            (f"real cures read `no effect` in <= alpha {alpha:g} of cells", missed <= alpha),
        ],
    )


def silent_baselines(rng: np.random.Generator, matrices: int, alpha: float) -> Tally:
    trials = 8
    plan = [0.05] * 3 + [0.0] * 3
    silent = banners = wrong = 0
    labels: Counter[str] = Counter()
    for _ in range(matrices):
        cells = [_cell(rng, BASELINE, 0.05, trials)]
        cells += [_cell(rng, f"m{i}", rate, trials) for i, rate in enumerate(plan)]
        data, rows = _rows(cells, alpha)
        if cells[0].failed_count:
            continue
        silent += 1
        banners += any(w.startswith("Baseline did not reproduce") for w in data["warnings"])
        for row in rows.values():
            label = row["confound"]
            labels[label.split(" (")[0]] += 1
            wrong += _drop_claimed(label) or label == NO_EFFECT or label.endswith(NO_EFFECT)
    return Tally(
        lines=[
            f"non-reproducing baselines: baseline 5 %, 6 cells at 5 % or 0 %, {trials} trials "
            f"each, {matrices} matrices; {silent} baselines saw no failure",
            f"  of those: banner {banners}/{silent}; cells reading `—`, `drop significant` or "
            f"`no effect`: {wrong}; labels: {_listed(labels)}",
        ],
        claims=[
            ("every silent baseline has the banner", banners == silent),
            (
                f"no cell of a silent baseline reads `—` / `no effect` (all `{NO_FAILURE_TO_CURE}`"
                " or a speed part before it)",
                wrong == 0,
            ),
        ],
    )


def seed_ignoring(rng: np.random.Generator, matrices: int, alpha: float) -> Tally:
    trials = 8
    scored = 0
    labels: Counter[str] = Counter()
    for _ in range(matrices):
        cells = [_cell(rng, BASELINE, 0.5, trials), _cell(rng, "honest", 0.5, trials)]
        cells.append(_copies_cell(rng, trials))
        _, rows = _rows(cells, alpha)
        row = rows[COPIES]
        labels[row["confound"].split(" (")[0]] += 1
        scored += row.get("p_value") is not None or not row["confound"].startswith(
            "not independent"
        )
    return Tally(
        lines=[
            f"seed-ignoring scripts: 1 cell of {trials} identical trials per matrix, "
            f"{matrices} matrices",
            f"  copies scored as independent: {scored}/{matrices}; their labels: {_listed(labels)}",
        ],
        claims=[("0 copies scored as independent", scored == 0)],
    )


def _listed(labels: Counter[str]) -> str:
    return ", ".join(f"{label!r} x{n}" for label, n in labels.most_common())


SCENARIOS: tuple[Callable[[np.random.Generator, int, float], Tally], ...] = (
    equal_rates,
    real_cures,
    silent_baselines,
    seed_ignoring,
)


def main() -> int:
    """Run every scenario; print its figures and claims; exit 1 if a claim fails."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--matrices", type=int, default=200, help="matrices per scenario")
    parser.add_argument("--alpha", type=float, default=DEFAULT_ALPHA)
    parser.add_argument("--seed", type=int, default=22)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    ok = True
    for scenario in SCENARIOS:
        start = time.perf_counter()
        tally = scenario(rng, args.matrices, args.alpha)
        print(*tally.lines, sep="\n")
        for claim, holds in tally.claims:
            print(f"  [{'ok' if holds else 'FAIL'}] {claim}")
            ok &= holds
        print(f"  ({time.perf_counter() - start:.1f} s)", flush=True)
    print("[ok]" if ok else "[FAIL]")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
