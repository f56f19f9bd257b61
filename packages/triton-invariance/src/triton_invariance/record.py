"""Record the fingerprints of the kernels compiled while a block of code runs.

    from triton_invariance.record import changed_kernels, record_fingerprints

    with record_fingerprints() as seen:
        train_one_step()                      # anything that compiles Triton kernels
    seen                                      # {"matmul_kernel": "3fa2...", ...}
    changed_kernels(baseline_seen, seen)      # ["matmul_kernel"]: names whose fingerprint differs

This is the building block for "which kernels did this change of settings change?" (aorta's
per-trial fingerprints): it neither commits nor compares baselines and needs no environment
variable. It listens on `triton.knobs.compilation.listener`, which Triton calls after every
compile *and* every load from its on-disk cache, chaining to a listener already there, and puts
the previous listener back on exit. A kernel compiled in this process before the block (kept in
Triton's in-memory JIT cache) does not compile again and is therefore not seen; run each trial
in a fresh process, or clear the JIT caches, to see everything.

The fingerprint is `InvarianceData.fingerprint` of the compiled TTGIR with the kernel's compile
options (`triton_invariance.options`). A kernel compiled in several variants (autotune configs,
specialisations) gets one combined fingerprint over its distinct variant fingerprints; the
variants are in `KernelFingerprints.variants`.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from triton_invariance.data import InvarianceData, content_hash

if TYPE_CHECKING:
    from triton_invariance.hooks import CompiledVariant

__all__ = ["KernelFingerprints", "changed_kernels", "on_compile", "record_fingerprints"]


class KernelFingerprints(dict[str, str]):
    """`{kernel_name: fingerprint}` of the kernels compiled while the block ran.

    `variants[kernel_name]` holds the fingerprint of each distinct compiled variant, and
    `details[kernel_name]` the `InvarianceData` of each (for a diff report).
    """

    def __init__(self) -> None:
        super().__init__()
        self.variants: dict[str, set[str]] = {}
        self.details: dict[str, dict[str, InvarianceData]] = {}
        self._lock = threading.Lock()

    def add(self, kernel_name: str, inv: InvarianceData) -> None:
        """Record one compiled variant of `kernel_name`."""
        with self._lock:
            fingerprints = self.variants.setdefault(kernel_name, set())
            fingerprints.add(inv.fingerprint)
            self.details.setdefault(kernel_name, {})[inv.fingerprint] = inv
            # One variant: its own fingerprint; several: one hash over the sorted set, so the
            # value changes when any variant does and not with the order they compiled in.
            self[kernel_name] = (
                next(iter(fingerprints))
                if len(fingerprints) == 1
                else content_hash(["variants", *sorted(fingerprints)])
            )


def changed_kernels(baseline: Mapping[str, str], current: Mapping[str, str]) -> list[str]:
    """Sorted names of the kernels whose fingerprint differs, or that only one side compiled."""
    names = baseline.keys() | current.keys()
    return sorted(n for n in names if baseline.get(n) != current.get(n))


@contextlib.contextmanager
def on_compile(callback: Callable[[CompiledVariant], None]) -> Iterator[None]:
    """Call `callback` with the `CompiledVariant` of every kernel compiled inside the block.

    Chains to the listener already installed and puts it back on exit. Imports Triton.
    """
    import triton

    from triton_invariance.hooks import describe_variant, ttgir_of_compile
    from triton_invariance.verdict import asm_digest

    previous = triton.knobs.compilation.listener
    recording = threading.Event()
    recording.set()

    def listener(**kwargs: Any) -> None:
        if previous is not None:
            previous(**kwargs)
        src = kwargs["src"]
        # Not after the block (a listener installed inside it may still chain to this one),
        # and not for a kernel compiled from an IR file (no Python kernel to name).
        if not recording.is_set() or not hasattr(src, "fn"):
            return
        group = kwargs["metadata_group"]
        ttgir = ttgir_of_compile(group, src.name)
        callback(describe_variant(src, kwargs["metadata"], ttgir, asm_digest(group)))

    triton.knobs.compilation.listener = listener
    try:
        yield
    finally:
        recording.clear()
        # Only undo our own change: a listener installed inside the block stays (it chains
        # to ours, which then keeps forwarding to `previous`).
        if triton.knobs.compilation.listener is listener:
            triton.knobs.compilation.listener = previous


@contextlib.contextmanager
def record_fingerprints() -> Iterator[KernelFingerprints]:
    """Yield a `KernelFingerprints` that fills up as kernels compile inside the block.

    Imports Triton. Errors while fingerprinting (a kernel without TTGIR, e.g. under
    `TRITON_STORE_BINARY_ONLY=1`) propagate from the compile that caused them.
    """
    seen = KernelFingerprints()
    with on_compile(lambda variant: seen.add(variant.kernel_name, variant.invariance)):
        yield seen
