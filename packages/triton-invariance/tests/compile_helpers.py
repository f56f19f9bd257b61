"""Compile test kernels to TTGIR on a CPU-only machine (a target is given, nothing is launched)."""

from __future__ import annotations

import importlib.util
import inspect
import sys
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # benchmarks import these helpers too, without pytest
    import pytest

TARGETS: dict[str, tuple[str, int | str, int]] = {
    "cuda:80": ("cuda", 80, 32),
    "cuda:90": ("cuda", 90, 32),
    "hip:gfx942": ("hip", "gfx942", 64),
}


def compile_kernel(
    fn: Any,
    signature: dict[str, str],
    constexprs: dict[str, int],
    target: str,
    **options: Any,
) -> Any:
    """`triton.compile` for one of `TARGETS`; returns the `CompiledKernel` (its `.asm` is text)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    src = ASTSource(fn, signature, constexprs)
    return triton.compile(src, target=GPUTarget(*TARGETS[target]), options=options or None)


def compile_ttgir(
    fn: Any, signature: dict[str, str], constexprs: dict[str, int], target: str, **options: Any
) -> str:
    """TTGIR text of one compile (`CompiledKernel.asm["ttgir"]`)."""
    return str(compile_kernel(fn, signature, constexprs, target, **options).asm["ttgir"])


def load_variant(new_source: str, directory: Path, module_name: str, function: str) -> Any:
    """Write `new_source` (a rewritten `@triton.jit` function) to a file; return `function`.

    Triton reads a kernel's source from its file, so a variant must live in a real module.
    """
    path = directory / f"{module_name}.py"
    path.write_text("import triton\nimport triton.language as tl\n\n\n" + new_source)
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec is not None and spec.loader is not None
    module: ModuleType = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return getattr(module, function)


def source_of(kernel: Any) -> str:
    """Source text of a `@triton.jit` function, decorator included."""
    return inspect.getsource(kernel.fn)


def reparse_with_triton(ttgir_text: str, target: str, directory: Path) -> tuple[Any, Any]:
    """Parse TTGIR with Triton's own MLIR bindings: `(module, context)`.

    An independent reader of the same text, used as an oracle for our parser. The context is
    returned too: the module is only valid while its context lives.
    """
    from triton._C.libtriton import ir
    from triton.backends.compiler import GPUTarget
    from triton.compiler.compiler import make_backend

    path = directory / "module.ttgir"
    path.write_text(ttgir_text)
    context = ir.context()
    ir.load_dialects(context)
    make_backend(GPUTarget(*TARGETS[target])).load_dialects(context)
    return ir.parse_mlir_module(str(path), context), context


def triton_op_names(module: Any) -> list[str]:
    """Names of every op in a module parsed by Triton (post-order walk), builtin.module excluded."""
    names: list[str] = []
    module.walk(lambda op: names.append(op.get_name()))
    return [name for name in names if name != "builtin.module"]


def print_generic(ttgir_text: str, target: str, directory: Path) -> str:
    """`ttgir_text` re-printed by Triton's MLIR with `--mlir-print-op-generic` (`generic_printer`,
    in a subprocess: the option is process-wide). Skips the test when this libtriton offers no
    way to set the option."""
    import subprocess

    import pytest
    from generic_printer import MISSING

    path = directory / "pretty.ttgir"
    path.write_text(ttgir_text)
    kind, arch, warp = TARGETS[target]
    printer = Path(__file__).with_name("generic_printer.py")
    done = subprocess.run(
        [sys.executable, str(printer), str(path), kind, str(arch), str(warp)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode == MISSING:
        pytest.skip(done.stderr.strip())
    if done.returncode != 0:
        raise RuntimeError(f"{printer.name} exited {done.returncode}: {done.stderr.strip()}")
    return done.stdout


def invariance_mode(
    monkeypatch: pytest.MonkeyPatch, mode: str, directory: Path | None = None
) -> None:
    """Switch the hooks to `mode` (commit / compare), with baselines in `directory` if given."""
    for name in ("TRITON_INVARIANCE_COMMIT", "TRITON_INVARIANCE_COMPARE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(f"TRITON_INVARIANCE_{mode.upper()}", "1")
    if directory is not None:
        monkeypatch.setenv("TRITON_INVARIANCE_BASELINE_DIR", str(directory))
