"""The MLIR parser and canonicalisation on hand-written modules (syntax Triton's printer emits)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from triton_invariance.fingerprint import InvalidTTGIRError, compute_invariance
from triton_invariance.mlir import (
    DIMS,
    HASH,
    NUMBER,
    STRING,
    VALUE,
    MlirSyntaxError,
    parse,
    tokenize,
)

HEADER = (
    "#blocked = #ttg.blocked<{sizePerThread = [1], threadsPerWarp = [32], warpsPerCTA = [4], "
    "order = [0]}>\n"
    '#loc = loc("/src/k.py":3:0)\n'
    'module attributes {"ttg.num-ctas" = 1 : i32, "ttg.num-warps" = 4 : i32, '
    'ttg.target = "cuda:80", "ttg.threads-per-warp" = 32 : i32} {\n'
)


def module(body: str, header: str = HEADER) -> str:
    """A kernel `@k(%p: !tt.ptr<f32>, %n: i32)` whose body is `body`."""
    return (
        header
        + '  tt.func public @k(%p: !tt.ptr<f32> loc("p"(#loc)), %n: i32 loc("n"(#loc))) '
        + "attributes {noinline = false} {\n"
        + body
        + "    tt.return loc(#loc)\n  } loc(#loc)\n} loc(#loc)\n"
    )


REDUCE = """\
    %r = tt.make_range {end = 128 : i32, start = 0 : i32} : tensor<128xi32, #blocked> loc(#loc)
    %f = arith.sitofp %r : tensor<128xi32, #blocked> to tensor<128xf32, #blocked> loc(#loc)
    %s = "tt.reduce"(%f) <{axis = 0 : i32}> ({
    ^bb0(%a: f32 loc(#loc), %b: f32 loc(#loc)):
      %m = arith.addf %a, %b : f32 loc(#loc)
      tt.reduce.return %m : f32 loc(#loc)
    }) : (tensor<128xf32, #blocked>) -> f32 loc(#loc)
    tt.store %p, %s : !tt.ptr<f32> loc(#loc)
"""


def test_tokens_of_a_typed_line() -> None:
    toks = tokenize('%x#1 = "a.b"(%y) : tensor<128x64xf16, #blocked> -> f32 // note\n')
    kinds = [(t.kind, t.text) for t in toks]
    assert (VALUE, "%x#1") in kinds
    assert (STRING, '"a.b"') in kinds
    assert (DIMS, "128x64x") in kinds
    assert (HASH, "#blocked") in kinds
    assert not any("note" in t.text for t in toks)


@pytest.mark.parametrize("number", ["0xFF800000", "-1.000000e+00", "3.5", "-7", "1e10"])
def test_numbers(number: str) -> None:
    toks = tokenize(f"arith.constant {number} : f32")
    assert (NUMBER, number) in [(t.kind, t.text) for t in toks]


def test_parse_structure_generic_and_custom() -> None:
    mod = parse(module(REDUCE))
    assert "#blocked" in mod.aliases
    assert mod.aliases["#loc"] == []  # a location alias carries nothing once loc() is dropped
    (top,) = mod.ops
    func = top.regions[0][0].ops[0]
    assert func.name == "tt.func"
    names = [op.name for op in func.regions[0][0].ops]
    assert names == ["tt.make_range", "arith.sitofp", "tt.reduce", "tt.store", "tt.return"]
    reduce_op = func.regions[0][0].ops[2]
    (region,) = reduce_op.regions
    assert [t.text for t in region[0].header][:2] == ["^bb0", "("]
    assert [op.name for op in region[0].ops] == ["arith.addf", "tt.reduce.return"]
    assert not any(t.text == "loc" for t in reduce_op.body)


def test_multi_results_and_result_index() -> None:
    body = """\
    %c = arith.constant 0 : i32 loc(#loc)
    %pair:2 = "test.two"(%c) : (i32) -> (i32, i32) loc(#loc)
    %sum = arith.addi %pair#1, %pair#0 : i32 loc(#loc)
"""
    inv = compute_invariance(module(body))
    line = next(op for op in inv.ops if "test.two" in op)
    assert line.strip().startswith("%3, %4 = test.two")
    add = next(op for op in inv.ops if "arith.addi" in op)
    assert "arith.addi %4, %3" in add


def test_reused_names_in_sibling_regions_are_distinct_values() -> None:
    # MLIR's printer reuses a name once its region is closed; the second `%a` is a new value.
    twice = REDUCE + REDUCE.replace("%s", "%t").replace("tt.store %p, %t", "tt.store %p, %t")
    inv = compute_invariance(module(twice))
    headers = [op.strip() for op in inv.ops if op.strip().startswith("^")]
    assert len(headers) == 2 and headers[0] != headers[1]


def test_fingerprint_ignores_names_and_locations() -> None:
    a = compute_invariance(module(REDUCE))
    renamed = REDUCE.replace("%a", "%lhs").replace("%b", "%rhs").replace("%f", "%floats")
    no_locs = module(REDUCE).replace(" loc(#loc)", "").replace(' loc("p"(#loc))', "")
    assert compute_invariance(module(renamed)) == a
    assert compute_invariance(no_locs) == a


def test_alias_chain_resolved_and_inline_equals_alias() -> None:
    slice_alias = "#slice = #ttg.slice<{dim = 0, parent = #blocked}>\n"
    body = "    %r = tt.make_range {end = 8 : i32, start = 0 : i32} : tensor<8xi32, #slice>\n"
    via_alias = compute_invariance(module(body, HEADER.replace("#loc =", slice_alias + "#loc =")))
    inline = compute_invariance(
        module(body.replace("#slice", "#ttg.slice<{dim = 0, parent = #blocked}>"))
    )
    assert via_alias == inline
    assert via_alias.layouts == (
        "#ttg.slice<{dim = 0, parent = #ttg.blocked<{sizePerThread = [1], threadsPerWarp = [32], "
        "warpsPerCTA = [4], order = [0]}>}>",
    )


def test_encoding_goes_to_layout_not_dag() -> None:
    inv = compute_invariance(module(REDUCE))
    assert all("#ttg" not in op for op in inv.ops)
    assert "tensor<128xf32>" in next(op for op in inv.ops if "sitofp" in op)
    assert inv.op_layouts[next(i for i, op in enumerate(inv.ops) if "sitofp" in op)] == "#0,#0"


def test_attribute_and_type_changes_are_seen() -> None:
    base = compute_invariance(module(REDUCE))
    axis = compute_invariance(module(REDUCE.replace("axis = 0", "axis = 1")))
    dtype = compute_invariance(module(REDUCE).replace("f32", "f64"))
    assert base.changed_components(axis) == ["computation_dag_hash"]
    assert "computation_dag_hash" in base.changed_components(dtype)
    assert "dtype_signature" in base.changed_components(dtype)


def test_dtype_signature_format() -> None:
    assert compute_invariance(module(REDUCE)).dtype_signature == "input0:!tt.ptr<f32>,input1:i32->"


def test_hw_extra_module_attributes_kept() -> None:
    header = HEADER.replace(
        '"ttg.num-ctas" = 1 : i32', '"ttg.num-ctas" = 1 : i32, "ttg.maxnreg" = 128 : i32'
    )
    inv = compute_invariance(module(REDUCE, header))
    assert ("ttg.maxnreg", "128 : i32") in inv.hw_config.extra
    assert "hw_config_hash" in inv.changed_components(compute_invariance(module(REDUCE)))


def test_private_helpers_canonicalised_and_entry_chosen() -> None:
    text = module(REDUCE).replace(
        "  tt.func public @k",
        "  tt.func private @helper(%x: f32) -> f32 {\n    tt.return %x : f32\n  }\n"
        "  tt.func public @k",
    )
    inv = compute_invariance(text)
    assert inv.kernel_name == "k"
    assert any("@f0" in op for op in inv.ops) and any("@f1" in op for op in inv.ops)
    assert not any("@helper" in op for op in inv.ops)
    renamed = compute_invariance(text.replace("@helper", "@other_helper"))
    assert renamed == inv


def test_two_public_kernels_need_a_name() -> None:
    text = module(REDUCE).replace(
        "  tt.func public @k", "  tt.func public @j() {\n    tt.return\n  }\n  tt.func public @k"
    )
    with pytest.raises(InvalidTTGIRError, match=r"found 2 \(j, k\); pass kernel_name"):
        compute_invariance(text)
    assert compute_invariance(text, kernel_name="k").kernel_name == "k"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "module {\n  %x = arith.addi %a, %b : i32 ~\n}\n",
            r"line 2: unexpected character '~'",
        ),
        ("module attributes {a = [1} {\n}\n", r"line 1: unbalanced '\}'"),
        ("module {\n  tt.func @k() {\n", r"line 2: region is never closed"),
        (
            "#a = #b\n#b = #a\n" + module("    %r = tt.make_range : tensor<8xi32, #a>\n"),
            r"alias #\w is defined in terms of itself",
        ),
        ("#a = 1\n#a = 2\n", r"alias #a defined twice"),
    ],
)
def test_syntax_errors_name_the_place(text: str, message: str) -> None:
    with pytest.raises(InvalidTTGIRError, match=message):
        compute_invariance(text)


def test_named_module_reads_the_same() -> None:
    named = module(REDUCE).replace("module attributes", "module @kernels attributes")
    assert compute_invariance(named) == compute_invariance(module(REDUCE))


def test_not_a_module() -> None:
    with pytest.raises(InvalidTTGIRError, match="exactly one top-level `module`"):
        compute_invariance("tt.func @k() {\n  tt.return\n}\n")


def test_syntax_error_is_a_value_error() -> None:
    assert issubclass(MlirSyntaxError, ValueError)


def test_fingerprinting_never_imports_triton() -> None:
    code = (
        "import sys\n"
        "from triton_invariance.fingerprint import compute_invariance\n"
        f"inv = compute_invariance({module(REDUCE)!r})\n"
        "print(inv.fingerprint, 'triton' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, timeout=60
    ).stdout.split()
    assert out == [compute_invariance(module(REDUCE)).fingerprint, "False"]


def test_module_without_threads_per_warp_is_ttgir_with_tritons_default() -> None:
    # Triton's dialect reads an absent `ttg.threads-per-warp` as 32 and an absent
    # `ttg.num-ctas` as 1: such a module is valid TTGIR and the same kernel as the explicit one.
    bare = HEADER.replace(', "ttg.threads-per-warp" = 32 : i32', "").replace(
        '"ttg.num-ctas" = 1 : i32, ', ""
    )
    assert "threads-per-warp" not in bare and "num-ctas" not in bare
    inv = compute_invariance(module(REDUCE, header=bare))
    assert inv.hw_config.threads_per_warp == 32 and inv.hw_config.num_ctas == 1
    assert inv == compute_invariance(module(REDUCE))
    wave64 = HEADER.replace('"ttg.threads-per-warp" = 32', '"ttg.threads-per-warp" = 64')
    assert compute_invariance(module(REDUCE, header=wave64)).changed_components(inv) == [
        "hw_config_hash"
    ]


def test_module_without_num_warps_is_still_not_ttgir() -> None:
    ttir = HEADER.replace('"ttg.num-warps" = 4 : i32, ', "")
    with pytest.raises(InvalidTTGIRError, match=r"'ttg\.num-warps' is missing"):
        compute_invariance(module(REDUCE, header=ttir))


@pytest.mark.parametrize("depth", [101, 5000])
def test_deeply_nested_regions_are_an_invalid_ttgir_error(depth: int) -> None:
    nested = '    "test.wrap"() ({\n' * depth + "    }) : () -> ()\n" * depth
    with pytest.raises(InvalidTTGIRError, match="regions nested more than 100 deep"):
        compute_invariance(module(nested))


def test_nesting_up_to_the_limit_is_accepted() -> None:
    nested = '    "test.wrap"() ({\n' * 98 + "    }) : () -> ()\n" * 98
    ops = compute_invariance(module(nested)).ops
    assert sum(1 for op in ops if op.strip() == "region 0") == 98 + 1  # the wraps and tt.func


def test_deep_alias_chain_is_an_invalid_ttgir_error() -> None:
    chain = "".join(f"#a{i} = #a{i + 1}\n" for i in range(3000)) + "#a3000 = 1\n"
    text = chain + module("    %r = tt.make_range : tensor<8xi32, #a0>\n")
    with pytest.raises(InvalidTTGIRError, match="aliases nested more than 100 deep"):
        compute_invariance(text)
