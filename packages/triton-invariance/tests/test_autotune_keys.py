"""Per-autotune-key baselines (issue 28 §3): an autotuned matmul whose winner differs by shape
keeps one baseline per value of the autotuner's `key` arguments, compares each shape with its
own, and reports a shape it has not seen as `new`. Real compiles for cuda and hip."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
import triton
from compile_helpers import TARGETS, load_variant, source_of
from triton.backends.compiler import GPUTarget
from tutorial_matmul import tile_matmul

from triton_invariance import hooks
from triton_invariance.compile_only import compile_only
from triton_invariance.storage import list_baselines, read_baseline_file

CONFIGS = [
    triton.Config({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32}, num_warps=4),
    triton.Config({"BLOCK_M": 32, "BLOCK_N": 64, "BLOCK_K": 32}, num_warps=2),
]
# shape -> the num_warps of the config that "runs fastest" for it
FAST = {256: 4, 512: 2, 1024: 4}


@pytest.fixture
def reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton-cache"))
    monkeypatch.setenv("TRITON_DEFAULT_FP_FUSION", "1")
    monkeypatch.setenv("TRITON_INVARIANCE_BASELINE_DIR", str(tmp_path / "base"))
    lines: list[str] = []
    hooks.uninstall()
    hooks.install(report=lines.append)
    yield lines
    hooks.uninstall()


def _launch(matmul: Any, size: int, target: str) -> None:
    a = torch.empty((size, size), dtype=torch.float16)
    c = torch.empty((size, size), dtype=torch.float16)

    def timing(metadata: Any) -> float:
        return 1.0 if metadata.num_warps == FAST[size] else 3.0

    with compile_only(GPUTarget(*TARGETS[target]), timings=timing):
        matmul[lambda m: (triton.cdiv(size, m["BLOCK_M"]), triton.cdiv(size, m["BLOCK_N"]))](
            a, a, c, size, size, size, size, 1, size, 1, size, 1
        )


def _mode(monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    for name in ("TRITON_INVARIANCE_COMMIT", "TRITON_INVARIANCE_COMPARE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(f"TRITON_INVARIANCE_{mode.upper()}", "1")


def _new_process(matmul: Any) -> None:
    """What a new process starts from: no tuned config, no decision taken."""
    matmul.cache.clear()
    hooks._state.decided.clear()


@pytest.mark.parametrize("target", ["cuda:90", "hip:gfx942"])
def test_each_shape_keeps_its_own_winner_and_an_unseen_shape_is_new(
    target: str, reported: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    jit = load_variant(
        source_of(tile_matmul), tmp_path, f"keyed_{target.replace(':', '_')}", "tile_matmul"
    )
    matmul = triton.autotune(configs=CONFIGS, key=["M", "N", "K"])(jit)

    _mode(monkeypatch, "commit")
    for size in (256, 512):
        _launch(matmul, size, target)
    baselines = [read_baseline_file(p) for p in list_baselines(tmp_path / "base")]
    by_key = {b.recorded["autotune_key"]["M"]: b for b in baselines}
    assert sorted(by_key) == [256, 512]
    assert by_key[256].config["num_warps"] == 4 and by_key[512].config["num_warps"] == 2
    assert by_key[256].recorded["family"] == by_key[512].recorded["family"]

    # Before per-key baselines the second shape's winner overwrote the first, and comparing
    # the first shape failed; now each shape compares with its own winner.
    _mode(monkeypatch, "compare")
    _new_process(matmul)
    for size in (256, 512):
        _launch(matmul, size, target)
    assert [": match," in line for line in reported[-2:]] == [True, True], reported

    _new_process(matmul)
    _launch(matmul, 1024, target)
    assert ": new," in reported[-1]
    assert "new autotune key (M=1024, N=1024, K=1024)" in reported[-1]
    assert "2 other key(s) of this signature committed" in reported[-1]


def test_check_reports_a_new_key_as_new(
    reported: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CI flow: commit the baselines, then commit the current run elsewhere and `check`."""
    from triton_invariance.cli import main as cli_main

    jit = load_variant(source_of(tile_matmul), tmp_path, "keyed_check", "tile_matmul")
    matmul = triton.autotune(configs=CONFIGS, key=["M", "N", "K"])(jit)
    _mode(monkeypatch, "commit")
    _launch(matmul, 256, "cuda:90")
    monkeypatch.setenv("TRITON_INVARIANCE_BASELINE_DIR", str(tmp_path / "current"))
    _new_process(matmul)
    for size in (256, 1024):
        _launch(matmul, size, "cuda:90")
    assert cli_main(["check", str(tmp_path / "current"), "--dir", str(tmp_path / "base")]) == 0
