"""The ownership judgement all three tools share (`toolkit_core.ownership`)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from toolkit_core.ownership import ownership_problem, path_ownership_problem


def _info(uid: int, mode: int) -> os.stat_result:
    # st_mode, st_ino, st_dev, st_nlink, st_uid, st_gid, st_size, st_atime, st_mtime, st_ctime
    return os.stat_result((mode, 0, 0, 1, uid, 0, 0, 0, 0, 0))


@pytest.mark.parametrize(
    ("uid", "mode", "expected"),
    [
        (1000, 0o040700, None),
        (0, 0o100644, None),
        (1001, 0o040700, "owned by uid 1001, not by you (uid 1000) or root"),
        (1000, 0o040770, "writable by group (mode 0770)"),
        (1000, 0o100606, "writable by group and others (mode 0606)"),
        (1000, 0o120777, None),  # a link's own mode bits mean nothing
        (1001, 0o120777, "owned by uid 1001, not by you (uid 1000) or root"),
    ],
)
def test_owner_and_write_bits_decide(uid: int, mode: int, expected: str | None) -> None:
    assert ownership_problem(_info(uid, mode), 1000) == expected


def test_a_real_path_is_judged_unfollowed_and_a_missing_one_passes(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    target.write_text("{}")
    target.chmod(0o600)
    assert path_ownership_problem(target) is None
    target.chmod(0o620)
    assert path_ownership_problem(target) == "writable by group (mode 0620)"
    link = tmp_path / "link"
    link.symlink_to(target)
    assert path_ownership_problem(link) is None  # judged as itself, not through the target
    assert path_ownership_problem(tmp_path / "absent") is None
