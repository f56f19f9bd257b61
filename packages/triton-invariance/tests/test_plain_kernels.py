"""The environment-variable mode on plain `@triton.jit` kernels (issue 28 §0, §1): a kernel with
no autotuner is its own winner, committed / compared at its first compile in the process; its
baseline key ignores argument names. Real compiles for cuda and hip, nothing launched."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from compile_helpers import TARGETS, invariance_mode, load_variant
from triton.backends.compiler import GPUTarget

from triton_invariance import hooks
from triton_invariance.cli import main as cli_main
from triton_invariance.compile_only import compile_only
from triton_invariance.errors import NumericalInvarianceMismatchError

PLAIN = """
@triton.jit
def plain_scale(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2.0, mask=mask)
"""
RENAMED = (
    PLAIN.replace("x_ptr", "src")
    .replace("out_ptr", "dst")
    .replace(", n,", ", numel,")
    .replace("< n", "< numel")
    .replace("BLOCK", "TILE")
)
CHANGED = PLAIN.replace("* 2.0", "* 3.0")


def _launch(source: str, directory: Path, module: str, target: str) -> Any:
    """Load `source` as a fresh module (a new process would see a new kernel) and launch it
    with positional arguments, as a caller that never names them."""
    fn = load_variant(source, directory, module, "plain_scale")
    x, out = torch.ones(4096), torch.empty(4096)
    with compile_only(GPUTarget(*TARGETS[target])):
        fn[(32,)](x, out, 4096, 128)
    return fn


@pytest.mark.parametrize("target", ["cuda:90", "hip:gfx942"])
def test_plain_kernel_committed_compared_and_a_rename_still_matches(
    target: str, reported: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tag = target.replace(":", "_")
    invariance_mode(monkeypatch, "commit", tmp_path / "base")
    _launch(PLAIN, tmp_path, f"plain_{tag}", target)
    [committed] = list((tmp_path / "base").glob("plain_scale_*.json"))
    assert len(reported) == 1 and ": created," in reported[0]

    invariance_mode(monkeypatch, "compare", tmp_path / "base")
    _launch(RENAMED, tmp_path, f"renamed_{tag}", target)
    assert ": match," in reported[-1], reported

    with pytest.raises(NumericalInvarianceMismatchError) as info:
        _launch(CHANGED, tmp_path, f"changed_{tag}", target)
    assert "computation_dag_hash" in info.value.report
    assert "arith.constant" in info.value.report
    assert list((tmp_path / "base").glob("*.json")) == [committed]


def test_plain_kernel_commit_feeds_the_cli_check(
    reported: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The documented CI flow: COMMIT into a fresh directory, then `triton-invariance check`."""
    invariance_mode(monkeypatch, "commit", tmp_path / "base")
    _launch(PLAIN, tmp_path, "ci_plain", "cuda:90")
    invariance_mode(monkeypatch, "commit", tmp_path / "renamed")
    _launch(RENAMED, tmp_path, "ci_renamed", "cuda:90")
    invariance_mode(monkeypatch, "commit", tmp_path / "changed")
    _launch(CHANGED, tmp_path, "ci_changed", "cuda:90")
    base = str(tmp_path / "base")
    assert cli_main(["check", str(tmp_path / "renamed"), "--dir", base]) == 0
    assert cli_main(["check", str(tmp_path / "changed"), "--dir", base]) == 1


def test_plain_kernel_with_two_num_warps_gets_two_baselines(
    reported: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Launch options a caller picks are a specialisation: a plain kernel launched with two
    num_warps values keeps two baselines instead of the second overwriting the first."""
    invariance_mode(monkeypatch, "commit", tmp_path / "base")
    fn = load_variant(PLAIN, tmp_path, "warps_plain", "plain_scale")
    x, out = torch.ones(4096), torch.empty(4096)
    with compile_only(GPUTarget(*TARGETS["cuda:90"])):
        fn[(32,)](x, out, 4096, 128, num_warps=4)
        fn[(32,)](x, out, 4096, 128, num_warps=8)
    assert len(list((tmp_path / "base").glob("plain_scale_*.json"))) == 2
    assert [": created," in line for line in reported] == [True, True]


def test_a_baseline_under_the_old_name_keyed_hash_is_still_read(
    reported: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A baseline committed by an earlier release (file keyed by argument names) compares,
    with a note saying how to re-key it."""
    from triton_invariance.storage import commit_invariance, read_baseline_file

    invariance_mode(monkeypatch, "commit", tmp_path / "base")
    _launch(PLAIN, tmp_path, "legacy_plain", "cuda:90")
    [new_file] = list((tmp_path / "base").glob("plain_scale_*.json"))
    [variant] = [v for v in hooks._state.variants.values() if v.kernel_name == "plain_scale"]
    keys = variant.keys(frozenset(), options_chosen_by_caller=True)
    assert keys.legacy_sig_hash != keys.sig_hash
    old = read_baseline_file(new_file)
    commit_invariance(
        "plain_scale",
        keys.legacy_sig_hash,
        old.invariance,
        config_hash=old.config_hash,
        base=tmp_path / "base",
    )
    new_file.unlink()
    hooks._state.decided.clear()
    invariance_mode(monkeypatch, "compare", tmp_path / "base")
    _launch(PLAIN, tmp_path, "legacy_plain_again", "cuda:90")
    assert ": match," in reported[-1]
    assert f"plain_scale_{keys.legacy_sig_hash}.json, filed by argument names" in reported[-1]
    assert "TRITON_INVARIANCE_COMMIT=1" in reported[-1]


def test_a_changed_constexpr_is_diffed_against_the_nearest_baseline(
    reported: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """BLOCK 128 -> 256 files the kernel under a new key; the hook path and `check` both name
    the baseline it replaced and what differs, instead of a bare "no baseline"."""
    from triton_invariance.errors import BaselineNotFoundError

    invariance_mode(monkeypatch, "commit", tmp_path / "base")
    _launch(PLAIN, tmp_path, "near_plain", "cuda:90")
    fn = load_variant(PLAIN, tmp_path, "near_wider", "plain_scale")
    x, out = torch.ones(4096), torch.empty(4096)
    invariance_mode(monkeypatch, "compare", tmp_path / "base")
    with (
        pytest.raises(BaselineNotFoundError) as info,
        compile_only(GPUTarget(*TARGETS["cuda:90"])),
    ):
        fn[(16,)](x, out, 4096, 256)
    message = str(info.value)
    assert "nearest baseline plain_scale_" in message
    assert "BLOCK: 128 -> 256" in message and "changed components:" in message

    invariance_mode(monkeypatch, "commit", tmp_path / "current")
    fn2 = load_variant(PLAIN, tmp_path, "near_wider_commit", "plain_scale")
    with compile_only(GPUTarget(*TARGETS["cuda:90"])):
        fn2[(16,)](x, out, 4096, 256)
    assert cli_main(["check", str(tmp_path / "current"), "--dir", str(tmp_path / "base")]) == 1


@pytest.mark.parametrize("target", ["cuda:90", "hip:gfx942"])
def test_fp_fusion_off_with_the_same_binary_is_a_match_with_a_note(
    target: str, reported: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The options component records fp fusion; a kernel with nothing to fuse compiles to the
    same binary either way, and the compare says exactly that instead of a mismatch."""
    copy = PLAIN.replace(" * 2.0", "")
    tag = target.replace(":", "_")
    invariance_mode(monkeypatch, "commit", tmp_path / "base")
    # One module file for both: the binary's line info names the source file.
    _launch(copy, tmp_path, f"fusion_{tag}", target)
    monkeypatch.setenv("TRITON_DEFAULT_FP_FUSION", "0")
    invariance_mode(monkeypatch, "compare", tmp_path / "base")
    _launch(copy, tmp_path, f"fusion_{tag}", target)
    assert ": match," in reported[-1]
    assert "option changed; compiled code identical (same binary)" in reported[-1]
    assert "enable_fp_fusion: true -> false" in reported[-1]


def test_autotuner_warmup_commits_no_config_as_a_plain_kernel(
    reported: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`Autotuner.warmup` compiles every config without choosing one: nothing is committed."""
    import triton

    fn = load_variant(PLAIN, tmp_path, "warm_plain", "plain_scale")
    configs = [triton.Config({"BLOCK": b}) for b in (64, 128)]
    tuned = triton.autotune(configs=configs, key=["n"])(fn)
    invariance_mode(monkeypatch, "commit", tmp_path / "base")
    x, out = torch.ones(4096), torch.empty(4096)
    with compile_only(GPUTarget(*TARGETS["cuda:90"])):
        tuned.warmup(x, out, 4096, grid=(1,))
    assert reported == []
    assert not (tmp_path / "base").exists()


SCALED = """
@triton.jit
def plain_scale(x_ptr, out_ptr, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * scale, mask=mask)
"""


@pytest.mark.parametrize("target", ["cuda:90", "hip:gfx942"])
def test_record_scalars_in_the_environment_mode_reports_a_changed_eps(
    target: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TRITON_INVARIANCE_RECORD_SCALARS=1 with COMMIT stores the float arguments of the launch
    that produced the baseline; with COMPARE, the same kernel launched with another value fails
    (the fingerprint alone cannot see it), and the same value matches."""
    from triton_invariance.errors import LaunchScalarsChangedError
    from triton_invariance.storage import read_baseline_file

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton-cache"))
    monkeypatch.setenv("TRITON_DEFAULT_FP_FUSION", "1")
    monkeypatch.setenv("TRITON_INVARIANCE_RECORD_SCALARS", "1")
    tag = target.replace(":", "_")
    x, out = torch.ones(4096), torch.empty(4096)
    lines: list[str] = []

    def launch(module: str, scale: float) -> None:
        hooks.uninstall()  # a new process: install reads the environment
        hooks.install(report=lines.append)
        fn = load_variant(SCALED, tmp_path, module, "plain_scale")
        with compile_only(GPUTarget(*TARGETS[target])):
            fn[(32,)](x, out, 4096, scale, 128)

    try:
        invariance_mode(monkeypatch, "commit", tmp_path / "base")
        launch(f"eps_commit_{tag}", 1e-5)
        [committed] = list((tmp_path / "base").glob("plain_scale_*.json"))
        assert read_baseline_file(committed).recorded["launch_scalars"] == {
            "#3": {"name": "scale", "values": ["1e-05"]}
        }
        invariance_mode(monkeypatch, "compare", tmp_path / "base")
        launch(f"eps_same_{tag}", 1e-5)
        assert ": match," in lines[-1]
        with pytest.raises(LaunchScalarsChangedError) as info:
            launch(f"eps_changed_{tag}", 1e-6)
        assert "#3 scale: 1e-05 -> 1e-06" in str(info.value)

        monkeypatch.setenv("TRITON_INVARIANCE_RECORD_SCALARS", "0")
        launch(f"eps_unrecorded_{tag}", 1e-6)  # without the flag the value is not compared
        assert ": match," in lines[-1]
    finally:
        hooks.uninstall()


def _as_name_keyed(base: Path) -> tuple[Path, str]:
    """Rewrite the one baseline in `base` as a release before position keys filed it: under the
    argument-name-keyed hash, with nothing recorded about newer keys. Returns (old file, new
    file name)."""
    from triton_invariance.storage import commit_invariance, read_baseline_file

    [new_file] = list(base.glob("plain_scale_*.json"))
    [variant] = [v for v in hooks._state.variants.values() if v.kernel_name == "plain_scale"]
    keys = variant.keys(frozenset(), options_chosen_by_caller=True)
    old = read_baseline_file(new_file)
    commit_invariance(
        "plain_scale",
        keys.legacy_sig_hash,
        old.invariance,
        config_hash=old.config_hash,
        config=old.config,
        specialization=old.specialization,
        base=base,
        recorded={"asm_digest": old.recorded["asm_digest"]},
    )
    new_file.unlink()
    return base / f"plain_scale_{keys.legacy_sig_hash}.json", new_file.name


@pytest.mark.parametrize("target", ["cuda:90", "hip:gfx942"])
def test_rekey_moves_a_name_keyed_baseline_to_its_position_key(
    target: str,
    reported: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`triton-invariance rekey CURRENT`: a dry run lists, --write writes the old fingerprint
    under the new key (old file kept), --remove-old deletes it; `check` then needs no note."""
    from triton_invariance.storage import read_baseline_file

    tag = target.replace(":", "_")
    base = tmp_path / "base"
    invariance_mode(monkeypatch, "commit", base)
    _launch(PLAIN, tmp_path, f"rekey_plain_{tag}", target)
    old_file, new_name = _as_name_keyed(base)
    old = read_baseline_file(old_file)
    invariance_mode(monkeypatch, "commit", tmp_path / "current")
    hooks._state.decided.clear()
    # The same source as at commit: the argument names are what the old key was made of.
    _launch(PLAIN, tmp_path, f"rekey_current_{tag}", target)
    capsys.readouterr()

    def rekey(*flags: str) -> tuple[int, str]:
        code = cli_main(["rekey", str(tmp_path / "current"), "--dir", str(base), *flags])
        return code, capsys.readouterr().out

    # Before the re-key `check` reads the old file as the hooks do: a match with a note.
    assert cli_main(["check", str(tmp_path / "current"), "--dir", str(base), "--strict"]) == 0
    assert f"read from {old_file.name}, filed by argument names" in capsys.readouterr().out

    code, out = rekey()
    assert code == 0
    assert f"would write {new_name} from {old_file.name} (filed by argument names" in out
    assert "1 file(s) to write, 1 old file(s) to delete" in out
    assert sorted(p.name for p in base.glob("*.json")) == [old_file.name]
    assert rekey("--remove-old")[0] == 2

    code, out = rekey("--write")
    assert code == 0 and f"wrote {new_name} from {old_file.name}" in out
    assert f"old files kept: {old_file.name}" in out
    rekeyed = read_baseline_file(base / new_name)
    assert rekeyed.invariance == old.invariance and rekeyed.config_hash == old.config_hash
    assert rekeyed.recorded["legacy_signature"] == old.signature_hash
    assert old_file.exists()

    code, out = rekey("--write", "--remove-old")
    assert code == 0 and f"removed {old_file.name}" in out and not old_file.exists()
    assert rekey()[1].startswith("rekey: nothing to re-key")
    assert cli_main(["check", str(tmp_path / "current"), "--dir", str(base), "--strict"]) == 0
    assert "read from" not in capsys.readouterr().out


def test_rekey_never_overwrites_a_baseline_committed_since(
    reported: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A baseline that appears under the new key between the dry run and --write (a commit
    running at the same time) is newer than the old file: kept, and the old file too."""
    from triton_invariance.rekey import plan_rekeys
    from triton_invariance.storage import list_baselines, read_baseline_file, write_new_baseline

    base = tmp_path / "base"
    invariance_mode(monkeypatch, "commit", base)
    _launch(PLAIN, tmp_path, "race_plain", "cuda:90")
    old_file, new_name = _as_name_keyed(base)
    invariance_mode(monkeypatch, "commit", tmp_path / "current")
    hooks._state.decided.clear()
    _launch(CHANGED, tmp_path, "race_changed", "cuda:90")
    current = [read_baseline_file(p) for p in list_baselines(tmp_path / "current")]
    [item] = plan_rekeys(current, base).writes
    assert write_new_baseline(current[0], base)  # the concurrent commit wins the race
    assert not write_new_baseline(item.baseline, base)
    assert read_baseline_file(base / new_name).invariance == current[0].invariance
    capsys.readouterr()
    code = cli_main(
        ["rekey", str(tmp_path / "current"), "--dir", str(base), "--write", "--remove-old"]
    )
    assert code == 0
    # The variant has its own file now: the old one is superseded and removed on request.
    assert f"removed {old_file.name}" in capsys.readouterr().out
    assert read_baseline_file(base / new_name).invariance == current[0].invariance
