"""Nothing unbounded (issue 23 §3): format widths, many cells, odd numbers and paths.

Each case runs the real `aorta triage run ... --dry-run` in-process on a hostile recipe and
must answer within seconds: exit 2 with one line (no traceback, no gigabytes), or exit 0.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
import yaml

from aorta.cli.main import main

pytestmark = pytest.mark.usefixtures("plugin")


def _recipe(tmp_path: Path, workload: object, cells: int = 1, **extra: object) -> Path:
    path = tmp_path / "recipe.yaml"
    recipe = {
        "schema_version": 1,
        "workload": workload,
        "trials": 1,
        "steps": 2,
        "cells": [
            {"name": f"c{i}", "mitigations": ["none"], "environment": "local"} for i in range(cells)
        ],
        **extra,
    }
    path.write_text(yaml.safe_dump(recipe))
    return path


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    (line,) = err.strip().splitlines()
    assert len(line) < 1000, line[:200]
    return line


@pytest.mark.parametrize(
    ("argument", "expected"),
    [
        ("{seed:>2000000000}", "width or precision in {seed:>2000000000} is above the limit"),
        ("{seed:>" + "9" * 13 + "}", "is above the limit of 1000"),
        ("{cell:." + "9" * 5000 + "}", "is above the limit of 1000"),  # past int()'s digit cap
        ("{seed:>{steps}}", "nested field in the format spec"),
    ],
)
def test_a_huge_format_width_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argument: str, expected: str
) -> None:
    path = _recipe(tmp_path, {"command": [sys.executable, "-c", "pass", argument]})
    started = time.monotonic()
    assert main(["triage", "run", "--recipe", str(path), "--dry-run"]) == 2
    assert time.monotonic() - started < 5
    line = _one_line(capsys)
    assert expected in line and "workload.command[3]" in line and str(path) in line


def test_a_modest_format_width_still_renders(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _recipe(tmp_path, {"command": [sys.executable, "-c", "pass", "{seed:>08}", "{cell:.3}"]})
    assert main(["triage", "run", "--recipe", str(path), "--dry-run"]) == 0
    assert "00000000" in capsys.readouterr().out


def _many_cells_dry_run(tmp_path: Path, cells: int) -> float:
    """CPU seconds of a real `--dry-run` of a JSON recipe with `cells` distinct cells."""
    path = tmp_path / f"cells_{cells}.json"
    cell_list = [
        {"name": f"c{i}", "mitigations": ["none"], "environment": "local"} for i in range(cells)
    ]
    recipe = {"schema_version": 1, "workload": {"command": [sys.executable, "-c", "pass"]},
              "trials": 1, "steps": 2, "cells": cell_list}  # fmt: skip
    path.write_text(json.dumps(recipe))
    started = time.process_time()
    assert main(["triage", "run", "--recipe", str(path), "--dry-run"]) == 0
    return time.process_time() - started


def test_thirty_thousand_cells_dry_run_is_linear(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The duplicate-name checks were quadratic: 30,000 cells took 115 s, 10 x the cells took
    # ~75 x the time. CPU time (not wall time) so a busy machine does not make this flaky.
    small = _many_cells_dry_run(tmp_path, 3_000)
    large = _many_cells_dry_run(tmp_path, 30_000)
    capsys.readouterr()
    assert large < 30, f"30,000 cells took {large:.1f} s of CPU"
    assert large < 40 * max(small, 0.05), f"3,000 cells: {small:.2f} s, 30,000: {large:.2f} s"


def test_duplicate_cell_names_among_many_are_still_found(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "dup.json"
    cells = [
        {"name": f"c{i % 9999}", "mitigations": ["none"], "environment": "local"}
        for i in range(10_000)
    ]
    recipe = {"schema_version": 1, "workload": "toy", "trials": 1, "steps": 2, "cells": cells}
    path.write_text(json.dumps(recipe))
    assert main(["triage", "run", "--recipe", str(path), "--dry-run"]) == 2
    line = _one_line(capsys)
    assert "cells[9999].name: expected a unique cell name" in line and "c0" in line
