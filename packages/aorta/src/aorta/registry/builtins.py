"""The runtime-level mitigations and the environment that ship with aorta itself.

Every variable below is read by a real library; the comment next to it names which one. A
mitigation whose variable nothing reads would silently measure the baseline twice.
"""

from __future__ import annotations

from aorta.registry.models import Environment, Mitigation

BUILTIN_MITIGATIONS: tuple[Mitigation, ...] = (
    Mitigation(
        name="none",
        env={},
        description="Baseline: no environment change.",
    ),
    Mitigation(
        name="tf32_off",
        env={
            # cuBLAS and cuDNN read NVIDIA_TF32_OVERRIDE when they initialise; "0" disables
            # TF32 tensor-core math globally, overriding PyTorch's allow_tf32 flags
            # (NVIDIA cuBLAS / cuDNN documentation, "NVIDIA_TF32_OVERRIDE").
            "NVIDIA_TF32_OVERRIDE": "0",
            # PyTorch's ROCm build allows TF32 (xf32) in hipBLASLt only when this is "1"
            # (aten/src/ATen/Context.cpp, Context::allowTF32CuBLAS under USE_ROCM).
            "HIPBLASLT_ALLOW_TF32": "0",
        },
        description=(
            "Disable TF32 matmul/conv math: NVIDIA_TF32_OVERRIDE=0 (cuBLAS/cuDNN), "
            "HIPBLASLT_ALLOW_TF32=0 (PyTorch ROCm). Read at library start: runs in a fresh process."
        ),
        process_scoped=True,
    ),
    Mitigation(
        name="xnack",
        env={
            # The ROCm runtime (ROCr) reads HSA_XNACK at initialisation; "1" enables XNACK
            # (GPU page-fault retry) on GPUs that support it (ROCm docs, "HSA_XNACK").
            "HSA_XNACK": "1",
        },
        description=(
            "Enable XNACK page-fault retry on AMD GPUs: HSA_XNACK=1 (ROCr runtime). "
            "Read at runtime start: runs in a fresh process."
        ),
        process_scoped=True,
    ),
    Mitigation(
        name="triton_fp32_ieee",
        env={
            # Triton's `knobs.language.fp32_default` reads TRITON_F32_DEFAULT
            # (triton/knobs.py, class language_knobs); `tl.dot` uses it as the default
            # input_precision of float32 operands (triton/language/core.py, `dot`), where the
            # default would otherwise be "tf32" on GPUs that support it. Read when a kernel is
            # compiled, and compiled kernels are cached per process: fresh process.
            "TRITON_F32_DEFAULT": "ieee",
        },
        description=(
            "Full-precision float32 tl.dot in Triton kernels: TRITON_F32_DEFAULT=ieee "
            "(triton/knobs.py, language_knobs.fp32_default; default tf32 where supported). "
            "Read at kernel compilation, kernels are cached per process: runs in a fresh process."
        ),
        process_scoped=True,
    ),
    Mitigation(
        name="triton_no_fp_fusion",
        env={
            # Triton's `knobs.language.force_disable_fp_fusion` reads
            # TRITON_FORCE_DISABLE_FP_FUSION (triton/knobs.py, class language_knobs):
            # `fp_fusion_enabled` then returns False whatever a kernel asks for, so no
            # multiply-add is fused into an FMA (a different rounding).
            "TRITON_FORCE_DISABLE_FP_FUSION": "1",
            # Triton 3.6 and older have no force knob (seen: 3.6.0's knobs.py): there
            # `default_fp_fusion` (TRITON_DEFAULT_FP_FUSION) is the only switch, and it reaches
            # only kernels that do not ask for fusion themselves. Inductor's kernels do ask
            # (`enable_fp_fusion` in their compile options), so on those versions they keep
            # their FMAs, and a run with kernel fingerprints says "no observable effect".
            "TRITON_DEFAULT_FP_FUSION": "0",
        },
        description=(
            "No FMA fusion in Triton kernels: TRITON_FORCE_DISABLE_FP_FUSION=1 "
            "(triton/knobs.py, language_knobs.force_disable_fp_fusion) and "
            "TRITON_DEFAULT_FP_FUSION=0 (Triton without the force knob, 3.6 and older: only "
            "kernels that do not request fusion, so not Inductor's). Read at kernel "
            "compilation, kernels are cached per process: runs in a fresh process."
        ),
        process_scoped=True,
    ),
)

BUILTIN_ENVIRONMENTS: tuple[Environment, ...] = (
    Environment(
        name="local",
        kind="local",
        description="This Python interpreter, in-process.",
    ),
)
