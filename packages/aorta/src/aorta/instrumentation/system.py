"""Host facts that need no third-party code: interpreter, OS, CPU, memory, packages.

Each reader returns one record or raises; `aorta.instrumentation.environment` turns an
exception into a partial reason, so nothing here catches broadly.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import sys
from pathlib import Path

from aorta.instrumentation.models import CpuInfo, MemoryInfo, PlatformInfo, PythonInfo
from toolkit_core.metadata_headers import plain_headers

# Module attributes rather than literals so that tests can point them elsewhere.
CPUINFO_PATH = Path("/proc/cpuinfo")
MEMINFO_PATH = Path("/proc/meminfo")

# /proc/cpuinfo keys that name the CPU, in order of preference: x86 first, then the keys
# that ARM, POWER and other architectures use.
_CPU_MODEL_KEYS = ("model name", "Model", "Hardware", "cpu model", "cpu")


def python_info() -> PythonInfo:
    """The running interpreter."""
    return PythonInfo(
        version=platform.python_version(),
        implementation=platform.python_implementation(),
        executable=sys.executable,
    )


def platform_info() -> PlatformInfo:
    """OS name, kernel release, machine architecture and C library."""
    uname = os.uname()
    return PlatformInfo(
        system=uname.sysname,
        release=uname.release,
        machine=uname.machine,
        libc=_libc(),
    )


def _libc() -> str | None:
    # confstr answers instantly on glibc; platform.libc_ver() scans the interpreter binary
    # (milliseconds) and is kept as the fallback for other C libraries.
    try:
        confstr = os.confstr("CS_GNU_LIBC_VERSION")
    except (ValueError, OSError):
        confstr = None
    if confstr:
        return confstr
    lib, version = platform.libc_ver()
    return f"{lib} {version}".strip() or None


def cpu_info(*, read_model: bool = True) -> CpuInfo:
    """Logical CPU count, CPUs in this process's affinity mask and, if asked, the model name.

    The model comes from /proc/cpuinfo, which some kernels generate slowly on many-core
    hosts, hence `read_model=False` for cheap probes. A missing /proc/cpuinfo (not Linux)
    gives model None; an unreadable one raises.
    """
    affinity: int | None = None
    if hasattr(os, "sched_getaffinity"):
        affinity = len(os.sched_getaffinity(0))
    model = _cpu_model() if read_model else None
    return CpuInfo(model=model, logical_count=os.cpu_count(), affinity_count=affinity)


def _cpu_model() -> str | None:
    if not CPUINFO_PATH.exists():
        return None
    fields: dict[str, str] = {}
    for line in CPUINFO_PATH.read_text(encoding="utf-8", errors="replace").splitlines():
        key, sep, value = line.partition(":")
        key = key.strip()
        if sep and key not in fields and value.strip():
            fields[key] = value.strip()
    return next((fields[key] for key in _CPU_MODEL_KEYS if key in fields), None)


def memory_info() -> MemoryInfo:
    """Total and available physical memory, from /proc/meminfo or, without it, sysconf.

    Raises when /proc/meminfo exists but cannot be read or lacks MemTotal.
    """
    if MEMINFO_PATH.exists():
        values: dict[str, int] = {}
        for line in MEMINFO_PATH.read_text(encoding="utf-8").splitlines():
            key, _, rest = line.partition(":")
            parts = rest.split()
            if parts and parts[0].isdigit():
                # The kernel writes "kB" but means KiB.
                scale = 1024 if parts[1:] == ["kB"] else 1
                values[key.strip()] = int(parts[0]) * scale
        if "MemTotal" not in values:
            raise ValueError(f"no MemTotal in {MEMINFO_PATH}")
        return MemoryInfo(
            total_bytes=values["MemTotal"], available_bytes=values.get("MemAvailable")
        )
    page = os.sysconf("SC_PAGE_SIZE")
    total = os.sysconf("SC_PHYS_PAGES") * page
    try:
        available: int | None = os.sysconf("SC_AVPHYS_PAGES") * page
    except (ValueError, OSError):  # not every OS knows this name (macOS does not)
        available = None
    return MemoryInfo(total_bytes=total, available_bytes=available)


def installed_distributions() -> tuple[dict[str, str], list[str]]:
    """Every installed distribution as {name: version}, read with importlib.metadata.

    Never runs pip. Where a name is installed twice on sys.path, the first one wins, as it
    does for `importlib.metadata.version()`. Returns the mapping, sorted case-insensitively,
    and one message per distribution whose metadata could not be read.
    """
    found: dict[str, str] = {}
    problems: list[str] = []
    for dist in importlib.metadata.distributions():
        try:
            name, version = _name_and_version(dist)
        except Exception as exc:  # one broken dist-info must not hide all the others
            problems.append(f"{type(exc).__name__}: {exc}")
            continue
        if name and version is not None:
            found.setdefault(name, version)
    return dict(sorted(found.items(), key=lambda item: item[0].lower())), problems


def _name_and_version(dist: importlib.metadata.Distribution) -> tuple[str | None, str | None]:
    """`dist.metadata["Name"]` and `dist.version`, from the same file importlib reads.

    importlib parses the whole file with the email parser (and redents every header) to
    answer two one-line headers: reading ~220 distributions that way was a quarter of a
    one-trial triage run's CPU, done twice (host and environment probe). Here only the
    header block is scanned; a block the email parser would read differently from a plain
    `Key: value` list (a folded Name or Version, a line that is not a header) is left to it.
    """
    text = dist.read_text("METADATA") or dist.read_text("PKG-INFO") or dist.read_text("")
    headers = plain_headers(text) if isinstance(text, str) else None
    if headers is None:
        return dist.metadata["Name"], dist.version
    return headers.get("name"), headers.get("version")
