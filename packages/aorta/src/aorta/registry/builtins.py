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
)

BUILTIN_ENVIRONMENTS: tuple[Environment, ...] = (
    Environment(
        name="local",
        kind="local",
        description="This Python interpreter, in-process.",
    ),
)
