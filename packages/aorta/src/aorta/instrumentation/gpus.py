"""GPU listings from the vendor command-line tools, nvidia-smi and rocm-smi.

A tool is run only when its executable is on PATH, always with a timeout: nvidia-smi is
known to hang on a wedged GPU, and a probe must never hang a run. Timeout, nonzero exit or
output that does not parse raise `GpuToolError`, whose message names the tool.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
from collections.abc import Mapping, Sequence
from typing import Any

from aorta.instrumentation.models import GpuInfo, TorchRuntime

NVIDIA_SMI = "nvidia-smi"
ROCM_SMI = "rocm-smi"

NVIDIA_SMI_ARGS: tuple[str, ...] = (
    "--query-gpu=index,name,memory.total,driver_version",
    "--format=csv,noheader,nounits",
)
ROCM_SMI_ARGS: tuple[str, ...] = (
    "--showproductname",
    "--showmeminfo",
    "vram",
    "--showdriverversion",
    "--json",
)

# After the timeout the tool is killed; a process stuck in the kernel (uninterruptible
# sleep) cannot die, so the reaping wait is bounded too and such a process is abandoned.
_REAP_TIMEOUT_S = 1.0
_ERROR_TAIL_CHARS = 200
_MIB = 1024 * 1024


class GpuToolError(RuntimeError):
    """A GPU tool timed out, failed or printed something unparsable; the message names it."""


def run_tool(tool: str, argv: Sequence[str], *, timeout_s: float) -> str:
    """Run `argv`, return its stdout; raise `GpuToolError` naming `tool` on any failure."""
    try:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            # Own process group, so that the kill below also reaches any children that hold
            # the output pipes open (a wrapper script, say).
            start_new_session=True,
        )
    except OSError as exc:
        raise GpuToolError(f"{tool} could not be started: {exc}") from exc
    try:
        stdout, stderr = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill(proc)
        raise GpuToolError(f"{tool} timed out after {timeout_s:g} s") from None
    except BaseException:
        # Ctrl-C does not reach the tool (it runs in its own session): end it here.
        _kill(proc)
        raise
    if proc.returncode != 0:
        tail = (stderr.strip() or stdout.strip())[-_ERROR_TAIL_CHARS:]
        raise GpuToolError(f"{tool} exited with code {proc.returncode}: {tail}")
    return stdout


def _kill(proc: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.communicate(timeout=_REAP_TIMEOUT_S)


def parse_nvidia_smi(text: str) -> list[GpuInfo]:
    """Parse `nvidia-smi --query-gpu=index,name,memory.total,driver_version` CSV output."""
    gpus: list[GpuInfo] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        # Split index off the left and memory/driver off the right, so that a comma inside
        # a product name cannot shift the columns.
        index, sep, rest = line.partition(",")
        fields = rest.rsplit(",", 2)
        if not sep or len(fields) != 3 or not index.strip().isdigit():
            raise GpuToolError(f"{NVIDIA_SMI} printed an unexpected line: {line[:100]!r}")
        name, memory, driver = (field.strip() for field in fields)
        gpus.append(
            GpuInfo(
                source="nvidia-smi",
                index=int(index),
                name=name,
                memory_total_bytes=int(memory) * _MIB if memory.isdigit() else None,
                driver_version=driver if driver and not driver.startswith("[") else None,
                arch=None,
            )
        )
    return gpus


def _field(card: Mapping[str, Any], *names: str) -> str | None:
    """The first of `names` in `card`, compared case-insensitively (rocm-smi versions differ)."""
    lowered = {str(key).lower(): value for key, value in card.items()}
    for name in names:
        value = lowered.get(name.lower())
        if value not in (None, "", "N/A"):
            return str(value)
    return None


def parse_rocm_smi(text: str) -> list[GpuInfo]:
    """Parse `rocm-smi --showproductname --showmeminfo vram --showdriverversion --json`."""
    # Some rocm-smi versions print warnings before the JSON document.
    start = text.find("{")
    try:
        if start < 0:
            raise ValueError("no JSON object in output")
        document, _ = json.JSONDecoder().raw_decode(text, start)
        if not isinstance(document, dict):
            raise ValueError("JSON output is not an object")
    except ValueError as exc:
        raise GpuToolError(f"{ROCM_SMI} printed unparsable output: {exc}") from None
    system = document.get("system")
    driver = _field(system, "Driver version") if isinstance(system, dict) else None
    gpus: list[GpuInfo] = []
    for key, card in document.items():
        match = re.fullmatch(r"card(\d+)", str(key))
        if match is None or not isinstance(card, dict):
            continue
        memory = _field(card, "VRAM Total Memory (B)")
        gpus.append(
            GpuInfo(
                source="rocm-smi",
                index=int(match.group(1)),
                name=_field(card, "Card Series", "Card Model", "Device Name") or "unknown",
                memory_total_bytes=int(memory) if memory and memory.isdigit() else None,
                driver_version=driver,
                arch=_field(card, "GFX Version"),
            )
        )
    return sorted(gpus, key=lambda gpu: gpu.index)


def query_nvidia_smi(executable: str, *, timeout_s: float) -> list[GpuInfo]:
    """GPUs according to nvidia-smi at `executable`."""
    return parse_nvidia_smi(
        run_tool(NVIDIA_SMI, [executable, *NVIDIA_SMI_ARGS], timeout_s=timeout_s)
    )


def query_rocm_smi(executable: str, *, timeout_s: float) -> list[GpuInfo]:
    """GPUs according to rocm-smi at `executable`."""
    return parse_rocm_smi(run_tool(ROCM_SMI, [executable, *ROCM_SMI_ARGS], timeout_s=timeout_s))


def gpus_from_torch(runtime: TorchRuntime) -> list[GpuInfo]:
    """The devices torch reported, as `GpuInfo` records with source "torch"."""
    gpus: list[GpuInfo] = []
    for device in runtime.devices:
        arch = device.gcn_arch_name
        if arch is None and device.capability is not None:
            arch = "sm_" + device.capability.replace(".", "")
        gpus.append(
            GpuInfo(
                source="torch",
                index=device.index,
                name=device.name,
                memory_total_bytes=device.total_memory_bytes,
                driver_version=None,
                arch=arch,
            )
        )
    return gpus
