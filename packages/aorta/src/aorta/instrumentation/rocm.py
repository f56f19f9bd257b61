"""ROCm and hipBLASLt versions, read from files (no library is loaded, nothing is run).

hipBLASLt picks the GEMM kernels on AMD GPUs, so its version is one of the first things
to compare when a numerical failure appears on one ROCm host and not on another.

Where to look: `$ROCM_PATH` first, then every `/opt/rocm*` directory. In each root the
hipBLASLt version comes from the versioned library file name
(`lib/libhipblaslt.so.0.10.60200` gives "0.10.60200"), else from
`include/hipblaslt/hipblaslt-version.h`; the ROCm version comes from `.info/version`.
No ROCm root at all means "not ROCm": both versions are None and nothing is wrong.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

# Module attribute so that tests can point the search at a temporary directory.
OPT_DIR = Path("/opt")

_LIB_PREFIX = "libhipblaslt.so."
_HEADER = Path("include/hipblaslt/hipblaslt-version.h")
# Matches both "#define hipblasltVersionMajor 0" and "#define HIPBLASLT_VERSION_MAJOR 0".
_HEADER_DEFINE = re.compile(r"#define\s+\w*version_?(major|minor|patch)\s+(\d+)", re.IGNORECASE)


@dataclass(frozen=True)
class RocmVersions:
    """The versions found; None where not found."""

    rocm: str | None
    hipblaslt: str | None


def rocm_roots(environ: Mapping[str, str]) -> list[Path]:
    """Existing ROCm installation directories, `$ROCM_PATH` first, without duplicates."""
    candidates: list[Path] = []
    if environ.get("ROCM_PATH"):
        candidates.append(Path(environ["ROCM_PATH"]))
    if OPT_DIR.is_dir():
        candidates.extend(sorted(OPT_DIR.glob("rocm*")))
    roots: list[Path] = []
    seen: set[Path] = set()
    for candidate in candidates:
        # /opt/rocm is usually a symlink to /opt/rocm-X.Y.Z: count the installation once.
        resolved = candidate.resolve()
        if candidate.is_dir() and resolved not in seen:
            seen.add(resolved)
            roots.append(candidate)
    return roots


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split(".") if part.isdigit())


def hipblaslt_from_lib(root: Path) -> str | None:
    """The longest version suffix among `root/lib/libhipblaslt.so.*` (the real file, not
    the shorter soname links to it)."""
    lib = root / "lib"
    if not lib.is_dir():
        return None
    versions = [
        path.name.removeprefix(_LIB_PREFIX)
        for path in lib.glob(_LIB_PREFIX + "*")
        if path.name.removeprefix(_LIB_PREFIX)[:1].isdigit()
    ]
    return max(versions, key=lambda v: (len(_version_key(v)), _version_key(v)), default=None)


def hipblaslt_from_header(root: Path) -> str | None:
    """major.minor.patch from hipBLASLt's version header, if installed with headers."""
    header = root / _HEADER
    if not header.is_file():
        return None
    parts = {
        match.group(1).lower(): match.group(2)
        for match in _HEADER_DEFINE.finditer(header.read_text(encoding="utf-8", errors="replace"))
    }
    if not {"major", "minor", "patch"} <= parts.keys():
        return None
    return f"{parts['major']}.{parts['minor']}.{parts['patch']}"


def rocm_version(root: Path) -> str | None:
    """The first line of `root/.info/version` ("6.2.0-66"), if present."""
    info = root / ".info" / "version"
    if not info.is_file():
        return None
    lines = info.read_text(encoding="utf-8", errors="replace").split()
    return lines[0] if lines else None


def find_rocm_versions(environ: Mapping[str, str]) -> RocmVersions:
    """ROCm and hipBLASLt versions from the first ROCm root that names each."""
    rocm: str | None = None
    hipblaslt: str | None = None
    for root in rocm_roots(environ):
        if rocm is None:
            rocm = rocm_version(root)
        if hipblaslt is None:
            hipblaslt = hipblaslt_from_lib(root) or hipblaslt_from_header(root)
    return RocmVersions(rocm=rocm, hipblaslt=hipblaslt)
