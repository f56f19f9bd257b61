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


@pytest.mark.parametrize("target", ["cuda:80", "cuda:90", "hip:gfx942"])
@pytest.mark.parametrize(("blocks", "stages"), [((64, 64, 32), 3), ((32, 32, 32), 4)])
def test_swapping_the_loads_of_a_software_pipelined_fp32_matmul_keeps_the_fingerprint(
    target: str,
    blocks: tuple[int, int, int],
    stages: int,
    tmp_path: Path,
    triton_cache_dir: Path,
) -> None:
    """fp32 tiles: Triton pipelines the K loop into empty ring buffers (`ttg.local_alloc`,
    `memdesc_index`, async copies / local stores) and loop-carried slots whose order follows
    the loads'. Swapping the loads keeps the fingerprint (that crossing the buffers still
    changes it is `test_empty_ring_buffers_are_told_apart_by_their_users_not_their_order`)."""
    source = source_of(tile_matmul).replace("tl.float16", "tl.float32")
    signature = {k: ("*fp32" if v == "*fp16" else v) for k, v in SIGNATURE.items()}
    tag = f"{target.replace(':', '_')}_{blocks[2]}_{stages}"
    variants = {
        "base": source,
        "swapped": source.replace(LOAD_A + LOAD_B, LOAD_B + LOAD_A),
    }
    ttgir = {
        name: compile_ttgir(
            load_variant(text, tmp_path, f"{name}_{tag}", "tile_matmul"),
            signature,
            dict(zip(("BLOCK_M", "BLOCK_N", "BLOCK_K"), blocks, strict=True)),
            target,
            num_stages=stages,
        )
        for name, text in variants.items()
    }
    assert "ttg.local_alloc : ()" in ttgir["base"]  # really pipelined into empty buffers
    base, swapped = compute_invariance(ttgir["base"]), compute_invariance(ttgir["swapped"])
    assert base.fingerprint == swapped.fingerprint


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


def _loop(args: str, yielded: str, result: str, second_init: str = "%o") -> str:
    """A loop carrying x (from 0.0, +1 per trip) and y (from `second_init`, *2 per trip)."""
    init = {"x": "%x = %z", "y": f"%y = {second_init}"}
    return module(
        "    %c0 = arith.constant 0 : i32\n"
        "    %c1 = arith.constant 1 : i32\n"
        "    %c4 = arith.constant 4 : i32\n"
        "    %z = arith.constant 0.000000e+00 : f32\n"
        "    %o = arith.constant 1.000000e+00 : f32\n"
        "    %t = arith.constant 2.000000e+00 : f32\n"
        f"    %r:2 = scf.for %i = %c0 to %c4 step %c1 iter_args("
        f"{', '.join(init[a] for a in args)}) -> (f32, f32)  : i32 {{\n"
        "      %x2 = arith.addf %x, %o : f32\n"
        "      %y2 = arith.mulf %y, %t : f32\n"
        f"      scf.yield {yielded} : f32, f32\n"
        "    }\n"
        f"    %d = arith.subf {result} : f32\n"
    )


def test_loop_carried_values_may_be_permuted_but_not_exchanged() -> None:
    """Permuting iter_args with their yield and results (what the pipeliner does when loads
    swap) keeps the fingerprint; feeding one carried value into the other's slot does not,
    also when both start from the same value."""
    base = compute_invariance(_loop("xy", "%x2, %y2", "%r#0, %r#1"))
    permuted = compute_invariance(_loop("yx", "%y2, %x2", "%r#1, %r#0"))
    assert base.fingerprint == permuted.fingerprint
    exchanged = compute_invariance(_loop("xy", "%y2, %x2", "%r#0, %r#1"))
    assert base.changed_components(exchanged) == ["computation_dag_hash"]
    tied = compute_invariance(_loop("xy", "%x2, %y2", "%r#0, %r#1", second_init="%z"))
    tied_exchanged = compute_invariance(_loop("xy", "%y2, %x2", "%r#0, %r#1", second_init="%z"))
    assert tied.changed_components(tied_exchanged) == ["computation_dag_hash"]
