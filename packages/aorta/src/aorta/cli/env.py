"""`aorta env`: look at the environment aorta runs in.

The probe itself lives in `aorta.instrumentation` and is imported inside the command, so
that `aorta --help` never pays for it (and never for torch).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, cast

import click

if TYPE_CHECKING:
    from aorta.instrumentation.models import EnvSnapshot, Scope

_GIB = 1024**3


@click.group(name="env")
def env_group() -> None:
    """Inspect the machine and environment that trials run in."""


@env_group.command(name="probe")
@click.option("--json", "as_json", is_flag=True, help="Print the whole snapshot as JSON.")
@click.option(
    "--scope",
    type=click.Choice(["host", "environment", "trial"]),
    default="host",
    show_default=True,
    help="How much to collect: 'trial' is the cheap subset recorded with every trial.",
)
def probe_command(as_json: bool, scope: str) -> int:
    """Snapshot host, Python, torch, GPUs, packages and (redacted) environment variables.

    The probe never fails: whatever cannot be read is reported as a warning on stderr
    (and under "partial_reasons" with --json).
    """
    from aorta.instrumentation.environment import collect_env

    snapshot = collect_env(cast("Scope", scope))
    if as_json:
        click.echo(json.dumps(snapshot.to_dict(), indent=2, allow_nan=False))
    else:
        for label, value in summary_lines(snapshot):
            click.echo(f"{label:<12}{value}")
    for reason in snapshot.partial_reasons:
        click.echo(f"aorta: warning: {reason}", err=True)
    return 0


def _gib(n_bytes: int | None) -> str:
    return "?" if n_bytes is None else f"{n_bytes / _GIB:.1f} GiB"


def _torch_line(snapshot: EnvSnapshot) -> str:
    torch = snapshot.torch
    if torch is None:
        return "not installed"
    if torch.cuda is not None:
        build = f"CUDA {torch.cuda} build"
    elif torch.hip is not None:
        build = f"HIP {torch.hip} build"
    else:
        build = "CPU-only build"
    line = f"{torch.version} ({build})"
    runtime = torch.runtime
    if runtime is not None and runtime.cuda_available is not None:
        line += f", cuda available: {runtime.cuda_available}, {runtime.device_count} device(s)"
    if runtime is not None:
        line += (
            f", tf32 matmul/cudnn: {runtime.matmul_allow_tf32}/{runtime.cudnn_allow_tf32}"
            f", float32 matmul precision: {runtime.float32_matmul_precision}"
        )
    if torch.runtime_note:
        line += f"; {torch.runtime_note}"
    return line


def summary_lines(snapshot: EnvSnapshot) -> list[tuple[str, str]]:
    """The human-readable summary as (label, text) rows."""
    from aorta.instrumentation.redaction import is_redacted

    rows: list[tuple[str, str]] = [("scope", f"{snapshot.scope} ({snapshot.duration_ms:.0f} ms)")]
    if snapshot.python is not None:
        py = snapshot.python
        rows.append(("python", f"{py.implementation} {py.version} ({py.executable})"))
    if snapshot.platform is not None:
        plat = snapshot.platform
        libc = f", {plat.libc}" if plat.libc else ""
        rows.append(("platform", f"{plat.system} {plat.release} {plat.machine}{libc}"))
    if snapshot.cpu is not None:
        cpu = snapshot.cpu
        rows.append(
            (
                "cpu",
                f"{cpu.model or 'model not read'}, {cpu.logical_count} logical, "
                f"{cpu.affinity_count} usable by this process",
            )
        )
    if snapshot.memory is not None:
        mem = snapshot.memory
        rows.append(
            ("memory", f"{_gib(mem.total_bytes)} total, {_gib(mem.available_bytes)} available")
        )
    rows.append(("torch", _torch_line(snapshot)))
    gpus = [
        f"[{gpu.source}] {gpu.index}: {gpu.name}, {_gib(gpu.memory_total_bytes)}"
        + (f", {gpu.arch}" if gpu.arch else "")
        + (f", driver {gpu.driver_version}" if gpu.driver_version else "")
        for gpu in snapshot.gpus
    ]
    if gpus:
        rows.extend(("gpu", text) for text in gpus)
    else:
        rows.append(("gpus", "none found"))
    if snapshot.scope != "trial":
        rows.append(("hipBLASLt", snapshot.hipblaslt_version or "not found"))
        if snapshot.rocm_version:
            rows.append(("ROCm", snapshot.rocm_version))
    if snapshot.distributions is not None:
        rows.append(("packages", f"{len(snapshot.distributions)} distributions"))
    redacted = sum(1 for value in snapshot.env_vars.values() if is_redacted(value))
    rows.append(("env vars", f"{len(snapshot.env_vars)} ({redacted} redacted)"))
    return rows
