"""Demo: commit a baseline, compare (match), change one character, compare (mismatch).

Runs `kernel_program.py` (an autotuned kernel that knows nothing about triton-invariance) in
fresh interpreters, activated only through environment variables:

1. TRITON_INVARIANCE_COMMIT=1   -> the winner's fingerprint is written as a baseline
2. TRITON_INVARIANCE_COMPARE=1  -> same code, warm Triton cache: the fingerprints match
3. `x * alpha + y` -> `x * alpha - y`, TRITON_INVARIANCE_COMPARE=1 -> the run fails with
   NumericalInvarianceMismatchError naming the changed op

Everything happens in a scratch directory (`--workdir`, default: a new temp dir). Exit 0 when
all three steps behave as described, 1 otherwise.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROGRAM = "kernel_program.py"
ORIGINAL, CHANGED = "x * alpha + y", "x * alpha - y"


def _run(workdir: Path, env_var: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRITON_INVARIANCE_")}
    env.update({env_var: "1", "TRITON_CACHE_DIR": str(workdir / "triton-cache")})
    env.setdefault("TRITON_DEFAULT_FP_FUSION", "1")  # silences Triton 3.9's default warning
    return subprocess.run(
        [sys.executable, PROGRAM], cwd=workdir, env=env, capture_output=True, text=True, check=False
    )


def _show(title: str, done: subprocess.CompletedProcess[str], tail: int = 6) -> None:
    print(f"\n== {title} (exit {done.returncode}) ==")
    lines = (done.stdout + done.stderr).strip().splitlines()
    for line in lines[-tail:]:
        print(f"   {line}")


def main() -> int:
    """Run the three steps and check each one's outcome."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="triton-invariance-demo-"))
    workdir.mkdir(parents=True, exist_ok=True)
    shutil.copy(HERE / PROGRAM, workdir / PROGRAM)
    print(f"working in {workdir}")

    commit = _run(workdir, "TRITON_INVARIANCE_COMMIT")
    _show("1. TRITON_INVARIANCE_COMMIT=1", commit)
    baselines = sorted((workdir / "baselines" / "numerical_invariance").glob("*.json"))
    print(f"   baselines: {[p.name for p in baselines]}")

    match = _run(workdir, "TRITON_INVARIANCE_COMPARE")
    _show("2. TRITON_INVARIANCE_COMPARE=1, unchanged kernel", match)

    source = (workdir / PROGRAM).read_text()
    (workdir / PROGRAM).write_text(source.replace(ORIGINAL, CHANGED, 1))
    print(f"\n-- edited {PROGRAM}: `{ORIGINAL}` -> `{CHANGED}`")
    mismatch = _run(workdir, "TRITON_INVARIANCE_COMPARE")
    _show("3. TRITON_INVARIANCE_COMPARE=1, changed kernel", mismatch, tail=4)

    ok = (
        commit.returncode == 0
        and "created" in commit.stderr
        and len(baselines) == 1
        and match.returncode == 0
        and ": match," in match.stderr
        and mismatch.returncode != 0
        and "NumericalInvarianceMismatchError" in mismatch.stderr
        and "arith.subf" in mismatch.stderr
    )
    print("\ndemo " + ("passed: commit, match, mismatch" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
