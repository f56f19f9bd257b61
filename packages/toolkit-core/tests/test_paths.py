"""Symlink-safe directories and bounded reads of regular files (`toolkit_core.paths`)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from toolkit_core.errors import FileTooLargeError, MissingFileError, PathError, UsageError
from toolkit_core.paths import check_no_links, make_dirs_inside, read_regular_bytes


def test_directories_are_created_one_component_at_a_time(tmp_path: Path) -> None:
    root = tmp_path / "out"
    made = make_dirs_inside(root / "a" / "b" / "c", root, mode=0o700)
    assert made.is_dir()
    assert (root / "a").stat().st_mode & 0o777 == 0o700


def test_a_planted_symlink_below_the_root_is_refused_and_nothing_is_written_through_it(
    tmp_path: Path,
) -> None:
    root, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    root.mkdir()
    elsewhere.mkdir()
    (root / "plans").symlink_to(elsewhere)
    with pytest.raises(PathError) as caught:
        make_dirs_inside(root / "plans" / "p1", root)
    assert isinstance(caught.value, UsageError)
    assert str(caught.value).startswith(f"{root / 'plans'} is a symlink (to {elsewhere})")
    assert list(elsewhere.iterdir()) == []
    with pytest.raises(PathError, match="symbolic link"):
        check_no_links(root / "plans" / "later", root)


def test_the_root_itself_may_be_a_link(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "root").symlink_to(real)
    make_dirs_inside(tmp_path / "root" / "x", tmp_path / "root")
    assert (real / "x").is_dir()


def test_a_file_in_the_way_and_a_path_outside_the_root_are_refused(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("")
    with pytest.raises(PathError, match="exists and is not a directory"):
        make_dirs_inside(tmp_path / "f" / "x", tmp_path)
    with pytest.raises(PathError, match="outside the output root"):
        make_dirs_inside(tmp_path.parent / "x", tmp_path)


def test_a_regular_file_is_read_up_to_its_limit(tmp_path: Path) -> None:
    path = tmp_path / "a.yaml"
    path.write_bytes(b"x" * 10)
    assert read_regular_bytes(path, max_bytes=10) == b"x" * 10
    with pytest.raises(FileTooLargeError) as caught:
        read_regular_bytes(path, max_bytes=9)
    assert (caught.value.size, caught.value.limit) == (10, 9)


def test_a_fifo_a_device_and_a_missing_file_are_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # no writer: a blocking open or read would hang here
    with pytest.raises(PathError, match="not a regular file"):
        read_regular_bytes(fifo, max_bytes=100)
    (tmp_path / "zero").symlink_to("/dev/zero")
    with pytest.raises(PathError, match="not a regular file"):
        read_regular_bytes(tmp_path / "zero", max_bytes=None)
    with pytest.raises(MissingFileError, match="cannot read"):
        read_regular_bytes(tmp_path / "absent", max_bytes=None)
