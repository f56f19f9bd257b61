"""Baselines another user could have rewritten are refused before they decide a verdict."""

from __future__ import annotations

from pathlib import Path

import pytest
from sample_data import sample_inv

from triton_invariance.cli import main
from triton_invariance.compare import compare_and_report
from triton_invariance.storage import commit_invariance
from triton_invariance.trust import ALLOW_ENV, SharedBaselinesError

SIG = "0123456789abcdef"


def _committed(tmp_path: Path) -> tuple[Path, Path]:
    """(baselines, current), the same fingerprint committed in both, owner-only modes."""
    baselines, current = tmp_path / "baselines", tmp_path / "current"
    for base in (baselines, current):
        commit_invariance("my_kernel", SIG, sample_inv(), config_hash="c0", base=base)
        base.chmod(0o755)
        (base / f"my_kernel_{SIG}.json").chmod(0o644)
    return baselines, current


@pytest.mark.parametrize(
    ("name", "mode", "reason"),
    [
        ("", 0o775, "the baselines directory is writable by group (mode 0775)"),
        (f"my_kernel_{SIG}.json", 0o666, "a baseline file is writable by group and others"),
    ],
)
def test_check_refuses_a_shared_writable_baseline_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, mode: int, reason: str
) -> None:
    baselines, current = _committed(tmp_path)
    assert main(["check", str(current), "--dir", str(baselines)]) == 0
    capsys.readouterr()
    (baselines / name).chmod(mode)
    code = main(["check", str(current), "--dir", str(baselines)])
    out, err = capsys.readouterr()
    assert code == 2
    assert out == ""  # refused before any verdict was printed
    line = err.strip()
    assert "\n" not in line
    assert line.startswith(f"triton-invariance: error: {baselines / name}: ")
    assert reason in line and "--allow-shared-writable" in line


def test_the_waiver_flag_checks_against_a_shared_directory_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    baselines, current = _committed(tmp_path)
    baselines.chmod(0o777)
    code = main(["check", str(current), "--dir", str(baselines), "--allow-shared-writable"])
    out, err = capsys.readouterr()
    assert code == 0
    assert "check passed: 1/1 kernels match" in out
    assert f"--allow-shared-writable: ownership of {baselines} not checked" in err


def test_the_hooks_comparison_refuses_unless_the_env_waives_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    baselines, _ = _committed(tmp_path)
    monkeypatch.delenv(ALLOW_ENV, raising=False)
    assert compare_and_report("my_kernel", SIG, sample_inv(), base=baselines)
    (baselines / f"my_kernel_{SIG}.json").chmod(0o664)
    with pytest.raises(SharedBaselinesError, match="a baseline file is writable by group"):
        compare_and_report("my_kernel", SIG, sample_inv(), base=baselines)
    monkeypatch.setenv(ALLOW_ENV, "1")
    assert compare_and_report("my_kernel", SIG, sample_inv(), base=baselines)
