"""`triton-invariance fingerprint FILE.ttgir` and `diff A.ttgir B.ttgir` (issue 28 §4): offline
use of TTGIR dumps of real compiled kernels, without importing Triton for a custom-syntax file."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from compile_helpers import TARGETS, compile_kernel, print_generic
from kernels import KERNELS

from triton_invariance.cli import main
from triton_invariance.fingerprint import compute_invariance

TTGIR = Callable[..., str]


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("target", ["cuda:90", "hip:gfx942"])
def test_fingerprint_of_a_dump_equals_the_compiled_kernels(
    target: str, tmp_path: Path, triton_cache_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = KERNELS["matmul_fp16"]
    kernel = compile_kernel(spec.fn, spec.signature, spec.constexprs, target)
    dump = tmp_path / "matmul.ttgir"
    dump.write_text(kernel.asm["ttgir"])
    options = tmp_path / "matmul.json"
    options.write_text(json.dumps(kernel.metadata._asdict(), default=str))
    code, out, _ = _cli(["fingerprint", str(dump), "--options-json", str(options)], capsys)
    assert code == 0
    expected = compute_invariance(kernel.asm["ttgir"], metadata=kernel.metadata._asdict())
    hashes = expected.component_hashes()
    assert f"computation_dag_hash   {hashes['computation_dag_hash']}" in out
    assert f"compile_options_hash   {hashes['compile_options_hash']}" in out
    assert f"hw.target         {TARGETS[target][0]}:" in out
    code, out, _ = _cli(["fingerprint", str(dump)], capsys)
    assert f"fingerprint       {compute_invariance(kernel.asm['ttgir']).fingerprint}" in out
    assert "compile options   not recorded" in out


def test_diff_of_two_dumps(
    ttgir: TTGIR, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pretty = ttgir("matmul_fp16", "cuda:90")
    a, b, c = tmp_path / "a.ttgir", tmp_path / "b.mlir", tmp_path / "c.ttgir"
    a.write_text(pretty)
    b.write_text(print_generic(pretty, "cuda:90", tmp_path))  # the same module, generic syntax
    c.write_text(ttgir("matmul_fp16", "cuda:90", num_warps=8))
    code, out, _ = _cli(["diff", str(a), str(b)], capsys)
    assert code == 0 and "fingerprints match" in out
    code, out, _ = _cli(["diff", str(a), str(c)], capsys)
    assert code == 1 and "changed:" in out and "hw_config_hash: num_warps: 4 -> 8" in out


def test_bad_dumps_are_one_line_usage_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ttir = tmp_path / "k.ttgir"
    ttir.write_text("module {\n  tt.func public @k() {\n    tt.return\n  }\n}\n")
    code, out, err = _cli(["fingerprint", str(ttir)], capsys)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and f"{ttir}:" in err and "not TTGIR" in err
    code, _, err = _cli(["fingerprint", str(tmp_path / "missing.ttgir")], capsys)
    assert code == 2 and "missing.ttgir" in err and err.count("\n") == 1
    opts = tmp_path / "opts.json"
    opts.write_text("[1, 2]")
    code, _, err = _cli(["fingerprint", str(ttir), "--options-json", str(opts)], capsys)
    assert code == 2 and "expected a JSON object" in err


_PROBE = """
import contextlib, io, json, sys
from triton_invariance.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    codes = [main(a) for a in {argvs!r}]
print(json.dumps([codes, sorted(m for m in ("triton", "torch") if m in sys.modules)]))
"""


def test_offline_commands_import_no_triton(ttgir: TTGIR, tmp_path: Path) -> None:
    a, b = tmp_path / "a.ttgir", tmp_path / "b.ttgir"
    a.write_text(ttgir("add", "cuda:80"))
    b.write_text(ttgir("add", "cuda:80", num_warps=8))
    argvs = [["fingerprint", str(a)], ["diff", str(a), str(b)], ["--help"]]
    done = subprocess.run(
        [sys.executable, "-c", _PROBE.format(argvs=argvs)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [[0, 1, 0], []]
