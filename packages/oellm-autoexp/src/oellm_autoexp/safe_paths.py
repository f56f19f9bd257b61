"""Directories below an output root, created without following planted symlinks.

Output trees (plans, logs, jobs, the session state) live in shared run directories. A colleague
who can write there could plant ``<root>/plans -> /somewhere/else`` and have our next write land
outside the root. Every directory below the root is therefore created (or checked) one component
at a time with `lstat`: a symlink, or anything that is not a directory, is refused. The root
itself is the user's own choice and may be a link (``/scratch/me -> /lustre/...``).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from oellm_autoexp.errors import ConfigError


def _below(path: Path, root: Path) -> list[str]:
    normal, base = Path(os.path.normpath(path)), Path(os.path.normpath(root))
    try:
        return list(normal.relative_to(base).parts)
    except ValueError:
        raise ConfigError(f"{path} is outside the output root {root}", key="project") from None


def make_dirs_inside(path: Path, root: Path, *, mode: int = 0o777) -> Path:
    """Create `path` and its parents up to `root`, refusing symlinks below `root`.

    `mode` applies to the directories created here (umask still applies); existing ones keep
    theirs. Returns `path`.
    """
    Path(root).mkdir(parents=True, exist_ok=True)
    current = Path(os.path.normpath(root))
    for part in _below(path, root):
        current = current / part
        try:
            current.mkdir(mode)  # no parents=True: never follows a symlink at `current`
            continue
        except FileExistsError:
            pass
        _require_real_dir(current, root)
    return path


def check_no_links(path: Path, root: Path) -> None:
    """Refuse `path` if an existing component below `root` is a symlink or not a directory.

    For trees the job creates itself (``jobs/<name>``): checked at plan time, created later.
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
        raise ConfigError(
            f"{path} is a symlink (to {path.readlink()}); refusing to write through it below "
            f"the output root {root}: remove the link or choose another project.base_output_dir",
            key="project.base_output_dir",
        )
    if not stat.S_ISDIR(info.st_mode):
        raise ConfigError(f"{path} exists and is not a directory", key="project.base_output_dir")


def read_regular_text(path: Path, *, max_bytes: int | None, limit_name: str = "") -> str:
    """The UTF-8 text of `path` if it is a regular file (or a link to one) of at most `max_bytes`.

    Opened non-blocking and checked with fstat before reading: a FIFO, a device (/dev/zero) or
    a directory is a `ConfigError` naming the file instead of a hang, a 100 % CPU read or a
    traceback. `limit_name` names the limit to raise (`oellm_autoexp.limits`) in the message.
    """
    from oellm_autoexp.limits import limit_hint

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror or exc}", file=path) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError("not a regular file (a FIFO, device or directory)", file=path)
        if max_bytes is not None and info.st_size > max_bytes:
            hint = limit_hint(limit_name) if limit_name else f"limit {max_bytes:,}"
            raise ConfigError(
                f"file of {info.st_size:,} bytes is larger than the {hint}", file=path
            )
        chunks = []
        while chunk := os.read(fd, 1 << 24):
            chunks.append(chunk)
    finally:
        os.close(fd)
    try:
        return b"".join(chunks).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"not UTF-8 text (byte {exc.start}); save it as UTF-8", file=path
        ) from None
