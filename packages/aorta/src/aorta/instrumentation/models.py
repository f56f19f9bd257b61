"""The records an environment probe produces: frozen dataclasses with a JSON round trip.

`EnvSnapshot.to_dict()` gives plain JSON values only (str, int, finite float, bool, None,
lists, dicts), so `json.dumps(snapshot.to_dict(), allow_nan=False)` always works and
`EnvSnapshot.from_dict()` rebuilds an equal snapshot from it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, cast, get_args

Scope = Literal["host", "environment", "trial"]
GpuSource = Literal["torch", "nvidia-smi", "rocm-smi"]

SCOPES: tuple[Scope, ...] = get_args(Scope)
GPU_SOURCES: tuple[GpuSource, ...] = get_args(GpuSource)

RecordT = TypeVar("RecordT")

# Bump when a field changes meaning or disappears; adding optional fields is not a bump.
SCHEMA_VERSION = 1


@dataclass(frozen=True)
class PythonInfo:
    """The running interpreter."""

    version: str
    implementation: str
    executable: str

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PythonInfo:
        """Rebuild from `dataclasses.asdict` output."""
        return _flat(cls, data)


@dataclass(frozen=True)
class PlatformInfo:
    """Operating system and C library; `libc` is e.g. "glibc 2.36", None where unknown."""

    system: str
    release: str
    machine: str
    libc: str | None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PlatformInfo:
        """Rebuild from `dataclasses.asdict` output."""
        return _flat(cls, data)


@dataclass(frozen=True)
class CpuInfo:
    """CPU model (None where /proc/cpuinfo names none), logical CPUs, CPUs this process may use."""

    model: str | None
    logical_count: int | None
    affinity_count: int | None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CpuInfo:
        """Rebuild from `dataclasses.asdict` output."""
        return _flat(cls, data)


@dataclass(frozen=True)
class MemoryInfo:
    """Physical memory in bytes; `available_bytes` is None where the OS does not say."""

    total_bytes: int
    available_bytes: int | None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MemoryInfo:
        """Rebuild from `dataclasses.asdict` output."""
        return _flat(cls, data)


@dataclass(frozen=True)
class TorchDevice:
    """One device as torch sees it. `capability` is "major.minor" (CUDA and ROCm)."""

    index: int
    name: str
    total_memory_bytes: int
    capability: str | None
    gcn_arch_name: str | None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TorchDevice:
        """Rebuild from `dataclasses.asdict` output."""
        return _flat(cls, data)


@dataclass(frozen=True)
class TorchRuntime:
    """What the imported torch reports in this process.

    `cuda_available`, `device_count` and `current_device` are None when they were not
    queried because querying would have initialised CUDA (see `TorchInfo.runtime_note`).
    The precision flags are the ones mitigations flip: reading them here proves a mitigation
    took effect inside the trial. `*_fp32_precision` are None on torch versions without them.
    """

    cuda_available: bool | None
    device_count: int | None
    current_device: int | None
    devices: tuple[TorchDevice, ...]
    matmul_allow_tf32: bool | None
    cudnn_allow_tf32: bool | None
    float32_matmul_precision: str | None
    matmul_fp32_precision: str | None
    cudnn_fp32_precision: str | None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TorchRuntime:
        """Rebuild from `dataclasses.asdict` output."""
        return cls(
            cuda_available=data["cuda_available"],
            device_count=data["device_count"],
            current_device=data["current_device"],
            devices=tuple(TorchDevice.from_dict(d) for d in data["devices"]),
            matmul_allow_tf32=data["matmul_allow_tf32"],
            cudnn_allow_tf32=data["cudnn_allow_tf32"],
            float32_matmul_precision=data["float32_matmul_precision"],
            matmul_fp32_precision=data["matmul_fp32_precision"],
            cudnn_fp32_precision=data["cudnn_fp32_precision"],
        )


@dataclass(frozen=True)
class TorchInfo:
    """The installed torch: build (read without importing torch) and, where queried, runtime.

    `cuda` is `torch.version.cuda`, `hip` is `torch.version.hip` (both None on a CPU-only
    build). `runtime` is None when torch was not queried; `runtime_note` then says why. A
    note can also accompany a runtime whose device fields were deliberately left unqueried.
    """

    version: str
    cuda: str | None
    hip: str | None
    git_version: str | None
    runtime: TorchRuntime | None
    runtime_note: str | None

    @property
    def is_gpu_build(self) -> bool:
        """True for a CUDA or ROCm build of torch."""
        return self.cuda is not None or self.hip is not None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TorchInfo:
        """Rebuild from `dataclasses.asdict` output."""
        runtime = data["runtime"]
        return cls(
            version=data["version"],
            cuda=data["cuda"],
            hip=data["hip"],
            git_version=data["git_version"],
            runtime=None if runtime is None else TorchRuntime.from_dict(runtime),
            runtime_note=data["runtime_note"],
        )


@dataclass(frozen=True)
class GpuInfo:
    """One GPU as one source reports it; the same GPU appears once per source.

    `arch` is the gcnArch name on ROCm ("gfx942") and "sm_XY" on CUDA, where known.
    """

    source: GpuSource
    index: int
    name: str
    memory_total_bytes: int | None
    driver_version: str | None
    arch: str | None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GpuInfo:
        """Rebuild from `dataclasses.asdict` output."""
        source = data["source"]
        if source not in GPU_SOURCES:
            raise ValueError(f"unknown GPU source {source!r}")
        return cls(
            source=cast(GpuSource, source),
            index=data["index"],
            name=data["name"],
            memory_total_bytes=data["memory_total_bytes"],
            driver_version=data["driver_version"],
            arch=data["arch"],
        )


@dataclass(frozen=True)
class EnvSnapshot:
    """Where a run happened: host, interpreter, torch, GPUs, packages, environment variables.

    A section that could not be read is None (or empty) and has a line in
    `partial_reasons` ("section: ExcType: message"); `partial` is True exactly when there is
    one. Something that is simply absent (no torch installed, not a ROCm machine, no GPU
    tools on PATH) is not partial. `distributions` is None in the "trial" scope, which does
    not collect it. `env_vars` values are already redacted (see `aorta.instrumentation.redaction`).
    """

    schema_version: int
    scope: Scope
    collected_at: str
    duration_ms: float
    hostname: str | None
    pid: int
    python: PythonInfo | None
    platform: PlatformInfo | None
    cpu: CpuInfo | None
    memory: MemoryInfo | None
    torch: TorchInfo | None
    gpus: tuple[GpuInfo, ...]
    hipblaslt_version: str | None
    rocm_version: str | None
    distributions: dict[str, str] | None
    env_vars: dict[str, str]
    partial: bool
    partial_reasons: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON values (tuples become lists); strict JSON, no NaN or infinity."""
        return cast(dict[str, Any], _lists(dataclasses.asdict(self)))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EnvSnapshot:
        """Rebuild a snapshot from `to_dict()` output (also after a JSON round trip).

        Raises ValueError for another schema version or an unknown scope, KeyError for a
        missing field.
        """
        version = data["schema_version"]
        if version != SCHEMA_VERSION:
            raise ValueError(f"unsupported env snapshot schema_version {version!r}")
        scope = data["scope"]
        if scope not in SCOPES:
            raise ValueError(f"unknown env snapshot scope {scope!r}")

        def opt(key: str, build: Any) -> Any:
            value = data[key]
            return None if value is None else build(value)

        distributions = data["distributions"]
        return cls(
            schema_version=version,
            scope=cast(Scope, scope),
            collected_at=data["collected_at"],
            duration_ms=float(data["duration_ms"]),
            hostname=data["hostname"],
            pid=data["pid"],
            python=opt("python", PythonInfo.from_dict),
            platform=opt("platform", PlatformInfo.from_dict),
            cpu=opt("cpu", CpuInfo.from_dict),
            memory=opt("memory", MemoryInfo.from_dict),
            torch=opt("torch", TorchInfo.from_dict),
            gpus=tuple(GpuInfo.from_dict(g) for g in data["gpus"]),
            hipblaslt_version=data["hipblaslt_version"],
            rocm_version=data["rocm_version"],
            distributions=None if distributions is None else dict(distributions),
            env_vars=dict(data["env_vars"]),
            partial=bool(data["partial"]),
            partial_reasons=tuple(data["partial_reasons"]),
        )


def _flat(cls: type[RecordT], data: Mapping[str, Any]) -> RecordT:
    """Build a record whose fields are all plain JSON values; KeyError names a missing field."""
    names = [field.name for field in dataclasses.fields(cls)]  # type: ignore[arg-type]
    return cls(**{name: data[name] for name in names})


def _lists(value: object) -> object:
    """Turn every tuple into a list so that `to_dict()` equals its own JSON round trip."""
    if isinstance(value, dict):
        return {key: _lists(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_lists(item) for item in value]
    return value
