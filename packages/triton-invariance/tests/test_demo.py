"""The commit / match / mismatch demo, run exactly as a user runs it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

DEMO = Path(__file__).parents[1] / "examples" / "demo_commit_compare.py"


@pytest.mark.slow
def test_demo_commits_matches_then_reports_the_one_character_change(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(DEMO), "--workdir", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "== 1. TRITON_INVARIANCE_COMMIT=1 (exit 0) ==" in out
    assert "== 2. TRITON_INVARIANCE_COMPARE=1, unchanged kernel (exit 0) ==" in out
    assert "== 3. TRITON_INVARIANCE_COMPARE=1, changed kernel (exit 1) ==" in out
    assert "NumericalInvarianceMismatchError" in out
    assert "changed: computation_dag_hash" in out and "arith.subf" in out
    assert out.rstrip().endswith("demo passed: commit, match, mismatch")
    assert len(list((tmp_path / "baselines" / "numerical_invariance").glob("*.json"))) == 1
