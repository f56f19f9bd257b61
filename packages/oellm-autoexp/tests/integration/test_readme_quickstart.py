"""The root README's oellm-autoexp quickstart, line by line, against the `slurm_cluster` fixture.

The README's first two lines start a cluster (the fixture stands in for them) and its last stops
it; every line in between runs as written, from a directory where `packages/` is the repository's.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slurm

REPO = Path(__file__).resolve().parents[4]
MARKER = "<!-- autoexp-quickstart:"


def quickstart_lines() -> list[str]:
    """The shell lines of the README block after the quickstart marker."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    block = text[text.index(MARKER) :]
    match = re.search(r"```bash\n(.*?)```", block, re.DOTALL)
    assert match is not None, "README quickstart block not found"
    return [line for line in match.group(1).splitlines() if line.strip()]


def test_the_readme_quickstart_runs_as_written(slurm_cluster: Any, tmp_path: Path) -> None:
    lines = quickstart_lines()
    assert "-m oellm_autoexp.testing.slurm_cluster" in lines[0] and "SLURM_CONF" in lines[1]
    assert lines[-1].startswith("kill %1")
    body = lines[2:-1]
    assert [line.split()[1] for line in body] == ["submit", "monitor", "status"]
    (tmp_path / "packages").symlink_to(REPO / "packages")
    bin_dir = Path(sys.executable).parent
    script = "\n".join(line.replace(".venv/bin/", f"{bin_dir}/") for line in body)
    done = subprocess.run(
        ["bash", "-e", "-c", script],
        cwd=tmp_path,
        env={**os.environ, **slurm_cluster.env},
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    submitted = re.search(r"session (\w+): 4 job\(s\) submitted", done.stdout)
    assert submitted is not None, done.stdout
    rows = [
        [cell.strip() for cell in line.split("│")]
        for line in done.stdout.splitlines()
        if line.startswith(submitted.group(1))
    ]
    # The monitor's final table and then status's: the same four completed array tasks.
    assert len(rows) == 8
    assert {(row[3], row[4], row[6]) for row in rows} == {("completed", "COMPLETED", "success/-")}
    assert len({row[2] for row in rows}) == 4
    assert all(re.fullmatch(r"\d+_[0-3]", row[2]) for row in rows)
    assert len(list((tmp_path / "autoexp_runs" / "hello" / "logs").glob("*.out"))) == 4
