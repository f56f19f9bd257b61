"""Per-autotune-key baselines (issue 28 §3): an autotuned matmul whose winner differs by shape
keeps one baseline per value of the autotuner's `key` arguments, compares each shape with its
own, and reports a shape it has not seen as `new`. Real compiles for cuda and hip."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
import triton
from compile_helpers import TARGETS, invariance_mode, load_variant, source_of
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


def _launch(matmul: Any, size: int, target: str) -> None:
    a = torch.empty((size, size), dtype=torch.float16)
    c = torch.empty((size, size), dtype=torch.float16)

    def timing(metadata: Any) -> float:
        return 1.0 if metadata.num_warps == FAST[size] else 3.0

    with compile_only(GPUTarget(*TARGETS[target]), timings=timing):
        matmul[lambda m: (triton.cdiv(size, m["BLOCK_M"]), triton.cdiv(size, m["BLOCK_N"]))](
            a, a, c, size, size, size, size, 1, size, 1, size, 1
        )


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

    invariance_mode(monkeypatch, "commit")
    for size in (256, 512):
        _launch(matmul, size, target)
    baselines = [read_baseline_file(p) for p in list_baselines(tmp_path / "base")]
    by_key = {b.recorded["autotune_key"]["M"]: b for b in baselines}
    assert sorted(by_key) == [256, 512]
    assert by_key[256].config["num_warps"] == 4 and by_key[512].config["num_warps"] == 2
    assert by_key[256].recorded["family"] == by_key[512].recorded["family"]

    # Before per-key baselines the second shape's winner overwrote the first, and comparing
    # the first shape failed; now each shape compares with its own winner.
    invariance_mode(monkeypatch, "compare")
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
    invariance_mode(monkeypatch, "commit")
    _launch(matmul, 256, "cuda:90")
    monkeypatch.setenv("TRITON_INVARIANCE_BASELINE_DIR", str(tmp_path / "current"))
    _new_process(matmul)
    for size in (256, 1024):
        _launch(matmul, size, "cuda:90")
    assert cli_main(["check", str(tmp_path / "current"), "--dir", str(tmp_path / "base")]) == 0


def _as_keyless(base: Path) -> Path:
    """Rewrite the one per-key baseline in `base` the way a release before per-key baselines
    filed it: under the signature hash (the `family`), with no autotune key recorded."""
    from triton_invariance.storage import commit_invariance

    [keyed_file] = list_baselines(base)
    keyed = read_baseline_file(keyed_file)
    family = keyed.recorded["family"]
    commit_invariance(
        keyed.kernel_name,
        family,
        keyed.invariance,
        config_hash=keyed.config_hash,
        config=keyed.config,
        specialization=keyed.specialization,
        base=base,
        recorded={"asm_digest": keyed.recorded["asm_digest"]},
    )
    keyed_file.unlink()
    return base / f"{keyed.kernel_name}_{family}.json"


@pytest.mark.parametrize("target", ["cuda:90", "hip:gfx942"])
def test_check_falls_back_to_a_baseline_from_before_per_key_baselines(
    target: str,
    reported: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`check` reads the single pre-per-key baseline as the hooks do (a note, not MISSING), and
    a numerics change is still a mismatch against it."""
    from triton_invariance.cli import main as cli_main

    tag = target.replace(":", "_")
    source = source_of(tile_matmul)
    matmul = triton.autotune(configs=CONFIGS, key=["M", "N", "K"])(
        load_variant(source, tmp_path, f"keyless_{tag}", "tile_matmul")
    )
    invariance_mode(monkeypatch, "commit")
    _launch(matmul, 256, target)
    old_file = _as_keyless(tmp_path / "base")

    # The hooks compare against it (the lookup `check` now shares).
    invariance_mode(monkeypatch, "compare")
    _new_process(matmul)
    _launch(matmul, 256, target)
    assert ": match," in reported[-1] and f"read from {old_file.name}" in reported[-1]

    monkeypatch.setenv("TRITON_INVARIANCE_BASELINE_DIR", str(tmp_path / "current"))
    invariance_mode(monkeypatch, "commit")
    _new_process(matmul)
    _launch(matmul, 256, target)
    capsys.readouterr()
    base = str(tmp_path / "base")
    assert cli_main(["check", str(tmp_path / "current"), "--dir", base, "--strict"]) == 0
    out = capsys.readouterr().out
    assert "ok      tile_matmul_" in out and "MISSING" not in out
    assert f"baseline read from {old_file.name}, one baseline for every autotune key" in out
    assert "triton-invariance rekey" in out
    assert "GONE" not in out  # the old file was used, not left unseen

    changed = triton.autotune(configs=CONFIGS, key=["M", "N", "K"])(
        load_variant(
            source.replace("c = acc.to(tl.float16)", "c = (acc * 2.0).to(tl.float16)"),
            tmp_path,
            f"keyless_changed_{tag}",
            "tile_matmul",
        )
    )
    monkeypatch.setenv("TRITON_INVARIANCE_BASELINE_DIR", str(tmp_path / "changed"))
    _launch(changed, 256, target)
    capsys.readouterr()
    assert cli_main(["check", str(tmp_path / "changed"), "--dir", base]) == 1
    out = capsys.readouterr().out
    assert "MISMATCH tile_matmul_" in out and f"baseline {old_file}" in out


def test_rekey_gives_each_autotune_key_its_own_copy_of_the_single_baseline(
    reported: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A pre-per-key baseline was the baseline of every shape: `rekey --write` files a copy of
    it under each key a current run saw, recording the key, and `check` then reads them
    without a note."""
    from triton_invariance.cli import main as cli_main

    matmul = triton.autotune(configs=CONFIGS, key=["M", "N", "K"])(
        load_variant(source_of(tile_matmul), tmp_path, "rekey_keyless", "tile_matmul")
    )
    invariance_mode(monkeypatch, "commit")
    _launch(matmul, 256, "cuda:90")
    old_file = _as_keyless(tmp_path / "base")
    old = read_baseline_file(old_file)
    monkeypatch.setenv("TRITON_INVARIANCE_BASELINE_DIR", str(tmp_path / "current"))
    _new_process(matmul)
    _launch(matmul, 256, "cuda:90")
    capsys.readouterr()
    base = str(tmp_path / "base")
    assert cli_main(["rekey", str(tmp_path / "current"), "--dir", base, "--write"]) == 0
    out = capsys.readouterr().out
    assert f"from {old_file.name} (one baseline for every autotune key" in out
    [rekeyed] = [b for b in map(read_baseline_file, list_baselines(base)) if b != old]
    assert rekeyed.recorded["autotune_key"] == {"M": 256, "N": 256, "K": 256}
    assert rekeyed.recorded["family"] == old.signature_hash
    assert rekeyed.invariance == old.invariance
    assert cli_main(["check", str(tmp_path / "current"), "--dir", base]) == 0
    assert "read from" not in capsys.readouterr().out
