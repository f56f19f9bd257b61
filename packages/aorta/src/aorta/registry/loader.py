"""Resolve mitigations, environments and workloads: built-ins plus entry points.

Plugins contribute entries through the entry-point groups `aorta.mitigations`,
`aorta.environments` and `aorta.workloads`. An entry point names an object that is either the
entry itself (a `Mitigation`, `Environment` or `Workload`) or a zero-argument callable that
returns one; the entry's name must equal the entry point's name. `source_package` is always
taken from the distribution that declares the entry point, never from the plugin's own claim.

A plugin that fails to import, returns the wrong type or clashes with an earlier name is
recorded in `Catalog.broken` and skipped: one broken plugin never hides the others.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Generic, TypeVar

from aorta.errors import (
    UnknownEnvironmentError,
    UnknownMitigationError,
    UnknownNameError,
    UnknownWorkloadError,
)
from aorta.registry.builtins import BUILTIN_ENVIRONMENTS, BUILTIN_MITIGATIONS
from aorta.registry.models import Environment, Mitigation, Workload

if TYPE_CHECKING:  # importlib.metadata costs ~15 ms: imported when the entry points are read
    from importlib.metadata import EntryPoint

MITIGATIONS_GROUP = "aorta.mitigations"
ENVIRONMENTS_GROUP = "aorta.environments"
WORKLOADS_GROUP = "aorta.workloads"

EntryT = TypeVar("EntryT", Mitigation, Environment, Workload)


@dataclass(frozen=True)
class BrokenEntry:
    """An entry point that could not be turned into a registry entry."""

    group: str
    name: str
    value: str  # "module:attr" as declared
    source_package: str
    reason: str

    def describe(self) -> str:
        """One line for a warning: which plugin, from where, and why it was skipped."""
        return (
            f"{self.group} entry point {self.name!r} ({self.value}) from "
            f"{self.source_package}: {self.reason}"
        )


@dataclass(frozen=True)
class Catalog(Mapping[str, EntryT], Generic[EntryT]):
    """Name -> entry, in registration order (built-ins first), plus the skipped plugins."""

    entries: Mapping[str, EntryT]
    broken: tuple[BrokenEntry, ...] = field(default=())

    def __getitem__(self, name: str) -> EntryT:
        return self.entries[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)


def _dist_name(ep: EntryPoint) -> str:
    dist = ep.dist
    return dist.metadata["Name"] if dist is not None else "<unknown distribution>"


def _resolve(ep: EntryPoint, entry_type: type[EntryT]) -> EntryT:
    obj = ep.load()
    if not isinstance(obj, entry_type) and callable(obj):
        obj = obj()
    if not isinstance(obj, entry_type):
        raise TypeError(f"expected a {entry_type.__name__}, got {type(obj).__name__}")
    if obj.name != ep.name:
        raise ValueError(f"entry point is named {ep.name!r} but provides {obj.name!r}")
    return dataclasses.replace(obj, source_package=_dist_name(ep))


_GROUPS = (MITIGATIONS_GROUP, ENVIRONMENTS_GROUP, WORKLOADS_GROUP)
_scanned: list[tuple[object, dict[str, tuple[EntryPoint, ...]]]] = []  # at most one


def _path_state() -> tuple[tuple[str, int], ...]:
    """sys.path with each folder's mtime: installing or removing a distribution changes it."""
    state = []
    for entry in sys.path:
        try:
            state.append((entry, Path(entry or ".").stat().st_mtime_ns))
        except OSError:
            state.append((entry, -1))
    return tuple(state)


def _aorta_entry_points(group: str) -> tuple[EntryPoint, ...]:
    """The entry points of `group`, from one scan of the installed distributions for all
    three groups. A scan reads every distribution's metadata (~10 ms in a venv with torch)
    and one recipe check loads all three catalogs, some twice; the scan is reused until
    sys.path or one of its folders changes (a plugin installed or removed meanwhile)."""
    state = _path_state()
    if not _scanned or _scanned[0][0] != state:
        from importlib.metadata import entry_points

        found = entry_points()
        _scanned[:] = [(state, {name: tuple(found.select(group=name)) for name in _GROUPS})]
    return _scanned[0][1][group]


def _load(group: str, builtins: tuple[EntryT, ...], entry_type: type[EntryT]) -> Catalog[EntryT]:
    entries: dict[str, EntryT] = {entry.name: entry for entry in builtins}
    broken: list[BrokenEntry] = []
    for ep in sorted(_aorta_entry_points(group), key=lambda e: (e.name, e.value)):
        source = _dist_name(ep)
        try:
            entry = _resolve(ep, entry_type)
        except Exception as exc:  # any failure in third-party code must not break the registry
            reason = f"{type(exc).__name__}: {exc}"
            broken.append(BrokenEntry(group, ep.name, ep.value, source, reason))
            continue
        if entry.name in entries:
            holder = entries[entry.name].source_package
            # An editable install can expose the same distribution twice on sys.path.
            if holder != entry.source_package:
                reason = f"name already registered by {holder}"
                broken.append(BrokenEntry(group, ep.name, ep.value, source, reason))
            continue
        entries[entry.name] = entry
    return Catalog(entries=entries, broken=tuple(broken))


def load_mitigations() -> Catalog[Mitigation]:
    """All mitigations: built-ins, then the `aorta.mitigations` entry points."""
    return _load(MITIGATIONS_GROUP, BUILTIN_MITIGATIONS, Mitigation)


def load_environments() -> Catalog[Environment]:
    """All environments: built-ins, then the `aorta.environments` entry points."""
    return _load(ENVIRONMENTS_GROUP, BUILTIN_ENVIRONMENTS, Environment)


def load_workloads() -> Catalog[Workload]:
    """All workloads from the `aorta.workloads` entry points (aorta's own fsdp included)."""
    return _load(WORKLOADS_GROUP, (), Workload)


def _get(
    catalog: Catalog[EntryT], name: str, error: Callable[[str, list[str]], UnknownNameError]
) -> EntryT:
    try:
        return catalog[name]
    except KeyError:
        raise error(name, list(catalog)) from None


def get_mitigation(name: str) -> Mitigation:
    """The mitigation called `name`; raises `UnknownMitigationError`."""
    return _get(load_mitigations(), name, UnknownMitigationError)


def get_environment(name: str) -> Environment:
    """The environment called `name`; raises `UnknownEnvironmentError`."""
    return _get(load_environments(), name, UnknownEnvironmentError)


def get_workload(name: str) -> Workload:
    """The workload called `name`; raises `UnknownWorkloadError`."""
    return _get(load_workloads(), name, UnknownWorkloadError)
