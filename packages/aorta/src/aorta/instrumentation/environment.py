"""`collect_env`: a fail-soft snapshot of where a run or trial happens.

The probe never raises (only KeyboardInterrupt and SystemExit pass through). Each section
is read on its own; one that fails is left empty and adds "section: ExcType: message" to
`partial_reasons`, and the snapshot is marked `partial`. Something merely absent (torch not
installed, not a ROCm host, no GPU tool on PATH) is recorded as absent, not as partial.

What each scope collects:

=========================  ================================  ================================
section                    "host" and "environment"          "trial"
=========================  ================================  ================================
hostname, pid, python,     yes                               yes
platform, memory, env_vars
cpu                        model, logical and affinity       counts only (/proc/cpuinfo can
                           counts                            be slow on many-core hosts)
torch build                version, cuda, hip, git_version,  same
                           read without importing torch
torch runtime              TF32 / matmul precision flags,    only if torch is already
                           cuda_available, devices, current  imported: the flags always,
                           device; imports torch if needed   devices and current device only
                           for a CUDA/ROCm build, not for a  if CUDA is already initialised
                           CPU-only one (no devices there)
gpus                       torch devices, nvidia-smi,        torch devices (as above); no
                           rocm-smi (each only when on       subprocesses
                           PATH, each with a timeout)
hipblaslt / rocm version   from $ROCM_PATH, /opt/rocm*       not looked up (None)
distributions              {name: version} from              not collected (None)
                           importlib.metadata (never pip)
=========================  ================================  ================================

"host" and "environment" collect the same sections; the label records whether the snapshot
describes the machine itself or an execution environment on it (a container, a venv).

Cost, measured on a 2-core CPU-only VM with torch 2.13 (CPU build) installed: "host" about
10 ms in process (about 0.1 s for the whole `aorta env probe` command), "trial" under 1 ms
with torch imported. On a CUDA/ROCm host the first "host" probe of a process also pays
`import torch` (about 1.3 s) and CUDA initialisation; take it in the CLI or in a process
that will not fork CUDA users. The "trial" scope never initialises CUDA: a probe must not
change the process it observes, and the precision flags it records (what mitigations
change) are readable without a device.
"""

from __future__ import annotations

import os
import shutil
import socket
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from functools import partial
from typing import Protocol, TypeVar

from aorta.instrumentation import gpus as gpu_tools
from aorta.instrumentation import rocm, system, torch_probe
from aorta.instrumentation.models import (
    SCHEMA_VERSION,
    SCOPES,
    EnvSnapshot,
    GpuInfo,
    Scope,
    TorchInfo,
)
from aorta.instrumentation.redaction import redact_environ

__all__ = ["EnvSnapshot", "Scope", "collect_env"]

T = TypeVar("T")


class _Query(Protocol):
    def __call__(self, executable: str, *, timeout_s: float) -> list[GpuInfo]: ...


class _Sections:
    """Runs section readers, turning any exception into a partial reason."""

    def __init__(self) -> None:
        self.reasons: list[str] = []

    def note(self, section: str, message: str) -> None:
        self.reasons.append(f"{section}: {message}")

    def read(self, section: str, reader: Callable[[], T]) -> T | None:
        try:
            return reader()
        except Exception as exc:  # fail-soft is the contract: record and go on
            self.note(section, f"{type(exc).__name__}: {exc}")
            return None


def _utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _torch_info(scope: Scope, sections: _Sections) -> TorchInfo | None:
    build = sections.read("torch", torch_probe.read_build)
    if build is None:  # not installed (no reason recorded) or unreadable (reason recorded)
        return None
    module = torch_probe.imported_torch()
    note: str | None = None
    if module is None and scope == "trial":
        note = "torch not imported in this process; the trial scope never imports it"
    elif module is None and not build.is_gpu_build:
        note = "not imported: a CPU-only build has no devices to report"
    elif module is None:
        module = sections.read("torch.runtime", torch_probe.import_torch)
    runtime = None
    if module is not None:
        queried = sections.read(
            "torch.runtime",
            lambda: torch_probe.query_runtime(module, initialize_cuda=scope != "trial"),
        )
        if queried is not None:
            runtime, note = queried
    return TorchInfo(
        version=build.version,
        cuda=build.cuda,
        hip=build.hip,
        git_version=build.git_version,
        runtime=runtime,
        runtime_note=note,
    )


def _tool_gpus(tool: str, query: _Query, timeout_s: float) -> list[GpuInfo]:
    # PATH of this process, not of `environ`: it decides what would actually run here.
    executable = shutil.which(tool)
    return [] if executable is None else query(executable, timeout_s=timeout_s)


def _gpus(
    torch: TorchInfo | None, scope: Scope, timeout_s: float, sections: _Sections
) -> list[GpuInfo]:
    found: list[GpuInfo] = []
    if torch is not None and torch.runtime is not None:
        found.extend(sections.read("gpus", partial(gpu_tools.gpus_from_torch, torch.runtime)) or [])
    if scope == "trial":
        return found
    for tool, query in (
        (gpu_tools.NVIDIA_SMI, gpu_tools.query_nvidia_smi),
        (gpu_tools.ROCM_SMI, gpu_tools.query_rocm_smi),
    ):
        found.extend(sections.read("gpus", partial(_tool_gpus, tool, query, timeout_s)) or [])
    return found


def collect_env(
    scope: Scope = "host",
    *,
    environ: Mapping[str, str] | None = None,
    smi_timeout_s: float = 5.0,
) -> EnvSnapshot:
    """Snapshot this process's host, interpreter, torch, GPUs and environment; never raises.

    `scope` picks how much is collected (see the module docstring): "host" and
    "environment" everything, "trial" only what is cheap and proves a trial's settings.
    `environ` is the variable mapping to record (redacted) and to read `ROCM_PATH` from;
    `os.environ` when None. `smi_timeout_s` bounds each nvidia-smi / rocm-smi run.
    """
    start = time.perf_counter()
    collected_at = _utc_now()
    sections = _Sections()
    if scope not in SCOPES:  # a typo from an untyped caller: say so, but still probe
        sections.note("scope", f"ValueError: unknown scope {scope!r}, collected as 'host'")
        scope = "host"
    env: Mapping[str, str] = os.environ if environ is None else environ
    cheap = scope == "trial"

    torch = _torch_info(scope, sections)
    rocm_versions = (
        None if cheap else sections.read("hipblaslt", partial(rocm.find_rocm_versions, env))
    )
    distributions: dict[str, str] | None = None
    if not cheap:
        listing = sections.read("distributions", system.installed_distributions)
        if listing is not None:
            distributions, problems = listing
            for problem in problems:
                sections.note("distributions", problem)

    hostname = sections.read("hostname", socket.gethostname)
    python = sections.read("python", system.python_info)
    platform = sections.read("platform", system.platform_info)
    cpu = sections.read("cpu", partial(system.cpu_info, read_model=not cheap))
    memory = sections.read("memory", system.memory_info)
    env_vars = sections.read("env_vars", partial(redact_environ, env))
    found_gpus = _gpus(torch, scope, smi_timeout_s, sections)
    return EnvSnapshot(
        schema_version=SCHEMA_VERSION,
        scope=scope,
        collected_at=collected_at,
        duration_ms=round((time.perf_counter() - start) * 1000.0, 3),
        hostname=hostname,
        pid=os.getpid(),
        python=python,
        platform=platform,
        cpu=cpu,
        memory=memory,
        torch=torch,
        gpus=tuple(found_gpus),
        hipblaslt_version=rocm_versions.hipblaslt if rocm_versions else None,
        rocm_version=rocm_versions.rocm if rocm_versions else None,
        distributions=distributions,
        env_vars=env_vars if env_vars is not None else {},
        partial=bool(sections.reasons),
        partial_reasons=tuple(sections.reasons),
    )
