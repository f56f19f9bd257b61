"""The pytest plugin as a CI gate: a real inner pytest session (pytester) compiles a kernel for
cuda:80 on CPU through the compile-only driver; commit, compare, change, compare again."""

from __future__ import annotations

import json
import linecache
import subprocess
import sys
from pathlib import Path

import pytest

# Imported here, before any inner session: pytester's in-process runs restore sys.modules
# afterwards, and torch cannot be imported a second time into one process.
import torch  # noqa: F401
import triton  # noqa: F401

pytest_plugins = ("pytester",)

KERNEL_TEST = """
import torch
import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget

from triton_invariance.compile_only import compile_only


@triton.jit
def gate_add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


def test_kernel_runs():
    x = torch.ones(1024)
    with compile_only(GPUTarget("cuda", 80, 32)):
        gate_add[(4,)](x, x, torch.empty(1024), 1024, BLOCK=256)
        gate_add[(8,)](x, x, torch.empty(1024), 1024, BLOCK=128, num_warps=2)
"""


@pytest.fixture
def gate(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TRITON_CACHE_DIR", str(pytester.path / "triton-cache"))
    monkeypatch.setenv("TRITON_DEFAULT_FP_FUSION", "1")
    pytester.makepyfile(test_gate=KERNEL_TEST)
    return pytester.path / "fingerprints"


def _run(pytester: pytest.Pytester, mode: str, directory: Path) -> pytest.RunResult:
    linecache.clearcache()  # Triton reads the kernel's source through inspect / linecache
    return pytester.runpytest(
        f"--triton-invariance={mode}",
        "--triton-invariance-dir",
        str(directory),
        "-p",
        "no:cacheprovider",
    )


def test_commit_then_compare_then_a_change_fails_the_session(
    pytester: pytest.Pytester, gate: Path
) -> None:
    committed = _run(pytester, "commit", gate)
    committed.assert_outcomes(passed=1)
    assert committed.ret == 0
    committed.stdout.fnmatch_lines(["*committed 2 kernel variant(s) to*: 2 created*"])
    files = sorted(gate.glob("gate_add_*.json"))
    assert len(files) == 2  # BLOCK=256/4 warps and BLOCK=128/2 warps: two variants
    configs = sorted(json.loads(f.read_text())["config"]["num_warps"] for f in files)
    assert configs == [2, 4]

    same = _run(pytester, "compare", gate)
    same.assert_outcomes(passed=1)
    assert same.ret == 0
    same.stdout.fnmatch_lines(["*triton-invariance compare passed: 2/2*"])

    pytester.makepyfile(test_gate=KERNEL_TEST.replace("x + y", "x - y"))
    changed = _run(pytester, "compare", gate)
    changed.assert_outcomes(passed=1)  # every test passed, the gate still fails the session
    assert changed.ret == pytest.ExitCode.TESTS_FAILED
    changed.stdout.fnmatch_lines(
        [
            "*MISMATCH gate_add_*",
            "*changed: computation_dag_hash*",
            "*before `*arith.addf*`, after `*arith.subf*`*",
            "*triton-invariance compare FAILED: 0/2*",
        ]
    )


def test_compare_without_baselines_fails_naming_each_variant(
    pytester: pytest.Pytester, gate: Path
) -> None:
    result = _run(pytester, "compare", gate)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*MISSING gate_add_*: no baseline in*"] * 2)


def test_bad_mode_is_a_usage_error(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--triton-invariance=check")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--triton-invariance: invalid choice: 'check'*"])


PROBE_CONFTEST = """
import sys

def pytest_unconfigure(config):
    with open("modules.txt", "w") as f:
        f.write(str("triton" in sys.modules))
"""


def test_the_plugin_is_off_and_imports_nothing_unless_asked(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(PROBE_CONFTEST)
    pytester.makepyfile(test_nothing="def test_nothing():\n    pass\n")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_nothing.py"],
        cwd=pytester.path,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (pytester.path / "modules.txt").read_text() == "False"
    assert "triton-invariance" not in done.stdout


def test_renamed_arguments_keep_every_baseline(pytester: pytest.Pytester, gate: Path) -> None:
    """Renaming arguments (pointer, scalar and constexpr; passed by keyword at the call, so
    the call changes too) moves no baseline: the key is types by position, not names."""
    _run(pytester, "commit", gate).assert_outcomes(passed=1)
    renamed = (
        KERNEL_TEST.replace("x_ptr", "src_a")
        .replace("y_ptr", "src_b")
        .replace(", n,", ", numel,")
        .replace("< n", "< numel")
        .replace("BLOCK", "TILE")
    )
    assert "x_ptr" not in renamed and "BLOCK" not in renamed
    pytester.makepyfile(test_gate=renamed)
    result = _run(pytester, "compare", gate)
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["*triton-invariance compare passed: 2/2*"])


def test_a_new_variant_is_diffed_against_its_nearest_baseline(
    pytester: pytest.Pytester, gate: Path
) -> None:
    """BLOCK 256 -> 512: no baseline for the new variant; the report names the nearest one
    (same kernel, same dtypes), the setting that differs and the changed components. The
    baseline it replaced is not also listed as "not compiled"."""
    _run(pytester, "commit", gate).assert_outcomes(passed=1)
    pytester.makepyfile(test_gate=KERNEL_TEST.replace("BLOCK=256", "BLOCK=512"))
    result = _run(pytester, "compare", gate)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "*MISSING gate_add_*: no baseline in*",
            "*nearest baseline gate_add_*: BLOCK: 256 -> 512; changed components: *",
            "*triton-invariance compare FAILED: 1/2*",
        ]
    )
    assert "not compiled in this session" not in result.stdout.str()


def test_one_report_per_changed_kernel_and_one_line_for_unseen(
    pytester: pytest.Pytester, gate: Path
) -> None:
    """One edit changes both compiled variants: one MISMATCH block naming both. A subset run
    sums up the baselines it did not compile in one line."""
    second = KERNEL_TEST[KERNEL_TEST.index("@triton.jit") :]
    second = second.replace("gate_add", "other_add").replace("kernel_runs", "other_runs")
    pytester.makepyfile(test_gate=KERNEL_TEST + "\n\n" + second)
    _run(pytester, "commit", gate).assert_outcomes(passed=2)
    assert len(list(gate.glob("*.json"))) == 4
    pytester.makepyfile(test_gate=KERNEL_TEST.replace("x + y", "x * y"))
    result = _run(pytester, "compare", gate)
    out = result.stdout.str()
    assert out.count("MISMATCH") == 1, out
    result.stdout.fnmatch_lines(
        [
            "*MISMATCH gate_add_* (and 1 more variant(s) of gate_add: gate_add_*)",
            "*not compiled in this session: 2 baseline(s) of 1 kernel(s) (other_add)*",
        ]
    )


SCALE_TEST = """
import torch
import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget

from triton_invariance.compile_only import compile_only


@triton.jit
def gate_scale(x_ptr, out_ptr, n, eps, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + eps, mask=mask)


def test_kernel_runs():
    x = torch.ones(1024)
    with compile_only(GPUTarget("cuda", 80, 32)):
        gate_scale[(4,)](x, torch.empty(1024), 1024, 1e-5, BLOCK=256)
"""


def test_record_scalars_reports_a_changed_eps(pytester: pytest.Pytester, gate: Path) -> None:
    """An `eps` passed at launch is invisible to the fingerprint; --record-scalars sees it."""
    pytester.makepyfile(test_gate=SCALE_TEST)
    flag = "--triton-invariance-record-scalars"
    linecache.clearcache()
    pytester.runpytest("--triton-invariance=commit", "--triton-invariance-dir", str(gate), flag)
    [path] = gate.glob("gate_scale_*.json")
    recorded = json.loads(path.read_text())["recorded"]
    assert recorded["launch_scalars"] == {"#3": {"name": "eps", "values": ["1e-05"]}}
    pytester.makepyfile(test_gate=SCALE_TEST.replace("1e-5", "1e-6"))
    plain = _run(pytester, "compare", gate)
    assert plain.ret == 0  # without the flag: the gate cannot see it, and says nothing
    linecache.clearcache()
    result = pytester.runpytest(
        "--triton-invariance=compare", "--triton-invariance-dir", str(gate), flag
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*SCALARS gate_scale_*: *#3 eps: 1e-05 -> 1e-06*"])


@pytest.mark.parametrize(("body", "identical"), [("x", True), ("x * y + x", False)])
def test_fp_fusion_off_with_identical_code_is_a_note_not_a_mismatch(
    pytester: pytest.Pytester,
    gate: Path,
    monkeypatch: pytest.MonkeyPatch,
    body: str,
    identical: bool,
) -> None:
    """fp fusion off changes the recorded option; where the binary is the same (a copy: no
    arithmetic to fuse) the gate says so and passes, where it is not (a multiply-add) it
    still fails."""
    pytester.makepyfile(test_gate=KERNEL_TEST.replace("x + y", body))
    _run(pytester, "commit", gate).assert_outcomes(passed=1)
    assert all("asm_digest" in json.loads(f.read_text())["recorded"] for f in gate.glob("*.json"))
    monkeypatch.setenv("TRITON_DEFAULT_FP_FUSION", "0")
    result = _run(pytester, "compare", gate)
    if identical:
        assert result.ret == 0, result.stdout.str()
        result.stdout.fnmatch_lines(["*option changed; compiled code identical*enable_fp_fusion*"])
    else:
        assert result.ret == pytest.ExitCode.TESTS_FAILED
        result.stdout.fnmatch_lines(["*MISMATCH gate_add_*", "*compile_options_hash*"])
