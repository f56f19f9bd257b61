"""End to end on a real GPU: a real autotuned launch commits, then compares, in new processes.

Skipped where no GPU is visible (root conftest). Nothing here is simulated: Triton's own
driver launches the kernel and its benchmarker times every config.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

PROGRAM = """
import torch, triton, triton.language as tl

@triton.autotune(
    configs=[
        triton.Config({"BLOCK": 256}, num_warps=4),
        triton.Config({"BLOCK": 1024}, num_warps=8),
    ],
    key=["n"],
)
@triton.jit
def gpu_scaled_add(x_ptr, y_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x * alpha + y, mask=mask)

n = 1 << 20
x = torch.randn(n, device="cuda"); y = torch.randn(n, device="cuda"); out = torch.empty_like(x)
gpu_scaled_add[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, out, n, 2.0)
torch.testing.assert_close(out, x * 2.0 + y)
print("winner", gpu_scaled_add.best_config.num_warps)
"""


def _run(workdir: Path, source: str, env_var: str, *also: str) -> subprocess.CompletedProcess[str]:
    """Run `source` as a new process with `env_var` (and the variables `also`) set to 1."""
    (workdir / "prog.py").write_text(source)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRITON_INVARIANCE_")}
    env.update({name: "1" for name in (env_var, *also)})
    env["TRITON_CACHE_DIR"] = str(workdir / "tc")
    return subprocess.run(
        [sys.executable, "prog.py"],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.mark.gpu
def test_real_autotuned_launch_commits_matches_and_detects_a_change(tmp_path: Path) -> None:
    commit = _run(tmp_path, PROGRAM, "TRITON_INVARIANCE_COMMIT")
    assert commit.returncode == 0, commit.stderr
    assert ": created," in commit.stderr
    files = list((tmp_path / "baselines" / "numerical_invariance").glob("gpu_scaled_add_*.json"))
    assert len(files) == 1
    compare = _run(tmp_path, PROGRAM, "TRITON_INVARIANCE_COMPARE")
    # A real benchmark may pick the other config this time; the report then says so.
    if compare.returncode != 0:
        assert "only the winner changed" in compare.stderr, compare.stderr
    else:
        assert ": match," in compare.stderr
    changed = PROGRAM.replace("x * alpha + y", "x * alpha - y").replace(
        "assert_close(out, x * 2.0 + y)", "assert_close(out, x * 2.0 - y)"
    )
    mismatch = _run(tmp_path, changed, "TRITON_INVARIANCE_COMPARE")
    assert mismatch.returncode != 0
    assert "NumericalInvarianceMismatchError" in mismatch.stderr
    assert "arith.subf" in mismatch.stderr


PLAIN_PROGRAM = """
import torch, triton, triton.language as tl

@triton.jit
def gpu_plain_scale(x_ptr, out_ptr, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * scale, mask=mask)

n = 4096
x = torch.randn(n, device="cuda"); out = torch.empty_like(x)
gpu_plain_scale[(triton.cdiv(n, 1024),)](x, out, n, SCALE, BLOCK=1024)
torch.cuda.synchronize()
torch.testing.assert_close(out, x * SCALE)
"""


def _run_with_scalars(workdir: Path, scale: str, env_var: str) -> subprocess.CompletedProcess[str]:
    source = PLAIN_PROGRAM.replace("SCALE", scale)
    return _run(workdir, source, env_var, "TRITON_INVARIANCE_RECORD_SCALARS")


@pytest.mark.gpu
def test_real_plain_kernel_is_committed_at_its_launch_and_a_changed_scalar_is_caught(
    tmp_path: Path,
) -> None:
    # A plain @triton.jit kernel (no autotuner) under the hooks, with its float scalar recorded:
    # the same launch matches; the same kernel launched with another `scale` is named.
    commit = _run_with_scalars(tmp_path, "0.5", "TRITON_INVARIANCE_COMMIT")
    assert commit.returncode == 0, commit.stderr
    assert ": created," in commit.stderr
    files = list((tmp_path / "baselines" / "numerical_invariance").glob("gpu_plain_scale_*.json"))
    assert len(files) == 1
    same = _run_with_scalars(tmp_path, "0.5", "TRITON_INVARIANCE_COMPARE")
    assert same.returncode == 0, same.stderr
    assert ": match," in same.stderr
    rescaled = _run_with_scalars(tmp_path, "0.25", "TRITON_INVARIANCE_COMPARE")
    assert rescaled.returncode != 0
    assert "LaunchScalarsChangedError" in rescaled.stderr
    assert "0.5 -> 0.25" in rescaled.stderr, rescaled.stderr
