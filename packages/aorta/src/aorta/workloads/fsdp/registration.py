"""Entry-point objects of the fsdp workload and its workload-coupled mitigations.

This module is loaded by the registry (e.g. for `aorta triage --list-workloads`) and must stay
cheap: torch is imported only when a trial actually runs.
"""

from __future__ import annotations

from collections.abc import Mapping

from aorta.registry.models import Mitigation, Workload
from aorta.workloads.contract import TrialContext, WorkloadOutcome


def _run_trial(ctx: TrialContext) -> WorkloadOutcome:
    from aorta.workloads.fsdp.train import run_trial

    return run_trial(ctx)


def _validate(environ: Mapping[str, str]) -> None:
    from aorta.workloads.fsdp.config import FsdpConfig

    FsdpConfig.from_environ(environ)


WORKLOAD = Workload(
    name="fsdp",
    entry=_run_trial,
    validate=_validate,
    description=(
        "PyTorch FSDP2 (fully_shard) training of a small transformer LM on deterministic "
        "synthetic data; gloo on CPU, nccl/rccl on GPU. Parameters: AORTA_FSDP_* env vars."
    ),
)

# Workload-coupled mitigations: they act through variables only this workload reads.
GRAD_CLIP = Mitigation(
    name="fsdp_grad_clip",
    env={"AORTA_FSDP_GRAD_CLIP": "1.0"},
    description="fsdp workload: clip the global gradient norm to 1.0 (AORTA_FSDP_GRAD_CLIP).",
)

# Cures the divergent preset too, but by doing more work: two updates of half the learning rate
# per step (each with a freshly computed gradient) stay below the edge of stability where one
# full-size update does not, and every step costs two forward/backward passes. The demo
# matrix uses it to show the speed confound flag on a cure that is real but not free.
SUBSTEPS = Mitigation(
    name="fsdp_substeps",
    env={"AORTA_FSDP_SUBSTEPS": "2"},
    description="fsdp workload: two half-size updates per step on the same batch "
    "(AORTA_FSDP_SUBSTEPS); about twice the compute per step.",
)

AMP_BF16 = Mitigation(
    name="fsdp_amp_bf16",
    env={"AORTA_FSDP_AMP_DTYPE": "bfloat16"},
    description="fsdp workload: autocast forward to bfloat16 (AORTA_FSDP_AMP_DTYPE).",
)
