"""Keeps the loader fuzzer (fuzz/loaders.py, run by `make fuzz`) from rotting: a short real run."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

DRIVER = Path(__file__).resolve().parents[3] / "fuzz" / "loaders.py"


@pytest.mark.slow
def test_fuzz_driver_runs_examples_against_the_baseline_loader(tmp_path: Path) -> None:
    findings = tmp_path / "findings"
    done = subprocess.run(
        [
            sys.executable,
            str(DRIVER),
            "--seconds",
            "3",
            "--loader",
            "baseline",
            "--findings",
            str(findings),
        ],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    summary = re.search(r"^baseline: (\d+) examples in 3 s, 0 finding\(s\)", done.stdout, re.M)
    assert summary is not None, done.stdout
    # At least one whole batch (the driver runs hypothesis in batches of 10 and checks its
    # deadline between them; under a loaded CI only the first batch may fit in 3 s): the worker
    # really answered, example after example.
    assert int(summary.group(1)) >= 10
    assert not findings.exists()
