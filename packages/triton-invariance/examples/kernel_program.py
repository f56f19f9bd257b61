"""A kernel program as a user would write it: an autotuned Triton kernel, launched twice.

It knows nothing about triton-invariance. Run with TRITON_INVARIANCE_COMMIT=1 or
TRITON_INVARIANCE_COMPARE=1 and the start-up hook fingerprints every compiled config and
commits / compares the autotuner's winner. Without a GPU it runs under
`triton_invariance.compile_only`: the kernels really compile (for an A100 target, sm80) but
launches do nothing and the autotuner's timings come from `_timing` below.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from triton_invariance.compile_only import compile_only


@triton.autotune(
    configs=[
        triton.Config({"BLOCK": 256}, num_warps=4),
        triton.Config({"BLOCK": 1024}, num_warps=8),
    ],
    key=["n"],
)
@triton.jit
def scaled_add(x_ptr, y_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):  # noqa: N803
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x * alpha + y, mask=mask)


def _timing(metadata: object) -> float:
    """Pretend timings (ms): the 4-warp config wins, as it might on a real GPU."""
    return 1.0 if getattr(metadata, "num_warps", 0) == 4 else 2.0


def main() -> None:
    n = 1 << 16
    x, y, out = torch.ones(n), torch.ones(n), torch.empty(n)
    with compile_only(timings=_timing):
        for _ in range(2):  # the second launch reuses the tuned config: no new decision
            scaled_add[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, out, n, 2.0)
    print(f"scaled_add: autotuner picked {scaled_add.best_config}")


if __name__ == "__main__":
    main()
