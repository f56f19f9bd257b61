"""Phase 1 (fingerprint) on real TTGIR: Triton compiles each kernel for a target on this CPU.

What must not change the fingerprint: SSA names, locations, source line shifts, Python variable
names, a second process with another hash seed. What must: the computation (`+` -> `-`), element
types (fp16 -> bf16), num_warps (layouts, hw config) and the target.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from compile_helpers import (
    TARGETS,
    compile_ttgir,
    load_variant,
    reparse_with_triton,
    source_of,
    triton_op_names,
)
from kernels import KERNELS, add_kernel

from triton_invariance.data import InvarianceData
from triton_invariance.fingerprint import InvalidTTGIRError, compute_invariance

TTGIR = Callable[..., str]
ADD = KERNELS["add"]


def op_names(inv: InvarianceData) -> list[str]:
    """Op names of the canonical op lines (region markers and block headers skipped)."""
    names = []
    for line in inv.ops:
        text = line.strip()
        if text.startswith(("^", "region ")):
            continue
        if text.startswith("%"):
            text = text.split(" = ", 1)[1]
        names.append(re.split(r"[ (<]", text, maxsplit=1)[0])
    return names


def compile_add_variant(
    source: str,
    tmp_path: Path,
    module_name: str,
    target: str,
    renames: dict[str, str] | None = None,
) -> str:
    """Compile a rewritten `add_kernel`; `renames` maps renamed arguments (for the signature)."""
    fn = load_variant(source, tmp_path, module_name, "add_kernel")
    signature = {(renames or {}).get(k, k): v for k, v in ADD.signature.items()}
    return compile_ttgir(fn, signature, ADD.constexprs, target)


# -- every kernel, every target -------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("target", sorted(TARGETS))
@pytest.mark.parametrize("kernel", sorted(KERNELS))
def test_every_kernel_and_target_fingerprints(
    ttgir: TTGIR, kernel: str, target: str, tmp_path: Path
) -> None:
    text = ttgir(kernel, target)
    inv = compute_invariance(text)
    spec = KERNELS[kernel]
    assert inv.kernel_name == spec.fn.fn.__name__  # type: ignore[attr-defined]
    assert inv.hw_config.target == target
    assert inv.hw_config.threads_per_warp == TARGETS[target][2]
    assert inv.hw_config.num_warps == 4
    assert inv.layouts, "every TTGIR tensor carries an encoding"
    assert inv.dtype_signature.count("input") == len(
        [t for t in spec.signature.values() if t != "constexpr"]
    )

    # Oracle: Triton's own MLIR parser reads the same ops from the same text ...
    module, _context = reparse_with_triton(text, target, tmp_path)
    assert Counter(op_names(inv)) == Counter(triton_op_names(module))
    # ... and its re-print (new SSA names, no locations) fingerprints identically.
    stripped = module.str_nodebug()
    assert "loc(" in text and "loc(" not in stripped
    assert compute_invariance(stripped) == inv


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_same_kernel_compiled_twice_same_fingerprint(
    ttgir: TTGIR, target: str, triton_cache_dir: Path
) -> None:
    # A second, uncached compile (Triton's cache would hand back the same text).
    again = compile_ttgir(ADD.fn, ADD.signature, ADD.constexprs, target, num_stages=3)
    assert (
        compute_invariance(ttgir("add", target)).fingerprint
        == compute_invariance(again).fingerprint
    )


def test_to_dict_has_the_spec_keys(ttgir: TTGIR) -> None:
    d = compute_invariance(ttgir("matmul_fp16", "cuda:80")).to_dict()
    for key in (
        "fingerprint",
        "computation_dag_hash",
        "dtype_signature",
        "layout_hash",
        "hw_config_hash",
    ):
        assert isinstance(d[key], str) and d[key]
    assert InvarianceData.from_dict(json.loads(json.dumps(d))).fingerprint == d["fingerprint"]


# -- determinism across processes -----------------------------------------------------------------

_CHILD = """
import json, sys
sys.path.insert(0, {tests!r})
from compile_helpers import compile_ttgir
from kernels import KERNELS
from triton_invariance.fingerprint import compute_invariance
out = {{}}
for kernel, target in {cases!r}:
    spec = KERNELS[kernel]
    text = compile_ttgir(spec.fn, spec.signature, spec.constexprs, target)
    out[kernel + "@" + target] = compute_invariance(text).to_dict()
print(json.dumps(out))
"""


@pytest.mark.slow
def test_identical_in_separate_processes_with_different_hash_seeds(
    ttgir: TTGIR, tmp_path: Path
) -> None:
    cases = [("matmul_fp16", "cuda:80"), ("softmax", "hip:gfx942"), ("sum", "cuda:90")]
    code = _CHILD.format(tests=str(Path(__file__).parent), cases=cases)
    results = []
    for seed in ("0", "987654321"):
        env = {
            **os.environ,
            "PYTHONHASHSEED": seed,
            # Each child compiles from scratch: its own empty Triton cache.
            "TRITON_CACHE_DIR": str(tmp_path / f"cache-{seed}"),
        }
        proc = subprocess.run(
            [sys.executable, "-c", code],
            check=False,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr
        results.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    assert results[0] == results[1]
    for kernel, target in cases:
        here = compute_invariance(ttgir(kernel, target)).to_dict()
        assert results[0][f"{kernel}@{target}"] == here


# -- source edits that must not matter ------------------------------------------------------------


def test_renamed_python_variables_identical(ttgir: TTGIR, tmp_path: Path) -> None:
    source = source_of(add_kernel)
    renames = {
        "x_ptr": "lhs_ptr",
        "y_ptr": "rhs_ptr",
        "out_ptr": "dst",
        "offsets": "idx",
        "mask": "in_bounds",
        "pid": "block_id",
        "x": "lhs",
        "y": "rhs",
    }
    renamed = source
    for old, new in renames.items():
        renamed = re.sub(rf"\b{old}\b(?!=)", new, renamed)  # not the `mask=` keyword
    assert renamed != source
    text = compile_add_variant(renamed, tmp_path, "renamed_add", "cuda:80", renames)
    original = ttgir("add", "cuda:80")
    assert (
        "%in_bounds" in text and "%in_bounds" not in original
    )  # Triton names SSA values after them
    assert compute_invariance(text) == compute_invariance(original)


def test_shifted_source_lines_identical(ttgir: TTGIR, tmp_path: Path) -> None:
    shifted = "# a comment\n" * 7 + "\n\n" + source_of(add_kernel)
    text = compile_add_variant(shifted, tmp_path, "shifted_add", "hip:gfx942")
    original = ttgir("add", "hip:gfx942")
    assert text != original  # the locations moved
    assert compute_invariance(text) == compute_invariance(original)


def test_renamed_kernel_identical_fingerprint_new_name(ttgir: TTGIR, tmp_path: Path) -> None:
    source = source_of(add_kernel).replace("def add_kernel(", "def add_kernel_v2(")
    fn = load_variant(source, tmp_path, "renamed_kernel", "add_kernel_v2")
    text = compile_ttgir(fn, ADD.signature, ADD.constexprs, "cuda:80")
    new, old = compute_invariance(text), compute_invariance(ttgir("add", "cuda:80"))
    assert new.kernel_name == "add_kernel_v2" and old.kernel_name == "add_kernel"
    assert new.fingerprint == old.fingerprint


# -- changes that must be caught ------------------------------------------------------------------


def test_plus_to_minus_changes_only_the_dag(ttgir: TTGIR, tmp_path: Path) -> None:
    source = source_of(add_kernel)
    assert source.count("x + y") == 1
    text = compile_add_variant(source.replace("x + y", "x - y"), tmp_path, "sub_add", "cuda:80")
    before, after = compute_invariance(ttgir("add", "cuda:80")), compute_invariance(text)
    assert before.changed_components(after) == ["computation_dag_hash"]
    report = before.diff_report(after)
    assert "computation_dag_hash" in report
    assert "arith.addf" in report and "arith.subf" in report
    index = next(i for i, op in enumerate(before.ops) if "arith.addf" in op)
    assert f"op {index}" in report


def test_fp16_to_bf16_changes_dtype(ttgir: TTGIR) -> None:
    fp16 = compute_invariance(ttgir("matmul_fp16", "cuda:80"))
    bf16 = compute_invariance(ttgir("matmul_bf16", "cuda:80"))
    assert "dtype_signature" in fp16.changed_components(bf16)
    assert "f16" in fp16.dtype_signature and "bf16" in bf16.dtype_signature
    assert "dtype_signature: before" in fp16.diff_report(bf16)


@pytest.mark.parametrize("target", ["cuda:80", "hip:gfx942"])
def test_num_warps_changes_layout_and_hw(ttgir: TTGIR, target: str) -> None:
    four = compute_invariance(ttgir("add", target, num_warps=4))
    eight = compute_invariance(ttgir("add", target, num_warps=8))
    # Vector add: the same ops on the same shapes, distributed over twice the warps.
    assert four.changed_components(eight) == ["layout_hash", "hw_config_hash"]
    report = four.diff_report(eight)
    assert "num_warps: 4 -> 8" in report and "warpsPerCTA = [4]" in report


def test_num_warps_changes_matmul_layouts(ttgir: TTGIR) -> None:
    four = compute_invariance(ttgir("matmul_fp16", "cuda:80", num_warps=4))
    eight = compute_invariance(ttgir("matmul_fp16", "cuda:80", num_warps=8))
    changed = four.changed_components(eight)
    assert "layout_hash" in changed and "hw_config_hash" in changed


def test_cuda80_to_cuda90_changes_hw(ttgir: TTGIR) -> None:
    sm80 = compute_invariance(ttgir("add", "cuda:80"))
    sm90 = compute_invariance(ttgir("add", "cuda:90"))
    assert sm80.changed_components(sm90) == ["hw_config_hash"]
    assert "target: 'cuda:80' -> 'cuda:90'" in sm80.diff_report(sm90)


def test_matmul_targets_all_differ(ttgir: TTGIR) -> None:
    prints = {t: compute_invariance(ttgir("matmul_fp16", t)).fingerprint for t in TARGETS}
    assert len(set(prints.values())) == len(TARGETS)


# -- text edits on real TTGIR ---------------------------------------------------------------------


def test_locations_do_not_matter(ttgir: TTGIR) -> None:
    text = ttgir("softmax", "cuda:80")
    assert "loc(" in text
    moved = re.sub(r'loc\("([^"]*)":(\d+):(\d+)\)', r'loc("/elsewhere/k.py":\g<2>1:\g<3>)', text)
    assert moved != text
    dropped = re.sub(r" loc\([^()]*(\([^()]*\))?[^()]*\)", "", text)
    assert compute_invariance(moved) == compute_invariance(text)
    assert compute_invariance(dropped) == compute_invariance(text)


def test_whitespace_does_not_matter(ttgir: TTGIR) -> None:
    text = ttgir("sum", "cuda:90")
    spaced = re.sub(r"(?<=[,=:]) ", "    ", text).replace("\n", "\n\n  ")
    assert compute_invariance(spaced) == compute_invariance(text)


def test_ssa_names_do_not_matter_but_data_flow_does(ttgir: TTGIR) -> None:
    text = ttgir("softmax", "cuda:80")
    renamed = re.sub(r"%([A-Za-z_][\w]*)", r"%renamed_\1", text)
    assert renamed != text
    assert compute_invariance(renamed) == compute_invariance(text)
    # Swapping the operands of `-` and `/` is different data flow; of `+` (IEEE-commutative)
    # it is not (format 1 hashed the op sequence and reported it; format 2 hashes the graph).
    original = compute_invariance(text)
    for op, verdict in (("subf", ["computation_dag_hash"]), ("divf", ["computation_dag_hash"])):
        line = next(ln for ln in text.splitlines() if f"arith.{op}" in ln)
        a, b = re.search(rf"arith\.{op} (%\w+), (%\w+)", line).groups()  # type: ignore[union-attr]
        swapped = text.replace(line, line.replace(f"{a}, {b}", f"{b}, {a}"))
        assert compute_invariance(swapped).changed_components(original) == verdict, op
    add = ttgir("add", "cuda:80")
    line = next(ln for ln in add.splitlines() if "arith.addf" in ln)
    a, b = re.search(r"arith\.addf (%\w+), (%\w+)", line).groups()  # type: ignore[union-attr]
    swapped = add.replace(line, line.replace(f"{a}, {b}", f"{b}, {a}"))
    assert swapped != add
    assert compute_invariance(swapped).fingerprint == compute_invariance(add).fingerprint


def test_alias_names_do_not_matter_but_content_does(ttgir: TTGIR) -> None:
    text = ttgir("matmul_fp16", "cuda:80")
    aliases = sorted(set(re.findall(r"^(#[a-z_]+\d*) = ", text, flags=re.M)) - {"#loc"})
    assert any(a.startswith("#mma") for a in aliases) and any(
        a.startswith("#shared") for a in aliases
    )
    renamed = text
    for i, alias in enumerate(sorted(aliases, key=len, reverse=True)):
        renamed = re.sub(rf"{re.escape(alias)}\b", f"#zz{i}", renamed)
    assert compute_invariance(renamed) == compute_invariance(text)
    mma = re.search(r"^#mma = .*$", text, flags=re.M)
    assert mma is not None
    changed = text.replace(mma.group(), mma.group().replace("versionMinor = 0", "versionMinor = 1"))
    assert changed != text
    assert compute_invariance(text).changed_components(compute_invariance(changed)) == [
        "layout_hash"
    ]


def test_constant_change_changes_dag(ttgir: TTGIR) -> None:
    text = ttgir("softmax", "hip:gfx942")
    changed = text.replace("0xFF800000", "0xFF7FFFFF", 1)  # -inf padding -> -FLT_MAX
    assert changed != text
    assert compute_invariance(text).changed_components(compute_invariance(changed)) == [
        "computation_dag_hash"
    ]


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ('"ttg.num-ctas" = 1', '"ttg.num-ctas" = 2'),
        ('"ttg.threads-per-warp" = 32', '"ttg.threads-per-warp" = 64'),
    ],
)
def test_module_attributes_change_hw(ttgir: TTGIR, old: str, new: str) -> None:
    text = ttgir("add", "cuda:80")
    assert old in text
    assert "hw_config_hash" in compute_invariance(text).changed_components(
        compute_invariance(text.replace(old, new))
    )


# -- input errors ---------------------------------------------------------------------------------


def test_ttir_is_rejected_with_a_clear_message(triton_cache_dir: Path) -> None:
    from compile_helpers import compile_kernel

    ttir = compile_kernel(ADD.fn, ADD.signature, ADD.constexprs, "hip:gfx942").asm["ttir"]
    with pytest.raises(InvalidTTGIRError, match=r"not TTGIR"):
        compute_invariance(ttir)


def test_kernel_name_selects_and_unknown_name_lists_functions(ttgir: TTGIR) -> None:
    text = ttgir("add", "cuda:80")
    assert compute_invariance(text, kernel_name="add_kernel").kernel_name == "add_kernel"
    with pytest.raises(InvalidTTGIRError, match=r"no function 'nope'.*add_kernel"):
        compute_invariance(text, kernel_name="nope")


def test_truncated_text_names_line(ttgir: TTGIR) -> None:
    text = ttgir("add", "cuda:80")
    cut = text[: text.index("tt.return")]
    with pytest.raises(InvalidTTGIRError, match=r"line \d+"):
        compute_invariance(cut)
