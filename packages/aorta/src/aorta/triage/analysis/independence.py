"""Are a cell's trials independent samples? Copies of one run are not.

Every trial gets its own seed (argv `{seed}`, `AORTA_SEED`, `PYTHONHASHSEED`), but a script
that hard-codes its seed runs the same computation every time: four such "trials" are one run
seen four times, and scoring them as four independent failures invents certainty. Pure
functions over the trial records; no I/O.

The rule (documented in docs/triage.md, "Independent trials"):

- Only measured trials (passed or failed) are judged; errored trials say nothing either way.
- Two trials are copies when they have the same outcome and the same *loss trace* (the losses
  the trial recorded, in order, holding at least one readable value) or, when neither read a
  loss, the same *log digest* (`command.log_digest`: the output up to its first failure line).
  A trial with neither is assumed independent: there is nothing to compare.
- `distinct` counts each set of identical trials once. When every measured trial (two or
  more) is a copy of one run, the cell is *not independent*: its failure rate is no estimate,
  so the matrix gives it no Wilson interval and no p-value, and labels it `not independent`.
  If those copies all failed, the failure is deterministic: a finding in itself.
- Some copies among otherwise distinct trials: the failure-rate interval and the Fisher test
  count each set of identical trials once (`evidence_counts`), and the matrix says so.
- A baseline that is not independent makes every comparison with it not independent either.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from aorta.runner.models import TrialResult

__all__ = [
    "LOGS",
    "LOSS_TRACES",
    "Independence",
    "copies_warnings",
    "evidence_counts",
    "judge",
    "not_independent_reason",
]

LOSS_TRACES: Final = "loss traces"
LOGS: Final = "logs"
DETERMINISTIC: Final = "fails identically in every trial (deterministic)"
_SEED_HINT: Final = (
    "make the script take its seed from the environment "
    '(`seed = int(os.environ.get("AORTA_SEED", "1337"))`) or pass `{seed}` in its arguments'
)


@dataclass(frozen=True)
class Independence:
    """How many distinct runs a cell's measured trials are, and which trials are copies."""

    trials: int  # measured trials judged
    distinct: int  # distinct runs: each set of identical trials counts once
    distinct_failed: int  # of those, the failed ones
    groups: tuple[tuple[int, ...], ...] = ()  # trial ids of each set of 2+ identical trials
    basis: tuple[str, ...] = ()  # what the groups were found by: LOSS_TRACES and/or LOGS

    @property
    def all_copies(self) -> bool:
        """Every measured trial (two or more) is a copy of one run: no independent sample."""
        return self.trials >= 2 and self.distinct == 1

    @property
    def deterministic_failure(self) -> bool:
        """All copies, and they failed: the failure happens identically every time."""
        return self.all_copies and self.distinct_failed == 1

    @property
    def basis_text(self) -> str:
        """`identical loss traces`, `identical logs` or `identical loss traces or logs`."""
        return "identical " + " or ".join(self.basis)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (matrix.json, per cell under `independence`)."""
        return {
            "trials": self.trials,
            "distinct": self.distinct,
            "distinct_failed": self.distinct_failed,
            "copies": [list(group) for group in self.groups],
            "basis": list(self.basis),
            "all_copies": self.all_copies,
            "deterministic_failure": self.deterministic_failure,
        }


def _number(value: object) -> float | None:
    # A trial file comes from a run directory: anything but a number reads as no value.
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _loss_key(losses: Sequence[object]) -> tuple[Hashable, ...] | None:
    """The trace as a comparable key; None without a readable (finite) loss in it."""
    values = [_number(v) for v in losses]
    if not any(v is not None and math.isfinite(v) for v in values):
        return None
    # repr: NaN != NaN as floats, but two traces that both end in nan are the same trace.
    return tuple(None if v is None else repr(v) for v in values)


def _trace_key(result: TrialResult) -> tuple[str, Hashable] | None:
    """What a trial is compared by (loss trace, else log digest); None: nothing to compare."""
    trace = _loss_key(result.losses)
    if trace is not None:
        return LOSS_TRACES, trace
    command = result.command if isinstance(result.command, Mapping) else {}
    digest = command.get("log_digest")
    if isinstance(digest, str) and digest:
        return LOGS, digest
    return None


def judge(results: Iterable[TrialResult]) -> Independence:
    """Group a cell's measured trials into copies of one run (the module docstring's rule)."""
    measured = sorted((r for r in results if not r.errored), key=lambda r: r.trial_id)
    by_key: dict[tuple[str, str, Hashable], list[TrialResult]] = {}
    singles: list[TrialResult] = []
    for result in measured:
        key = _trace_key(result)
        if key is None:
            singles.append(result)
        else:
            by_key.setdefault((result.outcome, *key), []).append(result)
    runs = [members[0] for members in by_key.values()] + singles
    groups = [members for members in by_key.values() if len(members) > 1]
    return Independence(
        trials=len(measured),
        distinct=len(runs),
        distinct_failed=sum(1 for r in runs if r.outcome == "failed"),
        groups=tuple(tuple(r.trial_id for r in members) for members in groups),
        basis=tuple(
            kind
            for kind in (LOSS_TRACES, LOGS)
            if any(key[1] == kind for key, members in by_key.items() if len(members) > 1)
        ),
    )


def evidence_counts(
    independence: Independence | None, failed: int, measured: int
) -> tuple[int, int]:
    """(failed, measured) as the failure-rate interval and the Fisher test count them.

    Each set of identical trials counts once; without a judgement the counts stay as they are.
    """
    if independence is None or not independence.groups:
        return failed, measured
    return independence.distinct_failed, independence.distinct


def not_independent_reason(
    cell: Independence | None, baseline: Independence | None, *, is_baseline: bool
) -> str | None:
    """Why a cell's failure evidence is not independent (the label's text), or None."""
    if cell is not None and cell.all_copies:
        if cell.deterministic_failure:
            return DETERMINISTIC
        return f"its {cell.trials} trials are copies ({cell.basis_text})"
    if not is_baseline and baseline is not None and baseline.all_copies:
        return "the baseline's trials are copies"
    return None


def _ids(ids: Sequence[int]) -> str:
    return ", ".join(str(i) for i in ids)


def copies_warnings(cells: Sequence[tuple[str, Independence | None]], baseline: str) -> list[str]:
    """The matrix's banner lines about copies, one per cell that holds any."""
    found: list[str] = []
    for name, judged in cells:
        if judged is None or not judged.groups:
            continue
        if judged.all_copies:
            text = (
                f"cell {name}: its {judged.trials} trials are copies ({judged.basis_text}): "
                "their different seeds did not change the run, so they are not counted as "
                "independent trials (no failure-rate interval, no p-value); "
                f"{_SEED_HINT}."
            )
            if judged.deterministic_failure:
                text += f" It {DETERMINISTIC}."
            if name == baseline:
                text += " Every comparison with the baseline is therefore not independent either."
        else:
            sets = "; ".join(f"trials {_ids(group)}" for group in judged.groups)
            text = (
                f"cell {name}: only {judged.distinct} of its {judged.trials} trials are "
                f"distinct runs ({judged.basis_text}: {sets}): its failure-rate interval and "
                "Fisher test count each set of identical trials once; "
                f"{_SEED_HINT}."
            )
        found.append(text)
    return found
