"""The DAG line of a diff report names the dot and its changed attribute (issue 28 §1), on a
real fp32 matmul whose `input_precision` changes, for cuda (Ampere, Hopper) and hip."""

from __future__ import annotations

from pathlib import Path

import pytest
from compile_helpers import compile_ttgir, load_variant, source_of
from tutorial_matmul import SIGNATURE, tile_matmul

from triton_invariance.fingerprint import compute_invariance

FP32 = {k: ("*fp32" if v == "*fp16" else v) for k, v in SIGNATURE.items()}
CONSTEXPRS = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32}


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ("cuda:80", "dot 0 `tt.dot`: inputPrecision tf32 -> ieee"),
        (
            "cuda:90",
            "dot 0: `ttng.warp_group_dot` (inputPrecision tf32, isAsync true) -> `tt.dot` "
            "(inputPrecision ieee)",
        ),
        ("hip:gfx942", "dot 0 `tt.dot`: inputPrecision tf32 -> ieee"),
    ],
)
def test_input_precision_change_names_the_dot(
    target: str, expected: str, tmp_path: Path, triton_cache_dir: Path
) -> None:
    source = source_of(tile_matmul).replace("tl.float16", "tl.float32")
    tag = target.replace(":", "_")
    tf32 = load_variant(source, tmp_path, f"tf32_{tag}", "tile_matmul")
    ieee = load_variant(
        source.replace("tl.dot(a, b, acc)", 'tl.dot(a, b, acc, input_precision="ieee")'),
        tmp_path,
        f"ieee_{tag}",
        "tile_matmul",
    )
    before = compute_invariance(compile_ttgir(tf32, FP32, CONSTEXPRS, target))
    after = compute_invariance(compile_ttgir(ieee, FP32, CONSTEXPRS, target))
    dag_line = next(
        line for line in before.diff_report(after).splitlines() if "computation_dag_hash:" in line
    )
    assert f"computation_dag_hash: {expected}; first difference at" in dag_line
