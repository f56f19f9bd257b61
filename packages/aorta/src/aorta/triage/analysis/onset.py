"""Where a cell's failures start: per-cell summaries of its failing trials (pure).

- `onset_summary`: from the failing trials' `failed_at_step` (the step at which the failure was
  first seen: reported by the workload, or for a command workload the last step number read up
  to the log line that matched), e.g. `steps 3\u20136, median 4`.
- `location_summary`: from the failing trials' `first_nonfinite` records (`locate: true`), the
  most common location and how many failing trials share it, e.g.
  `layers.1.mlp.fc2 backward, 4 of 4`.

Both say how much they rest on: trials whose step or location is unknown are counted, never
dropped silently.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from aorta.instrumentation.locate_record import location_label

__all__ = ["location_summary", "onset_summary"]


def _step_text(value: float) -> str:
    return str(int(value)) if value == int(value) else f"{value:.1f}"


def onset_summary(steps: Sequence[int | None]) -> str | None:
    """`steps 3\u20136, median 4` for the failing trials' first failure steps; None: no failures.

    One failure, or all at one step: `step 4` (`, 3 trials` when several). Trials whose step is
    unknown are counted at the end (`; 1 of 5 at an unknown step`); when no step is known at
    all the summary says so.
    """
    if not steps:
        return None
    known = sorted(s for s in steps if s is not None)
    unknown = len(steps) - len(known)
    if not known:
        return f"step unknown ({unknown} of {unknown})"
    if known[0] == known[-1]:
        text = f"step {known[0]}" + (f", {len(known)} trials" if len(known) > 1 else "")
    else:
        median = _step_text(statistics.median(known))
        text = f"steps {known[0]}\u2013{known[-1]}, median {median}"
    if unknown:
        text += f"; {unknown} of {len(steps)} at an unknown step"
    return text


def location_summary(records: Sequence[Mapping[str, Any] | None]) -> str | None:
    """The most common first non-finite location among failing trials, with its share.

    `records` are the failing trials' `first_nonfinite` (None where a trial did not locate).
    Located trials are preferred: `not located (...)` wins only when no trial was located. Ties
    go to the alphabetically first label, so the summary is deterministic. None: nothing to
    summarise (no failing trial asked for locating).
    """
    labels = [location_label(r) for r in records if r is not None]
    if not labels:
        return None
    counts = Counter(label for label in labels if label is not None)
    located = {k: n for k, n in counts.items() if not k.startswith("not located")}
    pool = located or counts
    best = min(pool, key=lambda label: (-pool[label], label))
    return f"{best}, {pool[best]} of {len(labels)}"
