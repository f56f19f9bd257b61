"""`record_fingerprints`: {kernel: fingerprint} of what a block compiled (for aorta's trials).

Real `@triton.jit` launches compile for cuda:80 through the compile-only driver; a fresh
`JITFunction` per recording stands in for a fresh trial process (Triton's in-memory JIT cache
is per function object; its on-disk cache is shared, as it is between trials).
"""

# Triton style: constexpr block sizes are upper case.
# ruff: noqa: N803

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget

from triton_invariance.compile_only import compile_only
from triton_invariance.record import KernelFingerprints, changed_kernels, record_fingerprints


def dot_kernel(a_ptr, b_ptr, c_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    a = tl.load(a_ptr + offs[:, None] * BLOCK + offs[None, :])
    b = tl.load(b_ptr + offs[:, None] * BLOCK + offs[None, :])
    tl.store(c_ptr + offs[:, None] * BLOCK + offs[None, :], tl.dot(a, b))


def scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2.0, mask=offs < n)


def _trial() -> KernelFingerprints:
    """Compile and 'launch' both kernels as a fresh process would, recording fingerprints."""
    dot, scale = triton.jit(dot_kernel), triton.jit(scale_kernel)
    a = torch.ones(32, 32)
    with compile_only(GPUTarget("cuda", 80, 32)), record_fingerprints() as seen:
        dot[(1,)](a, a, torch.empty(32, 32), BLOCK=32)
        scale[(4,)](a, torch.empty(32, 32), 1024, BLOCK=256)
    return seen


@pytest.fixture
def fresh_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton-cache"))
    monkeypatch.setenv("TRITON_DEFAULT_FP_FUSION", "1")
    monkeypatch.delenv("TRITON_F32_DEFAULT", raising=False)


def test_no_change_changes_nothing(fresh_cache: None) -> None:
    first, second = _trial(), _trial()  # the second loads both from Triton's on-disk cache
    assert set(first) == {"dot_kernel", "scale_kernel"}
    assert second == first and changed_kernels(first, second) == []


def test_f32_default_ieee_changes_the_dot_kernel_only(
    fresh_cache: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    baseline = _trial()
    monkeypatch.setenv("TRITON_F32_DEFAULT", "ieee")
    mitigated = _trial()
    assert changed_kernels(baseline, mitigated) == ["dot_kernel"]
    (before,) = baseline.details["dot_kernel"].values()
    (after,) = mitigated.details["dot_kernel"].values()
    # tf32 is spelled out on the dot; ieee is the dot's default, which the printer leaves out
    # (and an ieee fp32 dot gets no MMA layout on sm80).
    assert before.changed_components(after) == ["computation_dag_hash", "layout_hash"]
    dot_line = next(ln for ln in before.diff_report(after).splitlines() if "tt.dot" in ln)
    before_op, after_op = dot_line.split("after `")
    assert "inputPrecision = tf32" in before_op and "inputPrecision" not in after_op


def test_the_previous_listener_is_chained_and_restored(fresh_cache: None) -> None:
    calls: list[str] = []

    def mine(**kwargs: Any) -> None:
        calls.append(kwargs["src"].name)

    previous = triton.knobs.compilation.listener
    triton.knobs.compilation.listener = mine
    try:
        seen = _trial()
        assert triton.knobs.compilation.listener is mine
    finally:
        triton.knobs.compilation.listener = previous
    assert sorted(calls) == sorted(seen) == ["dot_kernel", "scale_kernel"]


def test_variants_of_one_kernel_get_one_order_independent_fingerprint() -> None:
    from sample_data import sample_inv

    one, two = sample_inv("arith.addf"), sample_inv("arith.mulf")
    forward, backward = KernelFingerprints(), KernelFingerprints()
    for inv in (one, two):
        forward.add("k", inv)
    for inv in (two, one, two):
        backward.add("k", inv)
    assert forward == backward and forward["k"] not in (one.fingerprint, two.fingerprint)
    assert backward.variants["k"] == {one.fingerprint, two.fingerprint}
    single = KernelFingerprints()
    single.add("k", one)
    assert single["k"] == one.fingerprint


def test_changed_kernels_counts_kernels_only_one_side_compiled() -> None:
    assert changed_kernels({"a": "1", "b": "2"}, {"a": "1", "c": "3"}) == ["b", "c"]
