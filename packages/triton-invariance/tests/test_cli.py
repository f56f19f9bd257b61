"""`triton-invariance list / show / diff / check` on baselines made from real TTGIR."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from triton_invariance.cli import main
from triton_invariance.data import FORMAT_VERSION
from triton_invariance.fingerprint import compute_invariance
from triton_invariance.storage import commit_invariance

SIG = "0123456789abcdef"


@pytest.fixture
def dirs(tmp_path: Path, ttgir: Callable[..., str]) -> tuple[Path, Path]:
    """(baselines, current): `add_kernel` committed in both, at num_warps 4 and 8 in current."""
    baselines, current = tmp_path / "baselines", tmp_path / "current"
    four = compute_invariance(ttgir("add", "cuda:80", num_warps=4), "add_kernel")
    eight = compute_invariance(ttgir("add", "cuda:80", num_warps=8), "add_kernel")
    commit_invariance(
        "add_kernel", SIG, four, config_hash="c4", config={"num_warps": 4}, base=baselines
    )
    commit_invariance(
        "add_kernel", SIG, eight, config_hash="c8", config={"num_warps": 8}, base=current
    )
    return baselines, current


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_list_and_show(dirs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    baselines, _ = dirs
    code, out, _ = _cli(["list", "--dir", str(baselines)], capsys)
    assert code == 0
    assert out.startswith(f"add_kernel_{SIG}  fingerprint ")
    assert "target cuda:80  [num_warps=4]" in out
    code, out, _ = _cli(["show", "add_kernel", "--dir", str(baselines)], capsys)
    assert code == 0
    assert "computation_dag_hash" in out and "tt.load" in out and "hw.num_warps      4" in out


def test_list_empty_dir_and_show_unknown(
    tmp_path: Path, dirs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _cli(["list", "--dir", str(tmp_path / "none")], capsys)
    assert (code, out.strip()) == (0, f"no baselines in {tmp_path / 'none'}")
    code, _, err = _cli(["show", "nokernel", "--dir", str(dirs[0])], capsys)
    assert code == 2
    assert err.strip() == (
        f"triton-invariance: error: no baseline for 'nokernel' in {dirs[0]} "
        f"(kernels there: add_kernel)"
    )


def test_diff(dirs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    a = dirs[0] / f"add_kernel_{SIG}.json"
    b = dirs[1] / f"add_kernel_{SIG}.json"
    code, out, _ = _cli(["diff", str(a), str(a)], capsys)
    assert code == 0 and "fingerprints match" in out
    code, out, _ = _cli(["diff", str(a), str(b)], capsys)
    assert code == 1
    assert "hw_config_hash" in out and "num_warps: 4 -> 8" in out
    assert "config: {'num_warps': 4} -> {'num_warps': 8}" in out


def test_check_passes_fails_and_reports(
    tmp_path: Path, dirs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    baselines, current = dirs
    code, out, _ = _cli(["check", str(baselines), "--dir", str(baselines)], capsys)
    assert code == 0 and "check passed: 1/1" in out
    code, out, _ = _cli(["check", str(current), "--dir", str(baselines)], capsys)
    assert code == 1
    assert f"MISMATCH add_kernel_{SIG}" in out and "hw_config_hash" in out
    assert "check FAILED: 0/1" in out
    code, out, _ = _cli(["check", str(current), "--dir", str(tmp_path / "empty")], capsys)
    assert code == 1 and f"MISSING add_kernel_{SIG}" in out


def test_check_bad_files_are_one_line_usage_errors(
    dirs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    baselines, current = dirs
    path = baselines / f"add_kernel_{SIG}.json"
    doc = json.loads(path.read_text())
    doc["format_version"] = FORMAT_VERSION + 7
    path.write_text(json.dumps(doc))
    code, _, err = _cli(["check", str(current), "--dir", str(baselines)], capsys)
    assert code == 2
    assert err.count("\n") == 1 and f"{path}: format_version {FORMAT_VERSION + 7}" in err
    path.write_text("{not json")
    code, _, err = _cli(["check", str(current), "--dir", str(baselines)], capsys)
    assert code == 2 and err.count("\n") == 1 and "not valid JSON" in err
    code, _, err = _cli(["check", str(baselines / "nope")], capsys)
    assert code == 2 and "no such directory" in err


_PROBE = """
import contextlib, io, json, sys
from triton_invariance.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    codes = [main(a) for a in {argvs!r}]
print(json.dumps([codes, sorted(m for m in ("triton", "torch") if m in sys.modules)]))
"""


def test_commands_import_no_triton(dirs: tuple[Path, Path]) -> None:
    baselines, current = (str(d) for d in dirs)
    argvs = [
        ["list", "--dir", baselines],
        ["show", "add_kernel", "--dir", baselines],
        ["diff", f"{baselines}/add_kernel_{SIG}.json", f"{current}/add_kernel_{SIG}.json"],
        ["check", current, "--dir", baselines],
    ]
    done = subprocess.run(
        [sys.executable, "-c", _PROBE.format(argvs=argvs)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [[0, 0, 1, 1], []]


def test_console_script_exit_code(dirs: tuple[Path, Path]) -> None:
    exe = Path(sys.executable).with_name("triton-invariance")
    done = subprocess.run(
        [exe, "check", str(dirs[1]), "--dir", str(dirs[0])],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1 and "MISMATCH" in done.stdout


def test_list_shows_every_valid_file_and_reports_the_corrupt_ones(
    dirs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    baselines, current = dirs
    (baselines / "aaa_kernel_0000000000000000.json").write_text("{not json")
    (baselines / f"zzz_{SIG}.json").write_text(
        (current / f"add_kernel_{SIG}.json").read_text()
    )  # valid JSON, but sorted after the corrupt file
    code, out, err = _cli(["list", "--dir", str(baselines)], capsys)
    assert code == 2
    assert out.count(f"add_kernel_{SIG}") == 2  # both valid files listed
    assert "aaa_kernel_0000000000000000.json: not valid JSON" in err
    assert "1 of 3 baseline files" in err


def test_check_reports_a_committed_baseline_with_no_current_counterpart(
    dirs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    baselines, current = dirs
    same = baselines / f"add_kernel_{SIG}.json"
    (current / same.name).write_text(same.read_text())
    gone = baselines / "old_kernel_fedcba9876543210.json"
    gone.write_text(same.read_text())
    code, out, _ = _cli(["check", str(current), "--dir", str(baselines)], capsys)
    assert code == 0
    assert f"warning: old_kernel_fedcba9876543210: committed baseline {gone}" in out
    assert "check passed: 1/1" in out and "1 committed baseline(s) not seen" in out
    code, out, _ = _cli(["check", str(current), "--dir", str(baselines), "--strict"], capsys)
    assert code == 1
    assert "GONE    old_kernel_fedcba9876543210" in out and "check FAILED: 1/1" in out


def test_show_lists_the_compile_options(
    tmp_path: Path, ttgir: Callable[..., str], capsys: pytest.CaptureFixture[str]
) -> None:
    from dataclasses import replace

    inv = compute_invariance(ttgir("add", "cuda:80"), "add_kernel")
    with_options = replace(
        inv,
        compile_options=(("enable_fp_fusion", "false"),),
        compile_env=(("TRITON_FORCE_DISABLE_FP_FUSION", "1"),),
    )
    commit_invariance("add_kernel", SIG, with_options, config_hash="c", base=tmp_path / "a")
    commit_invariance("add_kernel", SIG, inv, config_hash="c", base=tmp_path / "b")
    code, out, _ = _cli(["show", "add_kernel", "--dir", str(tmp_path / "a")], capsys)
    assert code == 0 and "compile_options_hash" in out
    assert "option.enable_fp_fusion" in out and "env.TRITON_FORCE_DISABLE_FP_FUSION" in out
    code, out, _ = _cli(["show", "add_kernel", "--dir", str(tmp_path / "b")], capsys)
    assert code == 0 and "compile options   not recorded" in out
