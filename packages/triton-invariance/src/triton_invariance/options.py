"""Compile options that change numerics *after* TTGIR, read from a compiled kernel's metadata.

TTGIR does not show everything that decides a kernel's arithmetic. With `enable_fp_fusion`
False the TTGIR is identical while the PTX / AMDGCN turns `fma` into `mul` + `add`; the math
library (`extern_libs`: libdevice on CUDA, ocml/ockl on ROCm) implements `tl.exp` & co.; libdevice
flushes denormals when `enable_reflect_ftz`; ROCm may flush denormals (`allow_flush_denorm`);
`ptx_options` reach ptxas (`--fmad=false`) and `llvm_fn_attrs` reach LLVM. Those options form the
`compile_options` component of the fingerprint.

The names are the fields of Triton 3.9's `CUDAOptions` and `HIPOptions` (Triton copies every
option into the kernel's metadata); a field a backend does not have is simply absent. The
effective value is what is hashed: the environment knobs that feed it
(`TRITON_DEFAULT_FP_FUSION`, `TRITON_FORCE_DISABLE_FP_FUSION`, ...) are recorded next to it only to
explain a change, so setting a knob to the value that is the default anyway is not a mismatch.

Pure Python, no Triton import: it reads the metadata mapping and the library files it names.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

NUMERICS_OPTIONS: Final = (
    "enable_fp_fusion",  # cuda, hip: FMA contraction in LLVM / ptxas
    "default_dot_input_precision",  # cuda, hip: tf32 / ieee / bf16x3 for an unqualified tl.dot
    "max_num_imprecise_acc_default",  # cuda, hip: fp8 dot accumulation precision
    "extern_libs",  # cuda: libdevice; hip: ocml, ockl (the math library; file content hashed)
    "enable_reflect_ftz",  # cuda: libdevice flushes denormals to zero
    "allow_flush_denorm",  # hip: denormals may be flushed
    "ptx_options",  # cuda: extra ptxas flags, e.g. --fmad=false
    "llvm_fn_attrs",  # hip: LLVM function attributes, e.g. unsafe-fp-math
)
"""Option names (Triton 3.9 `CUDAOptions` / `HIPOptions` fields) hashed into `compile_options`."""

KNOB_ENV: Final = (
    "TRITON_DEFAULT_FP_FUSION",
    "TRITON_FORCE_DISABLE_FP_FUSION",
    "TRITON_F32_DEFAULT",
    "TRITON_LIBDEVICE_PATH",
    "TRITON_OVERRIDE_ARCH",
)
"""Environment knobs (Triton 3.9 `knobs.language` / `knobs.nvidia` / `knobs.runtime`) that feed
the options above or the TTGIR; recorded, when set, to explain a change."""


def numerics_options(metadata: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """`(name, canonical value)` of every `NUMERICS_OPTIONS` entry present in `metadata`.

    Values are canonical JSON (lists and tuples alike). `extern_libs` is rendered as
    ``name=file-name@content-hash`` in link order: the path differs between machines and
    installs, the library's content is what matters.
    """
    out = []
    for name in NUMERICS_OPTIONS:
        if name not in metadata:
            continue
        value = metadata[name]
        if name == "extern_libs":
            value = [f"{lib}={_library_digest(str(path))}" for lib, path in value or ()]
        out.append((name, json.dumps(value, sort_keys=True, separators=(",", ":"))))
    return tuple(out)


def knob_environment(environ: Mapping[str, str] | None = None) -> tuple[tuple[str, str], ...]:
    """`(name, value)` of every `KNOB_ENV` variable that is set."""
    env = os.environ if environ is None else environ
    return tuple((name, env[name]) for name in KNOB_ENV if name in env)


def _library_digest(path: str) -> str:
    try:
        stat = Path(path).stat()
    except OSError:
        return f"{Path(path).name}@unreadable"
    return _digest_file(path, stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=64)
def _digest_file(path: str, size: int, mtime_ns: int) -> str:
    # Keyed on size and mtime too, so a replaced library is hashed again; every compile of a
    # process otherwise reuses the digest (libdevice is ~0.5 MB).
    h = hashlib.blake2b(digest_size=8)
    try:
        with Path(path).open("rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                h.update(chunk)
    except OSError:
        return f"{Path(path).name}@unreadable"
    return f"{Path(path).name}@{h.hexdigest()}"
