"""Small hand-built `InvarianceData` values for the storage / cache / API tests.

They are built through the real dataclass (hashes derived by `data.py`), just without a
compile, so tests of the layers above the fingerprint stay fast. Tests that need real TTGIR
compile it (see test_hooks.py, test_api.py).
"""

from __future__ import annotations

from triton_invariance.data import HwConfig, InvarianceData


def sample_inv(
    op: str = "arith.addf", kernel: str = "my_kernel", num_warps: int = 4
) -> InvarianceData:
    """A two-op fingerprint whose DAG differs with `op` and whose hw config differs with
    `num_warps`."""
    return InvarianceData(
        kernel_name=kernel,
        dtype_signature="input0:!tt.ptr<f32>,input1:i32->",
        hw_config=HwConfig(target="cuda:80", num_warps=num_warps, num_ctas=1, threads_per_warp=32),
        ops=(f"%0 = {op} %a, %b : tensor<128xf32>", "tt.return"),
        op_layouts=("#0", ""),
        layouts=("#ttg.blocked<{sizePerThread = [1]}>",),
    )
