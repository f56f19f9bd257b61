"""The compile-options component: numerics decided after TTGIR (issue 15, section 1)."""

# Triton style: constexpr block sizes are upper case.
# ruff: noqa: N803

from __future__ import annotations

from pathlib import Path

import pytest
import triton
import triton.language as tl
from compile_helpers import compile_kernel

from triton_invariance.data import InvarianceData
from triton_invariance.fingerprint import compute_invariance
from triton_invariance.options import knob_environment, numerics_options


@triton.jit
def fma_kernel(x_ptr, y_ptr, z_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    z = tl.load(z_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x * y + z, mask=mask)


SIGNATURE = {"x_ptr": "*fp32", "y_ptr": "*fp32", "z_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}
SIGNATURE["BLOCK"] = "constexpr"
# The instruction a contracted x * y + z becomes in each target's assembly.
FMA = {"cuda:80": ("ptx", "fma.rn.f32"), "hip:gfx942": ("amdgcn", "v_fma")}


def _fingerprint(kernel: object) -> InvarianceData:
    return compute_invariance(
        kernel.asm["ttgir"],  # type: ignore[attr-defined]
        metadata=kernel.metadata._asdict(),  # type: ignore[attr-defined]
    )


@pytest.mark.parametrize("target", sorted(FMA))
def test_fp_fusion_off_changes_only_the_compile_options_component(
    triton_cache_dir: Path, target: str
) -> None:
    on = compile_kernel(fma_kernel, SIGNATURE, {"BLOCK": 256}, target, enable_fp_fusion=True)
    off = compile_kernel(fma_kernel, SIGNATURE, {"BLOCK": 256}, target, enable_fp_fusion=False)
    # The blind spot: the TTGIR is the same, the machine code is not.
    assert on.asm["ttgir"] == off.asm["ttgir"]
    asm, fma = FMA[target]
    assert fma in on.asm[asm] and fma not in off.asm[asm]
    before, after = _fingerprint(on), _fingerprint(off)
    assert before.fingerprint != after.fingerprint
    assert before.changed_components(after) == ["compile_options_hash"]
    report = before.diff_report(after)
    assert "changed: compile_options_hash" in report
    assert "compile_options_hash: enable_fp_fusion: true -> false" in report
    # TTGIR alone cannot see it: the component exists only with the metadata.
    assert compute_invariance(on.asm["ttgir"]) == compute_invariance(off.asm["ttgir"])


@pytest.mark.skipif(
    not hasattr(triton.knobs.language, "force_disable_fp_fusion"),
    reason="this Triton has no TRITON_FORCE_DISABLE_FP_FUSION knob "
    "(knobs.language.force_disable_fp_fusion; Triton 3.6 has only TRITON_DEFAULT_FP_FUSION)",
)
def test_force_disable_knob_is_named_in_the_report(
    triton_cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRITON_DEFAULT_FP_FUSION", "1")
    before = _fingerprint(compile_kernel(fma_kernel, SIGNATURE, {"BLOCK": 128}, "cuda:80"))
    monkeypatch.setenv("TRITON_FORCE_DISABLE_FP_FUSION", "1")
    after = _fingerprint(compile_kernel(fma_kernel, SIGNATURE, {"BLOCK": 128}, "cuda:80"))
    assert before.changed_components(after) == ["compile_options_hash"]
    report = before.diff_report(after)
    assert "enable_fp_fusion: true -> false" in report
    assert (
        "environment knobs: baseline TRITON_DEFAULT_FP_FUSION=1, now "
        "TRITON_DEFAULT_FP_FUSION=1, TRITON_FORCE_DISABLE_FP_FUSION=1" in report
    )


def test_a_knob_set_to_the_default_changes_nothing(
    triton_cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TRITON_DEFAULT_FP_FUSION", raising=False)
    unset = _fingerprint(compile_kernel(fma_kernel, SIGNATURE, {"BLOCK": 64}, "cuda:80"))
    monkeypatch.setenv("TRITON_DEFAULT_FP_FUSION", "1")  # Triton 3.9's default anyway
    explicit = _fingerprint(compile_kernel(fma_kernel, SIGNATURE, {"BLOCK": 64}, "cuda:80"))
    assert unset.matches(explicit) and unset.fingerprint == explicit.fingerprint
    assert explicit.compile_env == (("TRITON_DEFAULT_FP_FUSION", "1"),)


def test_recorded_options_for_cuda_and_hip(ttgir: object, triton_cache_dir: Path) -> None:
    cuda = compile_kernel(fma_kernel, SIGNATURE, {"BLOCK": 256}, "cuda:80")
    hip = compile_kernel(fma_kernel, SIGNATURE, {"BLOCK": 256}, "hip:gfx942")
    cuda_opts = dict(numerics_options(cuda.metadata._asdict()))
    hip_opts = dict(numerics_options(hip.metadata._asdict()))
    assert cuda_opts["default_dot_input_precision"] == '"tf32"'
    assert hip_opts["default_dot_input_precision"] == '"ieee"'
    assert cuda_opts["max_num_imprecise_acc_default"] == hip_opts["max_num_imprecise_acc_default"]
    assert cuda_opts["extern_libs"].startswith('["libdevice=libdevice.10.bc@')
    assert hip_opts["extern_libs"].startswith('["ocml=ocml.bc@')
    assert "enable_reflect_ftz" in cuda_opts and "allow_flush_denorm" in hip_opts


def test_math_library_is_identified_by_content_not_path(tmp_path: Path) -> None:
    for name, content in (("a", b"lib-one"), ("b", b"lib-one"), ("c", b"lib-two")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "libdevice.10.bc").write_bytes(content)

    def libs(directory: str) -> str:
        path = str(tmp_path / directory / "libdevice.10.bc")
        return dict(numerics_options({"extern_libs": [["libdevice", path]]}))["extern_libs"]

    assert libs("a") == libs("b") != libs("c")
    missing = numerics_options({"extern_libs": [["libdevice", str(tmp_path / "gone.bc")]]})
    assert missing == (("extern_libs", '["libdevice=gone.bc@unreadable"]'),)


def test_knob_environment_lists_only_set_knobs() -> None:
    env = {"TRITON_F32_DEFAULT": "ieee", "PATH": "/bin", "TRITON_FORCE_DISABLE_FP_FUSION": "1"}
    assert knob_environment(env) == (
        ("TRITON_FORCE_DISABLE_FP_FUSION", "1"),
        ("TRITON_F32_DEFAULT", "ieee"),
    )
