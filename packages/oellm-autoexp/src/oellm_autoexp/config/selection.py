"""The files of a Hydra config tree that a composition will read, found without Hydra.

Hydra composes a config from its `defaults:` list: the primary config, then each entry
(`- group: option`, `- path/to/config`, `- override group: option`), transitively, with
command-line overrides (`sweep=lr_grid`, `+group=option`, `~group`) changing the choices.
Before Hydra reads anything, we read the same files with our bounded loader (regular files
only, size, nesting and alias limits; base-60 numbers) — and only those: a FIFO, a huge file or
an alias bomb in an option nobody selects is never opened, and a large tree costs nothing.

Where a choice cannot be known without Hydra (an interpolation `${...}` or a sweep function
such as `choice(a,b)`), every option of that group is read: more than Hydra will, never less.
A selected file that is a link must stay inside the config folder.

`hydra.searchpath` (in the primary config, or `hydra.searchpath=[...]` on the command line)
adds folders Hydra looks in after the config folder: their group files are found, and read
through the same loader, in the same order. `pkg://` entries name installed packages (trusted
as code is) and are not read; an entry that is an interpolation cannot be known before Hydra
resolves it and is refused.
"""

from __future__ import annotations

import os
import re
import reprlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from oellm_autoexp.config.yaml_text import (
    YamlLimitError,
    base60_scalars,
    load_text,
    read_config_text,
    read_yaml,
    yaml_error,
)
from oellm_autoexp.errors import ConfigError
from oellm_autoexp.limits import limit, limit_hint

_KEYWORDS = ("override", "optional")
_SIMPLE_OPTION = re.compile(r"[\w.\-/]+")


@dataclass(frozen=True)
class SelectedFile:
    """One config file Hydra will read: where it is and its group path (posix, "" for root)."""

    path: Path
    group: str


@dataclass(frozen=True)
class _Choice:
    """What a command-line override does to a group: pick options, or drop it (`~group`)."""

    options: tuple[str, ...] | None  # None: every option of the group (not known statically)
    removed: bool = False


def _join(group: str, name: str) -> str:
    """A config path relative to `group`, or absolute when it starts with `/`."""
    if name.startswith("/"):
        return name.strip("/")
    return f"{group}/{name}" if group else name


def _split_package(text: str) -> tuple[str, str | None]:
    name, _, package = text.partition("@")
    return name.strip(), (package.strip() or None)


def override_key(group: str, package: str | None) -> str:
    """The name an override uses for a `group@package` default, as Hydra matches them: the
    group, plus `@package` only when that is not the group's own package (`db@db` is `db`)."""
    if package is None or package in ("_group_", group.replace("/", ".")):
        return group
    return f"{group}@{'_global_' if package == '' else package}"


def _options(value: Any) -> tuple[str, ...] | None:
    """The options a defaults value or override value names; None when not static."""
    if value is None:
        return ()
    items = value if isinstance(value, list) else [value]
    names = []
    for item in items:
        text = str(item).strip()
        if text in ("null", "???"):  # nothing chosen (yet): Hydra reads nothing for it
            continue
        if not _SIMPLE_OPTION.fullmatch(text):  # ${...}, choice(...), glob(...)
            return None
        names.append(text)
    return tuple(names)


def command_line_choices(roots: Sequence[Path], overrides: Sequence[str]) -> dict[str, _Choice]:
    """Group choices made by `overrides` (`group[@pkg]=option`, `+group=a,b`, `~group`).

    An override whose key is a directory of no search-path folder (`roots`) sets a value, not a
    group: left out.
    """
    choices: dict[str, _Choice] = {}
    for override in overrides:
        removed = override.startswith("~")
        key, _, value = override.lstrip("~+").partition("=")
        group, package = _split_package(key)
        if not group or not any((root / group).is_dir() for root in roots):
            continue
        name = override_key(group, package)
        if removed:
            choices[name] = _Choice((), removed=True)
            continue
        text = value.strip()
        if text.startswith("[") and text.endswith("]"):
            text = text[1:-1]
        # `a,b` is Hydra's multirun sweep over options: each is read.
        parts = [part.strip() for part in text.split(",")] if text else []
        choices[name] = _Choice(_options(parts))
    return choices


class _Walk:
    """The breadth-first walk through defaults lists (see `selected_config_files`)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.roots = [root]  # the config folder, then hydra.searchpath folders (Hydra's order)
        self.choices: dict[str, _Choice] = {}
        self.used: set[str] = set()
        self.found: dict[Path, SelectedFile] = {}
        self.queue: list[SelectedFile] = []
        self.cap = limit("MAX_TREE_FILES")

    def add_config(self, config_path: str) -> None:
        """Queue `<config_path>.yaml` from the first search-path folder that has it."""
        relative = PurePosixPath(config_path)
        if ".." in relative.parts or relative.is_absolute():
            raise ConfigError(
                f"defaults entry {config_path!r} leaves the config folder {self.root}"
            )
        for root in self.roots:
            path = root / f"{config_path}.yaml"
            if os.path.lexists(path):
                break
        else:
            return  # Hydra reports a missing config itself (or skips an optional one)
        self._check_inside(path, root)
        if path in self.found:
            return
        selected = SelectedFile(path, str(relative.parent) if relative.parent.parts else "")
        self.found[path] = selected
        self.queue.append(selected)
        if len(self.found) > self.cap:
            raise ConfigError(
                "the defaults lists select more YAML files than the "
                + limit_hint("MAX_TREE_FILES"),
                file=self.root,
            )

    @staticmethod
    def _check_inside(path: Path, root: Path) -> None:
        # Resolved: a link at the file or at any folder on the way may point elsewhere.
        try:
            target = path.resolve()
        except (OSError, RuntimeError) as exc:  # a link loop (RuntimeError before 3.13)
            raise ConfigError(f"cannot resolve the path: {exc}", file=path) from None
        if not target.is_relative_to(root):
            raise ConfigError(
                f"a link to {target}, outside the config folder {root}; copy the file in",
                file=path,
            )

    def add_group(self, group: str, package: str | None, value: Any) -> None:
        """Queue the options a `group[@package]: value` entry selects (overrides first)."""
        key = override_key(group, package)
        self.used.add(key)
        choice = self.choices.get(key) or _Choice(_options(value))
        if choice.removed:
            return
        if choice.options is None:
            self.add_every_option(group)
            return
        for option in choice.options:
            self.add_config(f"{group}/{option}")

    def add_every_option(self, group: str) -> None:
        """Every `*.yaml` directly in `group` of every search-path folder (a choice not known
        before Hydra resolves it)."""
        for root in self.roots:
            directory = root / group
            if directory.is_symlink() or not directory.is_dir():
                continue
            for entry in sorted(os.listdir(directory)):  # noqa: PTH208 - one group's options
                if entry.endswith(".yaml"):
                    self.add_config(f"{group}/{entry[: -len('.yaml')]}")

    def unused_choices(self) -> Iterator[tuple[str, str | None]]:
        """Command-line choices for groups no defaults list names (`+group=option`)."""
        for name, choice in list(self.choices.items()):
            if name not in self.used and not choice.removed:
                yield _split_package(name)


def defaults_entries(data: Any, where: Path) -> list[Any]:
    """The `defaults:` list of a parsed config ([] when absent); a non-list is a ConfigError."""
    if not isinstance(data, dict) or "defaults" not in data:
        return []
    entries = data["defaults"]
    if not isinstance(entries, list):
        raise ConfigError("expected a list", key="defaults", file=where)
    return entries


def follow_entry(walk: _Walk, selected: SelectedFile, entry: Any) -> None:
    """Queue what one `defaults:` entry of `selected` selects."""
    if isinstance(entry, str):
        name, _ = _split_package(entry)
        if name != "_self_":
            walk.add_config(_join(selected.group, name))
        return
    if not isinstance(entry, dict) or len(entry) != 1:
        shown = reprlib.repr(entry)  # bounded: the entry may be huge
        raise ConfigError(
            f"expected a config name or a single 'group: option' mapping, got {shown}",
            key="defaults",
            file=selected.path,
        )
    ((key, value),) = entry.items()
    words = str(key).split()
    keywords = {word for word in words if word in _KEYWORDS}
    rest = [word for word in words if word not in _KEYWORDS]
    if len(rest) != 1:
        shown = reprlib.repr(key)
        where = selected.path
        raise ConfigError(f"cannot read defaults entry key {shown}", key="defaults", file=where)
    group, package = _split_package(rest[0])
    group = _join(selected.group, group)
    if "override" in keywords:
        # An override in a defaults list changes that group's choice wherever it is used; the
        # command line still wins.
        walk.choices.setdefault(override_key(group, package), _Choice(_options(value)))
    walk.add_group(group, package, value)  # a present `optional` one is read like any other


def search_path(primary: Any, overrides: Sequence[str], root: Path) -> list[Path]:
    """The folders `hydra.searchpath` adds after the config folder, in Hydra's order.

    The command line's `hydra.searchpath=[...]` replaces the primary config's list, as in
    Hydra. `pkg://` and other non-file entries are left out (installed code, not config); an
    entry with an interpolation is a ConfigError: its files could not be checked first.
    """
    entries: Any = None
    for override in overrides:
        key, _, value = override.lstrip("+").partition("=")
        if key.strip() == "hydra.searchpath":
            entries = _override_list(value)
            break
    else:
        hydra = primary.get("hydra") if isinstance(primary, dict) else None
        entries = hydra.get("searchpath") if isinstance(hydra, dict) else None
    if not isinstance(entries, list):
        return []  # absent; anything else Hydra refuses itself
    folders = []
    for entry in entries:
        if not isinstance(entry, str):
            continue
        if "${" in entry:
            raise ConfigError(
                f"entry {reprlib.repr(entry)} is an interpolation; write the folder literally so "
                "its files can be checked before Hydra reads them",
                key="hydra.searchpath",
                file=root,
            )
        scheme, separator, rest = entry.partition("://")
        if not separator:
            scheme, rest = "file", entry
        if scheme == "file" and rest:
            # Relative: to the working folder, as Hydra reads it. Resolved like the config
            # folder, so the link check compares like with like.
            folders.append(Path(os.path.realpath(rest)))
    return folders


def _override_list(value: str) -> list[str]:
    """The strings of a command-line list value (`[file:///a,'/b c']`), parsed by Hydra."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    try:
        (parsed,) = OverridesParser.create().parse_overrides([f"hydra.searchpath={value}"])
        items = parsed.value()
    except (HydraException, ValueError):  # a malformed override is Hydra's to report
        return []
    return [str(item) for item in items] if isinstance(items, list) else []


def selected_config_files(
    root: Path,
    name: str,
    overrides: Sequence[str],
    read: Any,
) -> list[Path]:
    """Every file composing `name` from `root` reads, in the order found (primary first).

    `read(path)` returns the parsed content of one file (and applies every limit to it); it may
    return None for a file it could not parse (its defaults cannot be followed: Hydra then
    fails on that file itself). More than MAX_TREE_FILES files is a ConfigError.
    """
    walk = _Walk(root)
    walk.add_config(name)
    primary = read(walk.queue[0].path) if walk.queue else None
    walk.roots.extend(search_path(primary, overrides, root))
    walk.choices = command_line_choices(walk.roots, overrides)
    position = 0
    while True:
        while position < len(walk.queue):
            selected = walk.queue[position]
            data = primary if position == 0 else read(selected.path)
            position += 1
            for entry in defaults_entries(data, selected.path):
                follow_entry(walk, selected, entry)
        extra = list(walk.unused_choices())
        if not extra:
            break
        for group, package in extra:
            walk.add_group(group, package, None)  # the command line's choice applies
    return list(walk.found)


def check_selected(root: Path, name: str, overrides: Sequence[str]) -> tuple[Path, int, str] | None:
    """Read every file composing `name` selects with our bounded loader; return the first
    unquoted base-60 scalar among them, if any (OmegaConf would read `10:00:00` as 36000).

    A file beyond a YAML limit (alias bomb, deep nesting, size), a FIFO or a device is a
    ConfigError here, before Hydra's own loader opens it. A merely malformed file is left for
    the composition to fail on (`raise_malformed_selected` names it then).
    """
    texts: dict[Path, str] = {}

    def read(path: Path) -> Any:
        text = texts[path] = read_config_text(path)
        try:
            return load_text(text)
        except YamlLimitError as exc:
            raise yaml_error(exc, path) from None
        except yaml.YAMLError:
            return None

    for path in selected_config_files(root, name, overrides, read):
        try:
            hits = base60_scalars(texts[path])
        except yaml.YAMLError:
            continue
        if hits:
            return path, *hits[0]
    return None


def raise_malformed_selected(root: Path, name: str, overrides: Sequence[str]) -> None:
    """After a failed composition: one line naming the selected file that is malformed YAML."""
    selected_config_files(root, name, overrides, read_yaml)
