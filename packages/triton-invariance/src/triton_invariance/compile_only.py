"""Run `@triton.jit` / `@triton.autotune` kernels on a machine without a GPU: compile, don't launch.

Stock Triton compiles for any target on a CPU-only machine; only the *launch* (loading the binary,
running it) and the autotuner's *timing* need a device. `compile_only(target, timings)` installs a
driver that answers Triton's device questions with `target`, turns launches into no-ops, and times
each launched variant with `timings(metadata)` (default: every config takes 1 ms, so the first
config wins). Everything else -- argument specialization, the JIT and on-disk kernel caches, every
compile stage, the autotuner's winner selection and all `triton.knobs` hooks -- is stock Triton.

This is what lets CI machines without GPUs commit and check invariance baselines, and what the CPU
tests and the demo use. Kernel results are not computed: outputs are never written.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from triton.backends.compiler import GPUTarget
from triton.backends.driver import DriverBase
from triton.runtime.driver import driver

Timing = Callable[[Any], float]
"""Milliseconds for one launch, given the launched kernel's metadata (num_warps, name, ...)."""


class _NoDeviceUtils:
    """The slice of Triton's driver utils a launch touches, with a device that runs nothing."""

    def load_binary(
        self, name: str, kernel: bytes, shared: int, device: int
    ) -> tuple[None, None, int, int, int]:
        # module=None keeps CompiledKernel.__del__ from asking a driver to unload anything.
        return None, None, 0, 0, 1 << 16

    def unload_module(self, module: object) -> None:
        """Nothing was loaded."""

    def get_device_properties(self, device: int) -> dict[str, int]:
        return {"max_shared_mem": 1 << 30, "multiprocessor_count": 1, "max_num_regs": 1 << 16}


class CompileOnlyDriver(DriverBase):  # type: ignore[misc]  # triton ships no type information
    """A Triton driver for `target` whose launches do nothing; see the module docstring."""

    def __init__(self, target: GPUTarget, timings: Timing | None = None) -> None:
        super().__init__()
        self.target = target
        self.utils = _NoDeviceUtils()
        self.timings: Timing = timings or (lambda metadata: 1.0)
        self.launched: list[Any] = []  # metadata of every launch, in order

        self.launcher_cls = _launcher

    @classmethod
    def is_active(cls) -> bool:
        return False  # never picked automatically: only `compile_only` installs it

    def map_python_to_cpp_type(self, ty: str) -> str:
        return ty

    def get_current_target(self) -> GPUTarget:
        return self.target

    def get_active_torch_device(self) -> str:
        return "cpu"

    def get_current_device(self) -> int:
        return 0

    def set_current_device(self, device: int) -> None:
        """There is one (virtual) device."""

    def get_current_stream(self, device: int | None = None) -> int:
        return 0

    def get_benchmarker(self) -> Callable[..., Sequence[float]]:
        return _bench


def _current() -> CompileOnlyDriver:
    # Triton caches a kernel's launcher and an autotuner's benchmarker the first time it needs
    # them, so both look up the driver that is active *now* instead of closing over one.
    active = driver.active
    if not isinstance(active, CompileOnlyDriver):
        raise RuntimeError("a compile-only launch happened outside `compile_only()`")
    return active


def _launcher(src: object, metadata: Any) -> Callable[..., None]:
    def launch(*args: object) -> None:
        _current().launched.append(metadata)

    return launch


def _bench(kernel_call: Callable[[], None], *, quantiles: Sequence[float], **_: Any) -> list[float]:
    fake = _current()
    before = len(fake.launched)
    kernel_call()  # compiles the config for real (the launch itself is a no-op)
    if len(fake.launched) == before:
        raise RuntimeError("the benchmarked call launched no kernel")
    ms = float(fake.timings(fake.launched[-1]))
    return [ms for _ in quantiles]


@contextlib.contextmanager
def compile_only(
    target: GPUTarget | None = None, timings: Timing | None = None
) -> Iterator[CompileOnlyDriver]:
    """Make Triton compile for `target` (default cuda sm80, warp 32) without a GPU, then restore.

    Triton keeps one binder per device per kernel, bound to the first target it saw: use one
    target per process.
    """
    fake = CompileOnlyDriver(target or GPUTarget("cuda", 80, 32), timings)
    # DriverConfig offers set_active/reset_active, but reset_active would create the default
    # driver, which fails without a GPU; so the previous active driver is put back as it was.
    previous = getattr(driver, "_active", None)
    driver.set_active(fake)
    try:
        yield fake
    finally:
        driver._active = previous
