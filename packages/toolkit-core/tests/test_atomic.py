"""Atomic, durable, never-overwriting writes and fresh run directories (`toolkit_core.atomic`)."""

from __future__ import annotations

import json
import math
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from toolkit_core.atomic import (
    create_run_dir,
    open_text_atomic,
    write_json_atomic,
    write_text_atomic,
)
from toolkit_core.errors import ExitCode, OutputExistsError, OutputWriteError, UsageError


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
    with pytest.raises(UsageError, match="cannot create a run directory under"):
        create_run_dir(blocker / "fsdp", "stamp")


def test_results_get_the_ordinary_file_mode_not_the_temp_files_0600(tmp_path: Path) -> None:
    code = (
        "import os, sys; os.umask(0o022)\n"
        "from pathlib import Path\n"
        "from toolkit_core.atomic import write_bytes_atomic\n"
        "path = write_bytes_atomic(Path(sys.argv[1]) / 'x.png', b'data')\n"
        "print(oct(path.stat().st_mode & 0o777))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "0o644"
    assert (tmp_path / "x.png").read_bytes() == b"data"


def test_the_rename_is_made_durable_by_an_fsync_of_the_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # os.fsync is the boundary to the kernel: record what kind of file each call synced.
    synced: list[str] = []
    real_fsync = os.fsync

    def spy(fd: int) -> None:
        synced.append("dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", spy)
    write_text_atomic(tmp_path / "a.txt", "x")
    assert synced == ["file", "dir"]
    synced.clear()
    write_text_atomic(tmp_path / "b.txt", "x", fsync=False)  # a batch: the caller syncs once
    assert synced == []


def test_a_failed_write_is_one_usage_error_that_is_still_an_oserror(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(OutputWriteError) as caught:
        write_text_atomic(blocker / "result.json", "{}")
    assert isinstance(caught.value, OSError) and caught.value.errno is not None
    assert str(caught.value).startswith(f"{blocker / 'result.json'}: cannot write: ")
    assert caught.value.exit_code == ExitCode.USAGE
    assert blocker.read_text() == "x"


def test_overwrite_replaces_and_the_mode_can_be_chosen(tmp_path: Path) -> None:
    target = tmp_path / "run.sh"
    write_text_atomic(target, "old", mode=0o700)
    write_text_atomic(target, "new", overwrite=True, mode=0o700)
    assert target.read_text() == "new"
    assert target.stat().st_mode & 0o777 == 0o700


def _swap_for_link(directory: Path, target: Path) -> Path:
    """Move `directory` aside and plant a link to `target` under its name; returns the moved dir."""
    moved = directory.with_name(directory.name + ".moved")
    directory.rename(moved)
    directory.symlink_to(target)
    return moved


def _as_a_co_tenant(link: Path, monkeypatch: pytest.MonkeyPatch) -> int:
    """Make `link` another user's, as a co-tenant's planted link is; returns that uid."""
    if os.geteuid() == 0:
        os.lchown(link, 4242, 4242)
        return 4242
    # Without root no file can be given away: this process becomes someone else instead.
    me = os.geteuid()
    monkeypatch.setattr(os, "geteuid", lambda: me + 1)
    return me


def test_a_directory_swapped_for_a_planted_link_after_the_check_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cell = tmp_path / "run" / "cells" / "c1"
    cell.mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert cell.is_dir() and not cell.is_symlink()  # what the caller checked
    _swap_for_link(cell, elsewhere)
    owner = _as_a_co_tenant(cell, monkeypatch)
    with pytest.raises(OutputWriteError) as caught:
        write_json_atomic(cell / "trial.json", {"ok": True})
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(
        f"{cell / 'trial.json'}: cannot write: {cell} is a symbolic link "
        f"(to {elsewhere}) owned by uid {owner}, not by you"
    )
    assert caught.value.exit_code == ExitCode.USAGE
    assert list(elsewhere.iterdir()) == []


def test_a_swap_during_the_write_cannot_redirect_it(tmp_path: Path) -> None:
    cell = tmp_path / "cells" / "c1"
    cell.mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    with open_text_atomic(cell / "trial.json", overwrite=False) as handle:
        handle.write("{}\n")
        # The directory was opened before the block: the rename and link go through it.
        moved = _swap_for_link(cell, elsewhere)
    assert list(elsewhere.iterdir()) == []
    assert [p.name for p in moved.iterdir()] == ["trial.json"]
    assert (moved / "trial.json").read_text() == "{}\n"


def test_the_users_own_links_are_followed(tmp_path: Path) -> None:
    real = tmp_path / "lustre"
    real.mkdir()
    (tmp_path / "scratch").symlink_to(real)  # a link above the written directory
    write_text_atomic(tmp_path / "scratch" / "run" / "x.txt", "kept")
    assert (real / "run" / "x.txt").read_text() == "kept"
    (tmp_path / "results").symlink_to("lustre/run")  # the written directory itself, relative
    write_text_atomic(tmp_path / "results" / "y.txt", "also")
    assert (real / "run" / "y.txt").read_text() == "also"
