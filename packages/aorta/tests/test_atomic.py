"""aorta's adapter over toolkit_core.atomic: its usage error and its file modes."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from aorta.atomic import create_run_dir
from aorta.errors import AortaUsageError

# What the writes themselves do (never overwrite, no temp files left, non-finite numbers
# refused, run directories never reused) is toolkit_core.atomic's, tested in
# packages/toolkit-core/tests/test_atomic.py; here: what aorta's adapter adds (its error type,
# its file modes).


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
