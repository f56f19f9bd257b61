"""Fixtures shared by triton-invariance's tests: a private Triton cache and compiled TTGIR."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

TESTS_DIR = Path(__file__).parent
# Tests import the kernel definitions and compile helpers that live next to them; with pytest's
# importlib mode the test directory is not on sys.path by itself.
if str(TESTS_DIR) not in sys.path:
    sys.path.insert(0, str(TESTS_DIR))

from compile_helpers import compile_ttgir  # noqa: E402
from kernels import KERNELS  # noqa: E402


@pytest.fixture(scope="session")
def triton_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Triton's on-disk kernel cache for this session only (no user cache read or written)."""
    path = tmp_path_factory.mktemp("triton-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TRITON_CACHE_DIR", str(path))
        yield path


@pytest.fixture(scope="session")
def ttgir(triton_cache_dir: Path) -> Callable[..., str]:
    """`ttgir(kernel, target, **options)`: TTGIR text of a `kernels.KERNELS` entry, compiled once.

    Compiling is the slow part of these tests (up to a second per CUDA compile); every test asks
    this memo, so each (kernel, target, options) compiles once per session.
    """
    memo: dict[tuple[str, str, tuple[tuple[str, Any], ...]], str] = {}

    def get(kernel: str, target: str, **options: Any) -> str:
        key = (kernel, target, tuple(sorted(options.items())))
        if key not in memo:
            spec = KERNELS[kernel]
            memo[key] = compile_ttgir(spec.fn, spec.signature, spec.constexprs, target, **options)
        return memo[key]

    return get


@pytest.fixture
def reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The hooks installed with a reporter collecting their log lines: a private Triton cache,
    no mode set yet, baselines under tmp_path/base (`invariance_mode` sets the mode)."""
    from triton_invariance import hooks

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton-cache"))
    monkeypatch.setenv("TRITON_DEFAULT_FP_FUSION", "1")
    for name in ("TRITON_INVARIANCE_COMMIT", "TRITON_INVARIANCE_COMPARE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TRITON_INVARIANCE_BASELINE_DIR", str(tmp_path / "base"))
    lines: list[str] = []
    hooks.uninstall()
    hooks.install(report=lines.append)
    yield lines
    hooks.uninstall()
