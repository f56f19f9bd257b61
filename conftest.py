"""Repository-wide pytest hooks shared by the three packages' test trees."""

from __future__ import annotations

import functools
import signal

import pytest


def pytest_configure(config: pytest.Config) -> None:
    # A shell without job control starts background commands (`make test &`, nohup, some CI
    # runners) with SIGINT ignored, and an ignored signal stays ignored across exec. The Ctrl-C
    # tests would then send SIGINT to children that cannot receive it. A Python handler, unlike
    # SIG_IGN, is reset to the default on exec, so installing Python's own here gives every child
    # a normal Ctrl-C.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@functools.cache
def _gpu_visible() -> tuple[bool, str]:
    """Whether torch sees a CUDA/ROCm device; imported only when a gpu test was collected."""
    try:
        import torch
    except ImportError:
        return False, "torch is not installed"
    if torch.cuda.is_available():
        return True, ""
    return False, "no CUDA/ROCm GPU visible to torch"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Under pytest-xdist (`make test`, --dist loadgroup) the real-SLURM tests share one worker,
    # so the session's cluster fixtures start once, as in a serial run.
    if config.pluginmanager.hasplugin("xdist"):
        for item in items:
            if item.get_closest_marker("slurm"):
                item.add_marker(pytest.mark.xdist_group("slurm"))
    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    if not gpu_items:
        return
    visible, reason = _gpu_visible()
    if visible:
        return
    skip = pytest.mark.skip(reason=f"gpu test: {reason}")
    for item in gpu_items:
        item.add_marker(skip)
