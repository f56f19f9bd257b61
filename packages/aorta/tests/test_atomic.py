"""Atomic, never-overwriting writes and fresh run directories."""

from __future__ import annotations

import json
import math
import os
import stat
import subprocess
import sys
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


def _mode_written(tmp_path: Path, umask: int, call: str, env: dict[str, str]) -> str:
    code = (
        f"import os, sys; os.umask({umask:#o})\n"
        "from pathlib import Path\n"
        "from aorta.atomic import write_bytes_atomic\n"
        f"path = write_bytes_atomic(Path(sys.argv[1]) / {call})\n"
        "print(oct(path.stat().st_mode & 0o777))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, **env},
    )
    return done.stdout.strip()


@pytest.mark.parametrize("umask", [0o022, 0o002, 0o000])
def test_reports_are_readable_but_never_writable_by_others(tmp_path: Path, umask: int) -> None:
    # A group-writable umask must not make the run's files writable by the group: a resume
    # refuses state others can write (strict_modes).
    assert _mode_written(tmp_path, umask, "'x.png', b'data', shared=True", {}) == "0o644"
    assert (tmp_path / "x.png").read_bytes() == b"data"


@pytest.mark.parametrize(("group", "expected"), [("", "0o600"), ("1", "0o640")])
def test_files_holding_environments_are_owner_only_unless_the_run_is_for_a_group(
    tmp_path: Path, group: str, expected: str
) -> None:
    env = {"AORTA_GROUP_READABLE": group}
    assert _mode_written(tmp_path, 0o000, "'env.json', b'{}'", env) == expected


def test_run_directories_are_owner_only(tmp_path: Path) -> None:
    run_dir = create_run_dir(tmp_path / "out", "stamp")
    assert stat.S_IMODE(run_dir.stat().st_mode) & 0o077 == 0
