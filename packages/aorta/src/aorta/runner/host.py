"""Where a trial ran: node, SLURM job, CPU and GPU models (`TrialHost`, in every trial record).

A step-time ratio compares two cells' speeds; it means something only when both ran on the
same hardware. Once a matrix is spread over a cluster, each trial must say where it ran, so
that the matrix can warn when cells ran on different CPU or GPU models and break step times
down per node (`aorta.triage.analysis.hardware`).

Collected cheaply: the node name and CPU model once per process (`/proc/cpuinfo` can be slow
on many-core hosts), the SLURM ids from the trial's environment on each call. GPU models come
from a torch that this process has already imported and whose CUDA is already initialised
(`torch_probe.query_runtime(initialize_cuda=False)`): recording where a trial ran must never
import torch into a CLI command nor initialise CUDA in a process that later forks. A command
workload's driver never imports torch, so there the vendor tools (nvidia-smi, rocm-smi) are
asked instead, once per process with a timeout. `gpu_models` None means "not known here",
which is not the same as `()`, "no GPU seen".
"""

from __future__ import annotations

import functools
import os
import platform
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# The docker launcher passes the host's node name in: inside a container the hostname is the
# container's id, which would make every trial look like it ran on its own node.
NODE_VARIABLE = "AORTA_NODE"
# Field -> the variable SLURM sets in a job step's environment.
SLURM_VARIABLES = {
    "slurm_job_id": "SLURM_JOB_ID",
    "slurm_array_job_id": "SLURM_ARRAY_JOB_ID",
    "slurm_array_task_id": "SLURM_ARRAY_TASK_ID",
}
_MAX_TEXT = 256  # a hostname is at most 64, a CPU model name well under 100 characters
_MAX_GPUS = 1024
_SMI_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class TrialHost:
    """The machine a trial ran on, as recorded in `trial_<id>.json` under `host`.

    `gpu_models` lists one model name per device (None: not known in the process that wrote
    the record, `()`: none seen). The SLURM ids are None outside a SLURM job.
    """

    node: str
    cpu_model: str | None
    gpu_models: tuple[str, ...] | None = None
    slurm_job_id: str | None = None
    slurm_array_job_id: str | None = None
    slurm_array_task_id: str | None = None

    @property
    def gpu_count(self) -> int | None:
        """How many GPUs were seen; None when not known."""
        return None if self.gpu_models is None else len(self.gpu_models)

    @property
    def hardware(self) -> tuple[str | None, tuple[str, ...] | None]:
        """What makes two machines time alike: CPU model and GPU models (not the node name)."""
        return self.cpu_model, self.gpu_models

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (`gpu_count` is written for readers; it is derived on reading)."""
        return {
            "node": self.node,
            "cpu_model": self.cpu_model,
            "gpu_models": None if self.gpu_models is None else list(self.gpu_models),
            "gpu_count": self.gpu_count,
            **{name: getattr(self, name) for name in SLURM_VARIABLES},
        }

    @classmethod
    def from_dict(cls, data: object) -> TrialHost:
        """Rebuild a record read back from a run directory (untrusted: every field is checked).

        Raises `ValueError` naming the key (`host.<field>`) and what was expected.
        """
        if not isinstance(data, Mapping):
            raise ValueError(f"host: expected a mapping, got {type(data).__name__}")
        known = {"node", "cpu_model", "gpu_models", "gpu_count", *SLURM_VARIABLES}
        unknown = sorted(str(key) for key in data if key not in known)
        if unknown:
            raise ValueError(f"host: unknown key(s) {', '.join(unknown)[:200]}")
        models = data.get("gpu_models")
        if models is not None:
            if not isinstance(models, list) or len(models) > _MAX_GPUS:
                raise ValueError(
                    f"host.gpu_models: expected a list of at most {_MAX_GPUS} names or null"
                )
            models = tuple(_text(m, "host.gpu_models[]") for m in models)
        host = cls(
            node=_text(data.get("node"), "host.node"),
            cpu_model=_optional_text(data.get("cpu_model"), "host.cpu_model"),
            gpu_models=models,
            **{name: _optional_text(data.get(name), f"host.{name}") for name in SLURM_VARIABLES},
        )
        count = data.get("gpu_count", host.gpu_count)
        if count != host.gpu_count or isinstance(count, bool):
            raise ValueError(
                f"host.gpu_count: expected {host.gpu_count} (the length of gpu_models), "
                f"got {count!r:.40}"
            )
        return host


def _text(value: object, key: str) -> str:
    # Printed into matrix.md and the terminal: one printable line, bounded.
    if not isinstance(value, str) or not value or len(value) > _MAX_TEXT:
        raise ValueError(f"{key}: expected a non-empty string of at most {_MAX_TEXT} characters")
    if not value.isprintable():
        raise ValueError(f"{key}: expected printable text, got {value!r:.80}")
    return value


def _optional_text(value: object, key: str) -> str | None:
    return None if value is None else _text(value, key)


def collect_host(
    environ: Mapping[str, str] | None = None, *, ask_gpu_tools: bool = False
) -> TrialHost:
    """Where this process runs, with the SLURM ids of `environ` (default `os.environ`).

    Never raises: a part that cannot be read is None. `ask_gpu_tools` lets the vendor tools
    answer for the GPUs when no initialised torch in this process can (command workloads).
    """
    env: Mapping[str, str] = os.environ if environ is None else environ
    node, cpu_model = _machine()
    gpus = _torch_gpus()
    if gpus is None and ask_gpu_tools:
        gpus = _tool_gpus()
    return TrialHost(
        node=_clean(env.get(NODE_VARIABLE)) or node,
        cpu_model=cpu_model,
        gpu_models=gpus,
        **{name: _clean(env.get(variable)) for name, variable in SLURM_VARIABLES.items()},
    )


def identity_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables that carry this host's identity into a container (node, SLURM ids)."""
    env: Mapping[str, str] = os.environ if environ is None else environ
    found = {NODE_VARIABLE: _clean(env.get(NODE_VARIABLE)) or _machine()[0]}
    found.update({v: env[v] for v in SLURM_VARIABLES.values() if _clean(env.get(v))})
    return found


def _clean(value: str | None) -> str | None:
    """`value` when it is a valid record field, else None (the record must read back)."""
    if value is None:
        return None
    try:
        return _text(value, "")
    except ValueError:
        return None


@functools.cache
def _machine() -> tuple[str, str | None]:
    """(node name, CPU model), read once per process."""
    node = _clean(socket.gethostname()) or "unknown"
    return node, _clean(_cpu_model())


def _cpu_model() -> str | None:
    from aorta.instrumentation import system

    try:
        model = system.cpu_info(read_model=True).model
    except (OSError, ValueError):
        model = None
    # Not Linux, or an architecture whose /proc/cpuinfo names no model.
    return model or platform.processor() or platform.machine() or None


_torch_seen: list[tuple[str, ...]] = []  # the first answer an initialised torch gave


def _torch_gpus() -> tuple[str, ...] | None:
    """Device names from an already imported, already initialised torch; None otherwise."""
    if _torch_seen:
        return _torch_seen[0]
    from aorta.instrumentation import torch_probe

    module = torch_probe.imported_torch()
    if module is None:
        return None
    try:
        runtime, _ = torch_probe.query_runtime(module, initialize_cuda=False)
    except Exception:  # a broken torch must not lose the trial record; GPUs stay unknown
        return None
    if runtime.device_count is None:  # CUDA not initialised: asking would initialise it
        return None
    _torch_seen.append(tuple(_clean(d.name) or "unnamed" for d in runtime.devices))
    return _torch_seen[0]


@functools.cache
def _tool_gpus() -> tuple[str, ...] | None:
    """Device names from nvidia-smi or rocm-smi, once per process; None when neither answers."""
    import shutil

    from aorta.instrumentation import gpus

    for tool, query in (
        (gpus.NVIDIA_SMI, gpus.query_nvidia_smi),
        (gpus.ROCM_SMI, gpus.query_rocm_smi),
    ):
        executable = shutil.which(tool)
        if executable is None:
            continue
        try:
            found = query(executable, timeout_s=_SMI_TIMEOUT_S)
        except gpus.GpuToolError:
            continue
        return tuple(_clean(g.name) or "unnamed" for g in found)
    return None
