"""Hostile-input corpus: symbolic links planted in shared output trees (issue 18 §2).

A colleague (or anyone with write access to a shared results directory) plants a link where
aorta is about to write; aorta must refuse in one line, exit 2, and write nothing through it.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from aorta.cli.main import main

pytestmark = pytest.mark.usefixtures("plugin")

RECIPE = (
    "schema_version: 1\nticket: T-1\nworkload: toy\ntrials: 1\nsteps: 2\ncells:\n"
    "  - {name: a, mitigations: [none], environment: local}\n"
)


def _recipe(tmp_path: Path) -> Path:
    path = tmp_path / "r.yaml"
    path.write_text(RECIPE)
    return path


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    (line,) = err.strip().splitlines()
    return line


def _run_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    out = tmp_path / "out"
    assert (
        main(["triage", "run", "--recipe", str(_recipe(tmp_path)), "--output-dir", str(out)]) == 0
    )
    capsys.readouterr()
    (run_dir,) = (out / "T-1" / "toy").iterdir()
    return run_dir


@pytest.mark.parametrize("planted", ["T-1", "T-1/toy"])
def test_link_planted_in_the_output_tree_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], planted: str
) -> None:
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    elsewhere.mkdir()
    link = out / planted
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(elsewhere, target_is_directory=True)
    code = main(["triage", "run", "--recipe", str(_recipe(tmp_path)), "--output-dir", str(out)])
    assert code == 2
    assert "symbolic link" in _one_line(capsys)
    assert not any(elsewhere.rglob("*"))


def test_output_root_itself_may_be_a_link(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "out").symlink_to(real, target_is_directory=True)
    code = main(
        ["triage", "run", "--recipe", str(_recipe(tmp_path)), "--output-dir", str(tmp_path / "out")]
    )
    assert code == 0
    assert any((real / "T-1" / "toy").iterdir())


def test_resume_refuses_a_cell_dir_link(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = _run_dir(tmp_path, capsys)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.rmtree(run_dir / "cells" / "a")
    (run_dir / "cells" / "a").symlink_to(elsewhere, target_is_directory=True)
    assert main(["triage", "run", "--resume", str(run_dir)]) == 2
    line = _one_line(capsys)
    assert "cells/a" in line and "symbolic link" in line
    assert not any(elsewhere.iterdir())
    assert not (run_dir / ".triage.lock").exists()


def test_lock_file_link_is_not_followed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = _run_dir(tmp_path, capsys)
    victim = tmp_path / "victim"
    (run_dir / ".triage.lock").symlink_to(victim)
    assert main(["triage", "run", "--resume", str(run_dir)]) == 2
    assert ".triage.lock" in _one_line(capsys)
    assert not victim.exists()
