"""Shared pieces of the hostile-input tests."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager

import pytest


@contextmanager
def _bounded(cpu_s: float, wall_s: float = 30.0) -> Iterator[None]:
    # Hostile input must not make us work long: judged by this process's CPU time, which a
    # loaded CI machine does not inflate (wall time under load was 8x the idle figure). The
    # loose wall bound still catches a wait that burns no CPU.
    cpu, wall = time.process_time(), time.monotonic()
    yield
    cpu, wall = time.process_time() - cpu, time.monotonic() - wall
    assert cpu < cpu_s, f"{cpu:.1f} s CPU (bound {cpu_s} s)"
    assert wall < wall_s, f"{wall:.1f} s wall (bound {wall_s} s)"


@pytest.fixture
def bounded() -> Callable[..., AbstractContextManager[None]]:
    """`with bounded(cpu_s):` fails the test if the block used `cpu_s` of CPU or 30 s of wall."""
    return _bounded
