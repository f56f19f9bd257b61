"""A module printed in MLIR's generic syntax fingerprints like its custom-syntax print (issue 28
§1): real compiled kernels for cuda and hip, re-printed by Triton's MLIR with
--mlir-print-op-generic."""

from __future__ import annotations

from pathlib import Path

import pytest
from compile_helpers import compile_ttgir, print_generic
from tutorial_matmul import SIGNATURE, tile_matmul

from triton_invariance.fingerprint import InvalidTTGIRError, compute_invariance
from triton_invariance.generic import is_generic

CONSTEXPRS = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32}


@pytest.mark.parametrize("target", ["cuda:90", "hip:gfx942"])
def test_generic_module_fingerprints_like_the_custom_one(
    target: str, tmp_path: Path, triton_cache_dir: Path
) -> None:
    pretty = compile_ttgir(tile_matmul, SIGNATURE, CONSTEXPRS, target)
    generic = print_generic(pretty, target, tmp_path)
    assert is_generic(generic) and not is_generic(pretty)
    assert '"tt.load"(' in generic  # really the generic form, op by op
    before, after = compute_invariance(pretty), compute_invariance(generic)
    assert after.kernel_name == "tile_matmul"
    assert after.fingerprint == before.fingerprint
    assert after.ops == before.ops


def test_a_changed_generic_module_still_differs(tmp_path: Path, triton_cache_dir: Path) -> None:
    pretty = compile_ttgir(tile_matmul, SIGNATURE, CONSTEXPRS, "cuda:90")
    generic = print_generic(pretty, "cuda:90", tmp_path)
    changed = generic.replace("value = 31 : i32", "value = 15 : i32")  # BLOCK_K - 1 in cdiv
    assert changed != generic
    before, after = compute_invariance(generic), compute_invariance(changed)
    assert before.changed_components(after) == ["computation_dag_hash"]


def test_a_generic_module_without_a_target_is_one_clear_error() -> None:
    text = '"builtin.module"() ({\n}) : () -> ()\n'
    with pytest.raises(InvalidTTGIRError, match=r"generic syntax without a `ttg.target` attribute"):
        compute_invariance(text)
