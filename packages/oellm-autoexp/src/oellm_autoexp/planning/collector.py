"""Rare garbage collections while a plan is decided and written.

Every job allocates a dozen dicts, tuples and lists that reference counting frees as soon as
the job is written: the planner makes no reference cycles. CPython's cyclic collector still
runs after every 700 container allocations, and every few of those runs it walks every object
alive, the imported modules and the config included. Measured by instruction count, that was
3 % of a 10,000-job plan and grows with the plan (the walks get longer as the process grows).
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

# Container allocations between young collections while planning (CPython's default is 700).
PLANNING_THRESHOLD = 100_000


@contextlib.contextmanager
def rare_collections() -> Iterator[None]:
    """Collect cycles rarely inside the block; the objects alive at its start are not walked."""
    before = gc.get_threshold()
    # The imports and the config: long-lived, walked by every full collection. A process that
    # froze objects itself keeps its own arrangement (unfreeze would undo it).
    freeze = gc.get_freeze_count() == 0
    if freeze:
        gc.freeze()
    gc.set_threshold(PLANNING_THRESHOLD, *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)
        if freeze:
            gc.unfreeze()
