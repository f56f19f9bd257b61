"""Atomic, never-overwriting writes and fresh run directories."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from aorta.atomic import create_run_dir, write_json_atomic, write_text_atomic
from aorta.errors import AortaUsageError, OutputExistsError


def test_existing_file_is_kept_unless_overwrite_is_asked(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "result.json"
    write_json_atomic(target, {"a": 1})
    with pytest.raises(OutputExistsError, match="refusing to overwrite"):
        write_json_atomic(target, {"a": 2})
    assert json.loads(target.read_text()) == {"a": 1}
    write_text_atomic(target, "replaced", overwrite=True)
    assert target.read_text() == "replaced"
    assert [p.name for p in target.parent.iterdir()] == ["result.json"]  # no temp files left


def test_non_finite_numbers_are_refused_and_leave_nothing(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="Out of range float"):
        write_json_atomic(tmp_path / "bad.json", {"loss": math.nan})
    assert list(tmp_path.iterdir()) == []


def test_run_directories_are_never_reused(tmp_path: Path) -> None:
    first = create_run_dir(tmp_path / "fsdp", "2026-01-01T00-00-00")
    second = create_run_dir(tmp_path / "fsdp", "2026-01-01T00-00-00")
    assert first.name == "2026-01-01T00-00-00"
    assert second.name == "2026-01-01T00-00-00-1"
    assert first.is_dir() and second.is_dir()


def test_run_directory_under_a_file_is_a_usage_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(AortaUsageError, match="cannot create a run directory under"):
        create_run_dir(blocker / "fsdp", "stamp")
