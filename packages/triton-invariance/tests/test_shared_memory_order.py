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


_RING = "!ttg.memdesc<2x4xf32, #shared, #smem, mutable>"
_SLOT = "!ttg.memdesc<4xf32, #shared, #smem, mutable>"


def _pipelined(first: str, second: str, wait: str, pointers: tuple[str, str] = ("pa", "pb")) -> str:
    """Two empty ring buffers of one type (software pipelining's), filled by async copies."""
    head = (
        "    %c0 = arith.constant 0 : i32\n"
        "    %off = arith.constant dense<4> : tensor<4xi32>\n"
        "    %pa = tt.splat %p : !tt.ptr<f32> -> tensor<4x!tt.ptr<f32>>\n"
        "    %pb = tt.addptr %pa, %off : tensor<4x!tt.ptr<f32>>, tensor<4xi32>\n"
        f"    %a = ttg.local_alloc : () -> {_RING}\n"
        f"    %b = ttg.local_alloc : () -> {_RING}\n"
        f"    %ai = ttg.memdesc_index %a[%c0] : {_RING} -> {_SLOT}\n"
        f"    %bi = ttg.memdesc_index %b[%c0] : {_RING} -> {_SLOT}\n"
    )
    copy = {
        "a": f"    %ta = ttg.async_copy_global_to_local %{pointers[0]}, %ai : "
        f"tensor<4x!tt.ptr<f32>> -> {_SLOT}\n    %ga = ttg.async_commit_group tokens %ta\n",
        "b": f"    %tb = ttg.async_copy_global_to_local %{pointers[1]}, %bi : "
        f"tensor<4x!tt.ptr<f32>> -> {_SLOT}\n    %gb = ttg.async_commit_group tokens %tb\n",
    }
    tail = (
        f"    %w = ttg.async_wait {wait} {{num = 0 : i32}}\n"
        f"    %ra = ttg.local_load %ai token %w : {_SLOT} -> tensor<4xf32>\n"
        f"    %rb = ttg.local_load %bi token %w : {_SLOT} -> tensor<4xf32>\n"
        "    %d = arith.subf %ra, %rb : tensor<4xf32>\n"
    )
    return _SHARED + module(head + copy[first] + copy[second] + tail)


def test_empty_ring_buffers_are_told_apart_by_their_users_not_their_order() -> None:
    base = compute_invariance(_pipelined("a", "b", "%ga, %gb"))
    swapped = compute_invariance(_pipelined("b", "a", "%gb, %ga"))
    assert base.fingerprint == swapped.fingerprint
    crossed = compute_invariance(_pipelined("a", "b", "%ga, %gb", pointers=("pb", "pa")))
    assert base.changed_components(crossed) == ["computation_dag_hash"]
