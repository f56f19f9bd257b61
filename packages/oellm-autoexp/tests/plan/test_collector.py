"""`rare_collections`: fewer collections while planning, the collector as it was afterwards."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from oellm_autoexp.planning.collector import PLANNING_THRESHOLD, rare_collections


class _Node:
    def __init__(self) -> None:
        self.me = self  # a reference cycle: only the cyclic collector frees it


@pytest.fixture
def nothing_frozen() -> Iterator[None]:
    """A process in which nothing is frozen yet, whatever ran before in this worker.

    Another test may have imported a module that freezes at import (aorta's FSDP workload
    does), so the freeze count at the start of a test depends on the order tests run in.
    """
    was_frozen = gc.get_freeze_count() > 0
    gc.unfreeze()
    yield
    if was_frozen:
        gc.freeze()


def test_settings_restored_and_cycles_still_collected(nothing_frozen: None) -> None:
    before = gc.get_threshold()
    with rare_collections():
        assert gc.get_threshold()[0] == PLANNING_THRESHOLD
        assert gc.get_freeze_count() > 0  # what was alive is not walked again
        garbage = weakref.ref(_Node())
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0
    gc.collect()
    assert garbage() is None


def test_a_process_that_froze_objects_itself_keeps_them_frozen(nothing_frozen: None) -> None:
    gc.freeze()
    frozen = gc.get_freeze_count()
    try:
        with rare_collections():
            assert gc.get_threshold()[0] == PLANNING_THRESHOLD
        assert gc.get_freeze_count() >= frozen  # not unfrozen on the way out
    finally:
        gc.unfreeze()


def test_settings_restored_after_an_error() -> None:
    before = gc.get_threshold()
    with pytest.raises(RuntimeError), rare_collections():
        raise RuntimeError("plan rejected")
    assert gc.get_threshold() == before
