"""Repository-wide pytest hooks shared by the three packages' test trees."""

from __future__ import annotations

import atexit
import functools
import os
import signal
import sys

import pytest


def pytest_configure(config: pytest.Config) -> None:
    # A shell without job control starts background commands (`make test &`, nohup, some CI
    # runners) with SIGINT ignored, and an ignored signal stays ignored across exec. The Ctrl-C
    # tests would then send SIGINT to children that cannot receive it. A Python handler, unlike
    # SIG_IGN, is reset to the default on exec, so installing Python's own here gives every child
    # a normal Ctrl-C.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    # One OpenMP thread for torch, here and in every child the tests start (unless the caller
    # chose): the suite runs on several xdist workers on a 2-core machine, where two spin-waiting
    # OpenMP threads per process wait on each other and the neighbours' work (the real fsdp
    # tests took 3-10x longer). The workloads' results do not depend on it (same seeds diverge,
    # see aorta.workloads.fsdp.config). Set before any test module imports torch.
    os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    # Triton's extension is built with nanobind, which at interpreter exit prints ~100 lines
    # ("nanobind: leaked 4 instances! ... 514 functions!") when objects of it are still
    # referenced: Inductor keeps four `ir.attribute`s in its caches after a torch.compile test
    # (tests/workloads/test_fsdp_compile.py). Triton does not expose nanobind's
    # set_leak_warnings(), and the symbol is hidden. The report comes from nanobind's own
    # teardown, after every atexit handler, so one registered here (atexit runs handlers last
    # registered first) sends the process's stderr to /dev/null once the summary is printed
    # and the exit status is fixed: only interpreter-teardown output is dropped, never a
    # test's. In xdist workers as in the main process; a no-op when triton was never loaded.
    if "triton._C.libtriton" in sys.modules:
        atexit.register(_silence_teardown_stderr)


def _silence_teardown_stderr() -> None:
    sys.stderr.flush()
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    os.close(devnull)


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
