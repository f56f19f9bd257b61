"""`triton_dot`: a workload that compiles real Triton kernels for an NVIDIA target, no GPU needed.

Each step "launches" a `tl.dot` kernel and an elementwise kernel through triton-invariance's
compile-only driver (stock Triton compiles for cuda:80; launches do nothing), so aorta's
per-trial kernel fingerprints can be tested on CPU. Triton, torch and triton-invariance are
imported inside the trial: the registry loads this module without them.
"""

# Triton style: constexpr block sizes are upper case.
# ruff: noqa: N803

from __future__ import annotations

import time
from typing import Any

from aorta.registry import Workload
from aorta.workloads.contract import TrialContext, WorkloadOutcome


def _kernels() -> tuple[Any, Any]:
    import triton
    import triton.language as tl

    @triton.jit
    def dot_kernel(a_ptr, b_ptr, c_ptr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        a = tl.load(a_ptr + offs[:, None] * BLOCK + offs[None, :])
        b = tl.load(b_ptr + offs[:, None] * BLOCK + offs[None, :])
        tl.store(c_ptr + offs[:, None] * BLOCK + offs[None, :], tl.dot(a, b))

    @triton.jit
    def scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2.0, mask=offs < n)

    return dot_kernel, scale_kernel


def _triton_dot(ctx: TrialContext) -> WorkloadOutcome:
    import torch
    from triton.backends.compiler import GPUTarget

    from triton_invariance.compile_only import compile_only

    dot, scale = _kernels()
    a = torch.ones(32, 32)
    times: list[float] = []
    with compile_only(GPUTarget("cuda", 80, 32)):
        for step in range(ctx.steps):
            start = time.perf_counter()
            dot[(1,)](a, a, torch.empty(32, 32), BLOCK=32)
            scale[(4,)](a, torch.empty(32, 32), 1024, BLOCK=256)
            elapsed = (time.perf_counter() - start) * 1000.0
            ctx.on_step(step, 1.0, elapsed)
            times.append(elapsed)
    return WorkloadOutcome(step_times_ms=times, warmup_steps=0, losses=[1.0] * ctx.steps)


TRITON_DOT = Workload(
    name="triton_dot", entry=_triton_dot, description="compiles Triton kernels for cuda:80"
)
