"""`rare_collections`: fewer collections while planning, the collector as it was afterwards."""

from __future__ import annotations

import gc
import weakref

import pytest

from oellm_autoexp.planning.collector import PLANNING_THRESHOLD, rare_collections


class _Node:
    def __init__(self) -> None:
        self.me = self  # a reference cycle: only the cyclic collector frees it


def test_settings_restored_and_cycles_still_collected() -> None:
    before = gc.get_threshold()
    frozen = gc.get_freeze_count()
    with rare_collections():
        assert gc.get_threshold()[0] == PLANNING_THRESHOLD
        assert gc.get_freeze_count() > frozen  # what was alive is not walked again
        garbage = weakref.ref(_Node())
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == frozen
    gc.collect()
    assert garbage() is None


def test_settings_restored_after_an_error() -> None:
    before = gc.get_threshold()
    with pytest.raises(RuntimeError), rare_collections():
        raise RuntimeError("plan rejected")
    assert gc.get_threshold() == before
