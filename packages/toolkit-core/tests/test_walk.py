"""Writes walk their directory from "/" and follow only links no one else could have planted
(`paths.open_directory`, used by every `toolkit_core.atomic` write; issue 23).

Each attack is performed for real: a component *above* the written directory is swapped for a
link to an attacker's directory after the caller checked the path, exactly as a co-tenant with
write access to a shared directory would. The kernel's own resolution would follow that link
(asserted first, so each test can fail); the walked write refuses in one line and nothing lands
in the attacker's directory. Links an administrator or the user made in directories no one
else can write (``/home -> /gpfs/home``) keep working.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from toolkit_core.atomic import write_json_atomic, write_text_atomic
from toolkit_core.errors import ExitCode, OutputWriteError, PathError, UnsafePathError
from toolkit_core.paths import MAX_LINKS, check_no_links, open_directory

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="another user's file needs root (chown)")


def _attacker_dir(tmp_path: Path) -> Path:
    """A directory someone else controls, laid out like the victim's so a write would land."""
    attacker = tmp_path / "attacker"
    (attacker / "cells" / "c1").mkdir(parents=True)
    return attacker


def _swap(directory: Path, target: Path) -> None:
    """What a co-tenant does: move `directory` aside and put a link to `target` in its place."""
    directory.rename(directory.with_name(directory.name + ".moved"))
    directory.symlink_to(target)


def test_a_higher_component_swapped_in_a_shared_directory_is_refused(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    run = shared / "run"
    (run / "cells" / "c1").mkdir(parents=True)
    shared.chmod(0o777)  # a project directory everyone can write, no sticky bit
    target = run / "cells" / "c1" / "trial.json"
    check_no_links(target.parent, run)  # the caller's check: no link below the run dir
    attacker = _attacker_dir(tmp_path)
    _swap(run, attacker)  # ... and then the swap, two levels above the written directory
    assert (run / "cells" / "c1").resolve() == attacker / "cells" / "c1"  # the kernel follows
    with pytest.raises(UnsafePathError) as caught:
        write_json_atomic(target, {"ok": True})
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"{target}: cannot write: {run} is a symbolic link (to {attacker})")
    assert "in a directory writable by group and others (mode 0777)" in message
    # A one-line usage error that every caller of the atomic writes already reports.
    assert isinstance(caught.value, OutputWriteError) and isinstance(caught.value, PathError)
    assert caught.value.exit_code == ExitCode.USAGE
    assert list((attacker / "cells" / "c1").iterdir()) == []


@as_root
def test_a_link_in_a_directory_another_user_owns_is_refused(tmp_path: Path) -> None:
    theirs = tmp_path / "theirs"
    (theirs / "run" / "cells" / "c1").mkdir(parents=True)
    attacker = _attacker_dir(tmp_path)
    _swap(theirs / "run", attacker)
    os.chown(theirs, 4242, 4242)  # mode 0755: only uid 4242 could have put the link there
    with pytest.raises(UnsafePathError, match=r"in a directory owned by uid 4242, not by you"):
        write_text_atomic(theirs / "run" / "cells" / "c1" / "x.txt", "data")
    assert list((attacker / "cells" / "c1").iterdir()) == []


@as_root
def test_in_a_sticky_directory_only_the_users_or_roots_links_are_followed(
    tmp_path: Path,
) -> None:
    sticky = tmp_path / "tmp"
    sticky.mkdir()
    sticky.chmod(0o1777)  # as /tmp: others add names there but cannot replace ours
    real = tmp_path / "real"
    real.mkdir()
    (sticky / "mine").symlink_to(real)
    write_text_atomic(sticky / "mine" / "x.txt", "kept")
    assert (real / "x.txt").read_text() == "kept"
    attacker = _attacker_dir(tmp_path)
    (sticky / "planted").symlink_to(attacker)
    os.lchown(sticky / "planted", 4242, 4242)
    with pytest.raises(UnsafePathError, match=r"planted is a symbolic link .* owned by uid 4242"):
        write_text_atomic(sticky / "planted" / "cells" / "c1" / "x.txt", "data")
    assert list((attacker / "cells" / "c1").iterdir()) == []


def test_trusted_links_are_followed_by_the_walk(tmp_path: Path) -> None:
    # /home -> /gpfs/home, made in a directory no one else can write: a site's symlinked home.
    site = tmp_path / "site"
    (site / "gpfs" / "home" / "me").mkdir(parents=True)
    (site / "home").symlink_to(site / "gpfs" / "home")  # absolute: the walk restarts at "/"
    (site / "gpfs" / "home" / "me" / "scratch").symlink_to("../../scratch/me")  # relative, ..
    write_text_atomic(site / "home" / "me" / "results" / "a.txt", "a")
    assert (site / "gpfs" / "home" / "me" / "results" / "a.txt").read_text() == "a"
    # A missing directory behind a relative link with ".." is created where the link points.
    write_text_atomic(site / "home" / "me" / "scratch" / "run" / "b.txt", "b")
    assert (site / "gpfs" / "scratch" / "me" / "run" / "b.txt").read_text() == "b"


def test_a_relative_path_is_walked_from_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    write_text_atomic(Path("out") / "x.txt", "here")
    assert (tmp_path / "out" / "x.txt").read_text() == "here"
    fd = open_directory(Path("out") / ".." / "out")
    try:
        assert os.path.samestat(os.fstat(fd), (tmp_path / "out").stat())
    finally:
        os.close(fd)


def test_a_link_loop_is_one_line_not_a_hang(tmp_path: Path) -> None:
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("a")
    with pytest.raises(UnsafePathError) as caught:
        write_text_atomic(tmp_path / "a" / "x.txt", "x")
    assert str(caught.value) == (
        f"{tmp_path / 'a' / 'x.txt'}: cannot write: too many levels of symbolic links"
    )
    # A chain of exactly MAX_LINKS links is still followed, as the kernel would.
    (tmp_path / "real").mkdir()
    (tmp_path / f"l{MAX_LINKS}").symlink_to("real")
    for i in range(MAX_LINKS - 1, 0, -1):
        (tmp_path / f"l{i}").symlink_to(f"l{i + 1}")
    write_text_atomic(tmp_path / "l1" / "y.txt", "y")
    assert (tmp_path / "real" / "y.txt").read_text() == "y"


def test_a_file_where_a_directory_goes_is_the_ordinary_write_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(OutputWriteError) as caught:
        write_text_atomic(tmp_path / "file" / "sub" / "x.txt", "x")
    assert not isinstance(caught.value, UnsafePathError)
    assert (
        str(caught.value) == f"{tmp_path / 'file' / 'sub' / 'x.txt'}: cannot write: Not a directory"
    )
