"""Read a TTGIR module printed in MLIR's generic syntax (`--mlir-print-op-generic`).

The generic form is the same module as the custom ("pretty") one, but every op's custom syntax
is replaced by ``"dialect.op"(operands) <{properties}> ({regions}) {attrs} : (types) -> types``.
Rather than teach the fingerprint every op's custom syntax, the module is parsed by Triton's own
MLIR (which reads either form) and printed back in the custom form, which is then fingerprinted
exactly as a compiled kernel's TTGIR is. Needs Triton (imported only for such a module); a
module that is not generic never reaches this file.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

from triton_invariance.mlir import InvalidTTGIRError

_GENERIC_MODULE = re.compile(r'^"builtin\.module"\(\)', re.MULTILINE)
_TARGET = re.compile(r'"?ttg\.target"?\s*=\s*"(cuda|hip):(\w+)"')
_WARP = re.compile(r'"?ttg\.threads-per-warp"?\s*=\s*(\d+)')


def is_generic(text: str) -> bool:
    """Whether the top-level module is printed in the generic syntax."""
    # The substring test (a C scan) first: a line-anchored regex search walks every line of
    # every module fingerprinted, and nearly none is generic.
    return '"builtin.module"()' in text and _GENERIC_MODULE.search(text) is not None


def to_custom_syntax(text: str) -> str:
    """The same module printed in the custom syntax, by Triton's MLIR parser and printer."""
    target = _TARGET.search(text)
    if target is None:
        raise InvalidTTGIRError(
            "a module in MLIR's generic syntax without a `ttg.target` attribute: not TTGIR"
        )
    try:
        from triton._C.libtriton import ir
        from triton.backends.compiler import GPUTarget
        from triton.compiler.compiler import make_backend
    except ImportError:
        raise InvalidTTGIRError(
            "a module in MLIR's generic syntax (--mlir-print-op-generic) needs Triton to read it; "
            "install triton, or dump the module without --mlir-print-op-generic"
        ) from None
    backend, arch = target.group(1), target.group(2)
    warp = _WARP.search(text)
    gpu = GPUTarget(
        backend, int(arch) if arch.isdigit() else arch, int(warp.group(1)) if warp else 32
    )
    context = ir.context()
    ir.load_dialects(context)
    make_backend(gpu).load_dialects(context)
    with tempfile.TemporaryDirectory(prefix="triton-invariance-") as tmp:
        path = Path(tmp) / "module.mlir"
        path.write_text(text, encoding="utf-8")
        try:
            module = ir.parse_mlir_module(str(path), context)
        except RuntimeError as exc:
            raise InvalidTTGIRError(
                f"Triton's MLIR parser rejected the generic module: {exc}"
            ) from None
        return str(module)
