"""Paths in shared directories: directories opened and created without following planted
symlinks, and bounded reads of regular files.

Output trees (run directories, plans, logs, session state) live where colleagues can write too.
A link planted at ``<root>/plans -> /elsewhere`` would make the next write land outside the
root, and a FIFO or ``/dev/zero`` planted under an input's name would hang or exhaust a reader.
Errors are `PathError`s with the path and the problem apart, so a tool can re-raise them as its
own error type naming the config key involved.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path

from toolkit_core.errors import FileTooLargeError, MissingFileError, PathError, UnsafePathError
from toolkit_core.ownership import ownership_problem
from toolkit_core.text import one_line

__all__ = ["check_no_links", "make_dirs_inside", "open_directory", "read_regular_bytes"]

# As the kernel's limit on links followed while resolving one path (MAXSYMLINKS).
MAX_LINKS = 40
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


def _below(path: Path, root: Path) -> list[str]:
    normal, base = Path(os.path.normpath(path)), Path(os.path.normpath(root))
    try:
        return list(normal.relative_to(base).parts)
    except ValueError:
        raise PathError(path, f"is outside the output root {root}", sentence=True) from None


def make_dirs_inside(path: Path, root: Path, *, mode: int = 0o777) -> Path:
    """`mkdir -p path`, refusing a symlink (or a non-directory) at any component below `root`.

    Each component is created (or checked with `lstat`) before anything is created inside it;
    `root` itself is the user's own choice and may be a link (``/scratch/me -> /lustre/...``).
    `mode` applies to the directories created here (umask still applies). Returns `path`.
    """
    parts = _below(path, root)
    Path(root).mkdir(parents=True, exist_ok=True)
    current = Path(os.path.normpath(root))
    for part in parts:
        current = current / part
        try:
            current.mkdir(mode)  # no parents=True: mkdir never follows a link at `current`
            continue
        except FileExistsError:
            pass
        _require_real_dir(current, root)
    return path


def check_no_links(path: Path, root: Path) -> None:
    """Refuse `path` if an existing component below `root` is a symlink or not a directory.

    For trees created later by someone else (a job's own output directory): checked now.
    """
    current = Path(os.path.normpath(root))
    for part in _below(path, root):
        current = current / part
        if not os.path.lexists(current):
            return
        _require_real_dir(current, root)


def _require_real_dir(path: Path, root: Path) -> None:
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode):
        raise PathError(
            path,
            f"is a symlink (to {path.readlink()}); refusing to write through a symbolic link "
            f"below {root}: remove the link",
            sentence=True,
        )
    if not stat.S_ISDIR(info.st_mode):
        raise PathError(path, "exists and is not a directory", sentence=True)


def read_regular_bytes(path: Path, *, max_bytes: int | None) -> bytes:
    """The bytes of `path` if it is a regular file (or a link to one) of at most `max_bytes`.

    Opened non-blocking and checked with fstat on the open descriptor (no race with a swapped
    path) before reading: a FIFO, a device (``/dev/zero``) or a directory is a `PathError`
    instead of a hang, an endless read or a traceback. A file that grows past `max_bytes`
    while being read is refused too: at most `max_bytes + 1` bytes are ever read.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError as exc:
        raise MissingFileError(path, f"cannot read: {exc.strerror or exc}") from None
    except OSError as exc:
        raise PathError(path, f"cannot read: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise PathError(path, "not a regular file (a FIFO, device or directory)")
        if max_bytes is not None and info.st_size > max_bytes:
            raise FileTooLargeError(path, info.st_size, max_bytes)
        chunks = []
        budget = None if max_bytes is None else max_bytes + 1
        while budget is None or budget > 0:
            chunk = os.read(fd, 1 << 24 if budget is None else min(1 << 24, budget))
            if not chunk:
                break
            chunks.append(chunk)
            if budget is not None:
                budget -= len(chunk)
    except OSError as exc:
        raise PathError(path, f"cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if max_bytes is not None and len(data) > max_bytes:
        raise FileTooLargeError(path, len(data), max_bytes)
    return data


def open_directory(
    path: Path, *, create: bool = False, mode: int = 0o777, naming: Path | None = None
) -> int:
    """A descriptor of directory `path`, walked from "/" (or the working directory, for a
    relative path) one component at a time, each opened relative to the one before with
    ``O_DIRECTORY | O_NOFOLLOW``; with `create`, missing components are made (`mode`, less
    the umask) the same way, `mkdir -p` style.

    The kernel's own resolution follows any link anywhere in the path, so a component swapped
    for a link to someone else's directory after a caller's check would redirect the write.
    Here every component is held by descriptor while the next is opened, and a symbolic link
    is followed only when it is `trusted` (see `link_problem`): its target is read from the
    very link judged, and walked the same way (an absolute target from "/", a relative one
    from the link's directory, at most `MAX_LINKS` links). An untrusted link is
    `UnsafePathError`, one line naming `naming` (the file to be written; default `path`) and
    the component; other failures are the `OSError` of the component's open. The caller
    closes the descriptor.
    """
    named = path if naming is None else naming
    text = os.fspath(path)
    absolute = text.startswith("/")
    pending = _names(text)
    fd = os.open("/" if absolute else ".", _DIR_FLAGS)
    shown = Path("/" if absolute else ".")  # the walked path so far, for messages
    links = 0
    try:
        while pending:
            name = pending.pop()
            step = _step(fd, name, shown / name, named, create=create, mode=mode)
            if isinstance(step, int):
                os.close(fd)
                fd = step
                shown = shown.parent if name == ".." else shown / name
                continue
            links += 1
            if links > MAX_LINKS:
                raise UnsafePathError(
                    named, "cannot write: too many levels of symbolic links", errno.ELOOP
                )
            pending.extend(_names(step))
            if step.startswith("/"):
                os.close(fd)
                fd = -1
                fd = os.open("/", _DIR_FLAGS)
                shown = Path("/")
        return fd
    except BaseException:
        if fd >= 0:
            os.close(fd)
        raise


def _names(path: str) -> list[str]:
    """The components of `path` to walk, last first (a stack)."""
    return [name for name in reversed(path.split("/")) if name not in ("", ".")]


def _step(
    dir_fd: int, name: str, shown: Path, named: Path, *, create: bool, mode: int
) -> int | str:
    """The descriptor of directory `name` in `dir_fd`, or the target of the trusted link there
    (made first if missing and `create`)."""
    flags = _DIR_FLAGS | os.O_NOFOLLOW
    try:
        try:
            return os.open(name, flags, dir_fd=dir_fd)
        except FileNotFoundError:
            if not create:
                raise
        # Made meanwhile by someone else: the open below judges what is there.
        with contextlib.suppress(FileExistsError):
            os.mkdir(name, mode, dir_fd=dir_fd)
        return os.open(name, flags, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
            raise
        refused = exc
    return _trusted_target(dir_fd, name, shown, named, refused)


def _trusted_target(dir_fd: int, name: str, shown: Path, path: Path, refused: OSError) -> str:
    """The target of the link `name` in `dir_fd`; `UnsafePathError` if it is not to be
    followed, `refused` again if `name` is no link (a file where a directory goes)."""
    try:
        link_fd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError:
        raise refused from None
    try:
        link = os.fstat(link_fd)
        if not stat.S_ISLNK(link.st_mode):
            raise refused
        target = os.readlink("", dir_fd=link_fd)
    finally:
        os.close(link_fd)
    problem = link_problem(os.fstat(dir_fd), link, os.geteuid())
    if problem is not None:
        raise UnsafePathError(
            path,
            f"cannot write: {one_line(str(shown))} is a symbolic link (to {one_line(target)}) "
            f"{problem}; refusing to follow it",
            errno.ELOOP,
        )
    return target


def link_problem(directory: os.stat_result, link: os.stat_result, uid: int) -> str | None:
    """Why a symbolic link (`link`, its lstat) in `directory` (its fstat) is not to be followed
    by user `uid`, or None.

    A link is as trustworthy as whoever could have put it there: it must be owned by `uid` or
    root (`ownership.ownership_problem`), and so must its directory, which no one else may
    write, unless it is sticky (``/tmp``): there others can add names but cannot replace the
    link, whose owner was checked. ``/home -> /gpfs/home`` made by root passes; a link in a
    group-writable project directory does not, whoever made it: any member could swap it.
    """
    problem = ownership_problem(link, uid)
    if problem is not None:
        return problem
    problem = ownership_problem(directory, uid)
    if problem is None or (directory.st_uid in (uid, 0) and directory.st_mode & stat.S_ISVTX):
        return None
    return f"in a directory {problem}, who could swap it"
