"""Which variables a recipe read back from a run directory may set without `--trust-environments`.

An allowlist, not a denylist: far more variables make a process load or run a file of the
value's choosing than any list of them can name (`PYTHONPYCACHEPREFIX`, `CC`/`CXX` for
Inductor, `TRITON_PTXAS_PATH`, `CUDA_INJECTION64_PATH`, `NCCL_NET_PLUGIN`, `GCONV_PATH`,
`PYTHONWARNINGS`, `SHELLOPTS`/`PS4`, `OMP_TOOL_LIBRARIES`, ...). A read-back variable passes
only if

(a) a mitigation or environment of this machine's registry sets it to the same value, or
(b) its name is in `READBACK_ALLOWLIST` and its value is a plain setting: letters, digits and
    `_ . , : = + -`, no `/`, so it cannot name a file or a directory to load from.

Everything else is listed by `trust.untrusted_actions` and needs the flag.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

__all__ = ["READBACK_ALLOWLIST", "is_vouched_variable"]

# Device selection, thread counts and numerics switches: the settings a triage varies by hand.
# None of them is read as a path by the libraries that read them.
READBACK_ALLOWLIST = frozenset(
    {
        "CUDA_VISIBLE_DEVICES",
        "HIP_VISIBLE_DEVICES",
        "ROCR_VISIBLE_DEVICES",
        "OMP_NUM_THREADS",
        "MKL_NUM_THREADS",
        "NVIDIA_TF32_OVERRIDE",
        "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE",
        "CUBLAS_WORKSPACE_CONFIG",
        "HSA_XNACK",
        "PYTORCH_CUDA_ALLOC_CONF",
        "PYTORCH_HIP_ALLOC_CONF",
        "CUDA_LAUNCH_BLOCKING",
        "NCCL_DEBUG",
        "NCCL_ALGO",
        "NCCL_PROTO",
        "TORCH_DETERMINISTIC",
    }
)

_PLAIN_SETTING = re.compile(r"[A-Za-z0-9_.,:=+\-]{0,256}")


def is_vouched_variable(
    name: str, value: str, registered_bundles: Iterable[Mapping[str, str]]
) -> bool:
    """Whether `name=value`, read back from a run directory, may be set without trust."""
    if any(bundle.get(name) == value for bundle in registered_bundles):
        return True
    return name in READBACK_ALLOWLIST and _PLAIN_SETTING.fullmatch(value) is not None
