"""Directories below an output root and bounded reads, as `ConfigError`s naming the config key.

The checks themselves are `toolkit_core.paths` (no symlink followed below the root, only regular
files of a bounded size read); this module only says which config key a refused path came from
(``project.base_output_dir``) and which limit of `oellm_autoexp.limits` to raise.
"""

from __future__ import annotations

from pathlib import Path

from oellm_autoexp.errors import ConfigError
from toolkit_core import paths
from toolkit_core.errors import FileTooLargeError, PathError

_ROOT_KEY = "project.base_output_dir"


def make_dirs_inside(path: Path, root: Path, *, mode: int = 0o777) -> Path:
    """Create `path` and its parents up to `root`, refusing symlinks below `root`."""
    try:
        return paths.make_dirs_inside(path, root, mode=mode)
    except PathError as exc:
        raise ConfigError(str(exc), key=_ROOT_KEY) from None


def check_no_links(path: Path, root: Path) -> None:
    """Refuse `path` if an existing component below `root` is a symlink or not a directory."""
    try:
        paths.check_no_links(path, root)
    except PathError as exc:
        raise ConfigError(str(exc), key=_ROOT_KEY) from None


def read_regular_text(path: Path, *, max_bytes: int | None, limit_name: str = "") -> str:
    """The UTF-8 text of `path` if it is a regular file (or a link to one) of at most `max_bytes`.

    `limit_name` names the limit to raise (`oellm_autoexp.limits`) in the message.
    """
    from oellm_autoexp.limits import limit_hint

    try:
        data = paths.read_regular_bytes(path, max_bytes=max_bytes)
    except FileTooLargeError as exc:
        hint = limit_hint(limit_name) if limit_name else f"limit {exc.limit:,}"
        raise ConfigError(
            f"file of {exc.size:,} bytes is larger than the {hint}", file=path
        ) from None
    except PathError as exc:
        raise ConfigError(exc.problem, file=path) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"not UTF-8 text (byte {exc.start}); save it as UTF-8", file=path
        ) from None
