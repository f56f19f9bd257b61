"""Independent loads may swap; shared-memory buffers are hashed by what they hold and where they
are used, not by where they are printed (issue 28 §1). Real compiled kernels for cuda and hip,
plus hand-written modules for the orderings Triton's printer may emit around local buffers."""

from __future__ import annotations

from pathlib import Path

import pytest
from compile_helpers import compile_ttgir, load_variant, source_of
from test_fingerprint_parser import module
from tutorial_matmul import LOAD_A, LOAD_B, SIGNATURE, tile_matmul

from triton_invariance.fingerprint import compute_invariance

CONSTEXPRS = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32}


@pytest.mark.parametrize("target", ["cuda:80", "cuda:90", "hip:gfx942"])
def test_swapping_the_two_loads_of_a_matmul_keeps_the_fingerprint(
    target: str, tmp_path: Path, triton_cache_dir: Path
) -> None:
    source = source_of(tile_matmul)
    assert LOAD_A + LOAD_B in source
    swapped = load_variant(
        source.replace(LOAD_A + LOAD_B, LOAD_B + LOAD_A),
        tmp_path,
        f"swapped_{target.replace(':', '_')}",
        "tile_matmul",
    )
    before = compile_ttgir(tile_matmul, SIGNATURE, CONSTEXPRS, target)
    after = compile_ttgir(swapped, SIGNATURE, CONSTEXPRS, target)
    assert "ttg.local_alloc" in before or target.startswith("hip")
    assert before != after  # the printed order differs ...
    assert compute_invariance(before).fingerprint == compute_invariance(after).fingerprint


def test_moving_a_load_past_the_store_still_changes_it(
    tmp_path: Path, triton_cache_dir: Path
) -> None:
    source = source_of(tile_matmul)
    store = "    tl.store(c_ptrs, c, mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))\n"
    reread = "    c = tl.load(c_ptrs) + c\n"
    first = load_variant(
        source.replace(store, reread + store), tmp_path, "reread_first", "tile_matmul"
    )
    second = load_variant(
        source.replace(store, store + reread + store), tmp_path, "reread_after", "tile_matmul"
    )
    a = compile_ttgir(first, SIGNATURE, CONSTEXPRS, "cuda:80")
    b = compile_ttgir(second, SIGNATURE, CONSTEXPRS, "cuda:80")
    assert compute_invariance(a).changed_components(compute_invariance(b)) != []


_ALLOC = "    %{n} = ttg.local_alloc : () -> !ttg.memdesc<4xf32, #shared, #smem, mutable>\n"
_MEMDESC = "!ttg.memdesc<4xf32, #shared, #smem, mutable>"
_STORE = "    ttg.local_store %{v}, %{buf} : tensor<4xf32> -> " + _MEMDESC + "\n"
_LOAD = "    %{n} = ttg.local_load %{buf} : " + _MEMDESC + " -> tensor<4xf32>\n"
_SHARED = (
    "#shared = #ttg.swizzled_shared<{vec = 1, perPhase = 1, maxPhase = 1, order = [0]}>\n"
    "#smem = #ttg.shared_memory\n"
)


def _local(body: str) -> str:
    values = (
        "    %x = arith.constant dense<1.0> : tensor<4xf32>\n"
        "    %y = arith.constant dense<2.0> : tensor<4xf32>\n"
    )
    return _SHARED + module(values + body)


def test_stores_into_different_buffers_swap_but_a_load_may_not_pass_its_store() -> None:
    allocs = _ALLOC.format(n="a") + _ALLOC.replace("4xf32", "8xf32").format(n="b")
    store_a = _STORE.format(v="x", buf="a")
    store_b = _STORE.replace("tensor<4xf32>", "tensor<8xf32>").replace("<4xf32", "<8xf32")
    store_b = store_b.format(v="y8", buf="b")
    y8 = "    %y8 = arith.constant dense<2.0> : tensor<8xf32>\n"
    load_a = _LOAD.format(n="r", buf="a")
    base = compute_invariance(_local(allocs + y8 + store_a + store_b + load_a))
    swapped = compute_invariance(_local(allocs + y8 + store_b + store_a + load_a))
    assert base.fingerprint == swapped.fingerprint
    early = compute_invariance(_local(allocs + y8 + load_a + store_a + store_b))
    assert base.changed_components(early) == ["computation_dag_hash"]


def test_a_barrier_still_orders_shared_memory() -> None:
    allocs = _ALLOC.format(n="a")
    store = _STORE.format(v="x", buf="a")
    load = _LOAD.format(n="r", buf="a")
    barrier = "    gpu.barrier\n"
    base = compute_invariance(_local(allocs + store + barrier + load))
    moved = compute_invariance(_local(allocs + store + load + barrier))
    assert base.changed_components(moved) == ["computation_dag_hash"]
