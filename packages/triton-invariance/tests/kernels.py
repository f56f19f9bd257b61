"""Triton kernels the fingerprint tests compile (CPU only: compiled for a target, never launched).

Each kernel is a plain `@triton.jit` function in this real source file (Triton reads the source),
described by a `KernelSpec` with the signature and constexprs `triton.compile` needs. Tests that
need a *variant* (renamed variables, shifted lines, `+` -> `-`) rewrite this file's source of one
kernel into a new file with `compile_helpers.load_variant`.
"""

# Triton style: constexpr block sizes and matrix sizes are upper case.
# ruff: noqa: N803

from __future__ import annotations

from dataclasses import dataclass, field

import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


@triton.jit
def softmax_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    row_in = tl.load(in_ptr + row * in_row_stride + cols, mask=mask, other=-float("inf"))
    shifted = row_in - tl.max(row_in, axis=0)
    numerator = tl.exp(shifted)
    denominator = tl.sum(numerator, axis=0)
    tl.store(out_ptr + row * out_row_stride + cols, numerator / denominator, mask=mask)


@triton.jit
def sum_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n, BLOCK):
        acc += tl.load(x_ptr + start + offsets, mask=start + offsets < n, other=0.0)
    tl.store(out_ptr, tl.sum(acc, axis=0))


@triton.jit
def matmul_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    M,
    N,
    K,
    stride_am,
    stride_bk,
    stride_cm,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + rm[:, None] * stride_am + rk[None, :]
    b_ptrs = b_ptr + rk[:, None] * stride_bk + rn[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = tl.load(a_ptrs, mask=(rm[:, None] < M) & (rk[None, :] + k < K), other=0.0)
        b = tl.load(b_ptrs, mask=(rk[:, None] + k < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K * stride_bk
    c = acc.to(c_ptr.dtype.element_ty)
    c_ptrs = c_ptr + rm[:, None] * stride_cm + rn[None, :]
    tl.store(c_ptrs, c, mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def atomic_add_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offsets, mask=offsets < n, other=0.0)
    tl.atomic_add(out_ptr, tl.sum(x, axis=0))


@triton.jit
def control_flow_kernel(x_ptr, out_ptr, n, threshold, BLOCK: tl.constexpr):
    # scf.if with an else region and scf.while (two regions each): sibling regions whose block
    # arguments the printer names alike.
    offsets = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offsets, mask=offsets < n, other=0.0)
    total = tl.sum(x, axis=0)
    if total > threshold:  # noqa: SIM108 (statement form: two regions with their own names)
        scaled = x * 2.0
    else:
        scaled = x - 1.0
    steps = 0
    while steps < n:
        scaled = scaled * 0.5
        steps += 1
    tl.store(out_ptr + offsets, scaled, mask=offsets < n)


@dataclass(frozen=True)
class KernelSpec:
    """What `triton.compile(ASTSource(fn, signature, constexprs))` needs for one kernel."""

    name: str
    fn: object
    signature: dict[str, str]
    constexprs: dict[str, int] = field(default_factory=dict)


def _matmul(dtype: str) -> KernelSpec:
    return KernelSpec(
        f"matmul_{dtype}",
        matmul_kernel,
        {
            "a_ptr": f"*{dtype}",
            "b_ptr": f"*{dtype}",
            "c_ptr": f"*{dtype}",
            **{k: "i32" for k in ("M", "N", "K", "stride_am", "stride_bk", "stride_cm")},
            **{k: "constexpr" for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K")},
        },
        {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32},
    )


KERNELS: dict[str, KernelSpec] = {
    spec.name: spec
    for spec in (
        KernelSpec(
            "add",
            add_kernel,
            {
                "x_ptr": "*fp32",
                "y_ptr": "*fp32",
                "out_ptr": "*fp32",
                "n": "i32",
                "BLOCK": "constexpr",
            },
            {"BLOCK": 1024},
        ),
        KernelSpec(
            "softmax",
            softmax_kernel,
            {
                "out_ptr": "*fp32",
                "in_ptr": "*fp32",
                "in_row_stride": "i32",
                "out_row_stride": "i32",
                "n_cols": "i32",
                "BLOCK": "constexpr",
            },
            {"BLOCK": 1024},
        ),
        KernelSpec(
            "sum",
            sum_kernel,
            {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"},
            {"BLOCK": 512},
        ),
        _matmul("fp16"),
        _matmul("bf16"),
        KernelSpec(
            "control_flow",
            control_flow_kernel,
            {
                "x_ptr": "*fp32",
                "out_ptr": "*fp32",
                "n": "i32",
                "threshold": "fp32",
                "BLOCK": "constexpr",
            },
            {"BLOCK": 256},
        ),
        KernelSpec(
            "atomic_add",
            atomic_add_kernel,
            {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"},
            {"BLOCK": 256},
        ),
    )
}
