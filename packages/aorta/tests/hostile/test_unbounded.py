"""Nothing unbounded (issue 23 §3): format widths, many cells, odd numbers and paths.

Each case runs the real `aorta triage run ... --dry-run` in-process on a hostile recipe and
must answer within seconds: exit 2 with one line (no traceback, no gigabytes), or exit 0.
"""

from __future__ import annotations

import errno
import json
import os
import sys
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
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
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    bounded: Callable[..., AbstractContextManager[None]],
    argument: str,
    expected: str,
) -> None:
    path = _recipe(tmp_path, {"command": [sys.executable, "-c", "pass", argument]})
    with bounded(cpu_s=5):
        assert main(["triage", "run", "--recipe", str(path), "--dry-run"]) == 2
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


def test_a_confound_threshold_of_400_digits_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _recipe(tmp_path, "toy", confound={"threshold": int("9" * 400)})
    assert main(["triage", "run", "--recipe", str(path), "--dry-run"]) == 2
    line = _one_line(capsys)
    assert "confound.threshold: expected a finite number >= 1.0" in line and str(path) in line


def _full_disk_for(monkeypatch: pytest.MonkeyPatch, prefix: str) -> None:
    """Fault injection at the OS boundary: fsync of a temp file named `prefix...` fails with
    ENOSPC, as it does on a full (or over-quota, delayed-allocation) file system."""
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        if Path(f"/proc/self/fd/{fd}").readlink().name.startswith(prefix):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)


def _command_run(tmp_path: Path) -> Path:
    """A real one-trial command-workload run; its run directory."""
    path = _recipe(tmp_path, {"command": [sys.executable, "-c", "print('step 1 time 5 ms')"]})
    assert main(["triage", "run", "--recipe", str(path), "--output-dir", str(tmp_path / "o")]) < 2
    (run_dir,) = [p.parent for p in (tmp_path / "o").rglob("recipe.resolved.yaml")]
    return run_dir


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc to name an fd")
def test_triage_matrix_on_a_full_disk_is_one_line_and_keeps_the_old_matrix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir = _command_run(tmp_path)
    old_md = (run_dir / "matrix.md").read_text()
    capsys.readouterr()
    _full_disk_for(monkeypatch, ".matrix.md.")
    assert main(["triage", "matrix", str(run_dir), "--confound-threshold", "2"]) == 2
    line = _one_line(capsys)
    assert str(run_dir / "matrix.md") in line and "No space left on device" in line
    assert (run_dir / "matrix.md").read_text() == old_md  # never left without a matrix
    (archive,) = (run_dir / "previous").iterdir()
    assert (archive / "matrix.md").read_text() == old_md
    assert not [p for p in run_dir.iterdir() if p.name.endswith(".tmp")]  # no stray temp file


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc to name an fd")
def test_triage_run_on_a_full_disk_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _full_disk_for(monkeypatch, ".trial_0.json.")
    path = _recipe(tmp_path, {"command": [sys.executable, "-c", "print('step 1 time 5 ms')"]})
    code = main(["triage", "run", "--recipe", str(path), "--output-dir", str(tmp_path / "o")])
    line = _one_line(capsys)
    assert code == 2
    assert "trial_0.json: cannot write: No space left on device" in line


def test_a_recipe_that_is_a_directory_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "dir_instead.yaml"
    path.mkdir()
    assert main(["triage", "run", "--recipe", str(path), "--dry-run"]) == 2
    line = _one_line(capsys)
    assert str(path) in line and "not a regular file" in line


@pytest.mark.parametrize("planted", ["cells/c0/trial_0.json", "host_env.json"])
def test_triage_matrix_with_a_directory_in_place_of_a_result_file_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], planted: str
) -> None:
    run_dir = _command_run(tmp_path)
    target = run_dir / planted
    target.unlink()
    target.mkdir()
    capsys.readouterr()
    assert main(["triage", "matrix", str(run_dir)]) == 2
    line = _one_line(capsys)
    assert str(target) in line and "not a regular file" in line
