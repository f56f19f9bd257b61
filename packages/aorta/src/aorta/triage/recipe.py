"""The triage recipe: schema, loader (YAML/JSON), flag -> recipe builder, resolved dump.

A recipe names a workload, trial/step counts, confound settings and an explicit list of cells
(mitigations x environment). Validation happens once, here, at load time; what comes out is a
frozen `Recipe` whose cells carry everything the runner needs (resolved environment, merged
env vars, effective trials/steps). Both `load_recipe()` and `recipe_from_flags()` go through
the same resolution helpers, so the two modes cannot drift apart.

Every error is one line: `<file>: <key path>: expected ..., got ...`. Flag mode uses the flag
name as the key path (`--mitigation-axis[1]`) and no file prefix.

Decisions where the spec is silent (documented in the docstrings below as well):

- `trials`/`steps` are positive ints; YAML booleans are not ints here.
- `confound.threshold` is a finite number >= 1.0 (ints accepted): below 1.0 a cell *faster*
  than the baseline would be flagged as a speed confound, which is meaningless.
- `extra_env` values must be strings (quote them in YAML): YAML would turn `1.0` into a float
  and back into `"1.0"` or `"1"` depending on the writer, a silent surprise in an env var.
- String fields (`ticket`, names) must be YAML strings: `ticket: 2024-01-01` or `name: yes`
  are rejected with "quote it" rather than stringified.
- A mitigation listed twice in one cell is rejected (almost always a typo).
- Duplicate keys in a YAML mapping are rejected (YAML would silently keep the last one).
- Nothing from a recipe reaches a shell: the runner passes names and image refs as argv items.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, NoReturn

import yaml

from aorta.errors import (
    UnknownEnvironmentError,
    UnknownMitigationError,
    UnknownNameError,
    UnknownWorkloadError,
)
from aorta.registry.loader import load_environments, load_mitigations, load_workloads
from aorta.registry.models import Environment, Mitigation, Workload, check_env_var_name
from aorta.runner.environ import MitigationConflictError, merge_env
from aorta.triage.errors import RecipeCellError, RecipeSchemaError
from aorta.triage.names import (
    NO_TICKET,
    image_ref_problem,
    inline_environment_name,
    safe_name_problem,
)

__all__ = [
    "DEFAULT_CONFOUND_THRESHOLD",
    "IMAGE_PREFIX",
    "INLINE_SOURCE_PACKAGE",
    "RECIPE_SUFFIXES",
    "SUPPORTED_SCHEMA_VERSIONS",
    "Cell",
    "ConfoundSettings",
    "Recipe",
    "RecipeCellError",
    "RecipeSchemaError",
    "dump_resolved_yaml",
    "load_recipe",
    "recipe_from_flags",
    "resolved_recipe_dict",
]

SUPPORTED_SCHEMA_VERSIONS: tuple[int, ...] = (1,)
DEFAULT_CONFOUND_THRESHOLD = 1.15
RECIPE_SUFFIXES = (".yaml", ".yml", ".json")
IMAGE_PREFIX = "image:"
# `source_package` of environments defined inline in a recipe or by an `image:` flag item.
INLINE_SOURCE_PACKAGE = "recipe"

_TOP_KEYS = ("schema_version", "ticket", "workload", "trials", "steps", "confound", "cells")
_CONFOUND_KEYS = ("threshold", "baseline_cell")
_CELL_KEYS = ("name", "mitigations", "environment", "trials", "steps", "extra_env")
_INLINE_ENV_KEYS = ("docker",)
_MAX_REPR = 80


# --------------------------------------------------------------------------- data model


@dataclass(frozen=True)
class ConfoundSettings:
    """Speed-confound detection settings: ratio threshold and the explicit baseline, if any."""

    threshold: float = DEFAULT_CONFOUND_THRESHOLD
    baseline_cell: str | None = None  # as written; `Recipe.baseline` is the resolved one


@dataclass(frozen=True)
class Cell:
    """One row of the matrix, fully resolved.

    `trials`/`steps` are the effective counts (per-cell override, else top level); `env` is the
    mitigations' env bundles unioned in order with `extra_env` applied on top.
    """

    name: str
    mitigations: tuple[str, ...]
    environment: Environment
    extra_env: Mapping[str, str]
    trials: int
    steps: int
    env: Mapping[str, str]
    # The registry entries behind `mitigations`, for `recipe.resolved.yaml`.
    mitigation_entries: tuple[Mitigation, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "extra_env", MappingProxyType(dict(self.extra_env)))
        object.__setattr__(self, "env", MappingProxyType(dict(self.env)))


@dataclass(frozen=True)
class Recipe:
    """A validated recipe: what to run and how to judge it. Build with `load_recipe()` or
    `recipe_from_flags()`; `baseline` is the resolved baseline cell name."""

    schema_version: int
    ticket: str | None
    workload: str
    trials: int
    steps: int
    confound: ConfoundSettings
    cells: tuple[Cell, ...]
    baseline: str
    source: Path | None = None  # None: built from flags
    sha256: str | None = None  # of the recipe file's bytes
    workload_source_package: str | None = None

    def __post_init__(self) -> None:
        names = [cell.name for cell in self.cells]
        if not names:
            raise ValueError("a recipe needs at least one cell")
        if len(set(names)) != len(names):
            raise ValueError(f"cell names must be unique, got {names}")
        if self.baseline not in names:
            raise ValueError(f"baseline {self.baseline!r} is not a cell ({', '.join(names)})")

    def cell(self, name: str) -> Cell:
        """The cell called `name` (KeyError if there is none)."""
        for cell in self.cells:
            if cell.name == name:
                return cell
        raise KeyError(name)

    @property
    def baseline_cell(self) -> Cell:
        """The resolved baseline cell."""
        return self.cell(self.baseline)


# --------------------------------------------------------------------------- error helpers


def _short(value: object) -> str:
    # repr() escapes newlines and control characters, which keeps every message on one line.
    text = repr(value)
    return text if len(text) <= _MAX_REPR else text[: _MAX_REPR - 3] + "..."


def _describe(value: object) -> str:
    if isinstance(value, (dict, list, bool)) or value is None:
        kind = {dict: "a mapping", list: "a list", bool: "a boolean"}.get(type(value), "null")
        return f"{kind} {_short(value)}" if value is not None else "null"
    return _short(value)


@dataclass(frozen=True)
class _Where:
    """Where values come from: a recipe file (prefix) or flags (no prefix)."""

    label: str | None

    def at(self, path: str) -> str:
        return f"{self.label}: {path}" if self.label else path

    def fail(
        self, path: str, expected: str, value: object = ..., *, cell: bool = False
    ) -> NoReturn:
        got = "" if value is ... else f", got {_describe(value)}"
        error = RecipeCellError if cell else RecipeSchemaError
        raise error(f"{self.at(path)}: {expected}{got}")

    def unknown(
        self, error: type[UnknownNameError], path: str, name: str, known: Sequence[str]
    ) -> NoReturn:
        # Keep the registry's error type (callers catch UnknownMitigationError etc.) but put
        # the file and key path in front of its one-line message.
        exc = error(name, known)
        exc.args = (f"{self.at(path)}: {exc}",)
        raise exc


def _join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def _check_keys(
    where: _Where, path: str, data: Mapping[Any, Any], allowed: Sequence[str], what: str
) -> None:
    for key in data:
        if key not in allowed:
            where.fail(
                _join(path, str(key)) if path else str(key),
                f"unknown key {_short(key)} in {what} (allowed: {', '.join(allowed)})",
            )


def _require(where: _Where, path: str, data: Mapping[Any, Any], key: str) -> object:
    if key not in data:
        where.fail(_join(path, key), "required key is missing")
    return data[key]


def _positive_int(where: _Where, path: str, value: object) -> int:
    # bool is an int subclass in Python; `trials: yes` must not become 1 trial.
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        where.fail(path, "expected a positive integer", value)
    return value


def _string(where: _Where, path: str, value: object) -> str:
    if not isinstance(value, str):
        where.fail(path, "expected a string (quote it in YAML)", value)
    return value


def _safe_name(where: _Where, path: str, value: object) -> str:
    name = _string(where, path, value)
    problem = safe_name_problem(name)
    if problem:
        where.fail(path, problem, name)
    return name


def _ticket(where: _Where, path: str, value: object) -> str:
    ticket = _safe_name(where, path, value)
    if ticket == NO_TICKET:
        # The folder of ticket-less runs: a ticket of that name would mix with them.
        where.fail(
            path, f"expected a ticket other than {NO_TICKET!r} (omit the key instead)", value
        )
    return ticket


def _threshold(where: _Where, path: str, value: object) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value < 1.0
    ):
        where.fail(path, "expected a finite number >= 1.0 (step-time ratio)", value)
    return float(value)


# --------------------------------------------------------------------------- resolution


@dataclass(frozen=True)
class _Registry:
    """One snapshot of the registry per recipe: entry points are read once, not per cell."""

    mitigations: Mapping[str, Mitigation]
    environments: Mapping[str, Environment]
    workloads: Mapping[str, Workload]

    @classmethod
    def load(cls) -> _Registry:
        return cls(load_mitigations(), load_environments(), load_workloads())


def _resolve_workload(where: _Where, path: str, value: object, reg: _Registry) -> Workload:
    name = _string(where, path, value)
    if name not in reg.workloads:
        where.unknown(UnknownWorkloadError, path, name, list(reg.workloads))
    _safe_name(where, path, name)
    return reg.workloads[name]


def _resolve_mitigation(where: _Where, path: str, value: object, reg: _Registry) -> Mitigation:
    name = _string(where, path, value)
    if name not in reg.mitigations:
        where.unknown(UnknownMitigationError, path, name, list(reg.mitigations))
    return reg.mitigations[name]


def _inline_environment(where: _Where, path: str, ref: object) -> Environment:
    image = _string(where, path, ref)
    problem = image_ref_problem(image)
    if problem:
        where.fail(path, problem, image)
    return Environment(
        name=inline_environment_name(image),
        kind="docker",
        image=image,
        description=f"inline docker environment for {image}",
        source_package=INLINE_SOURCE_PACKAGE,
    )


def _resolve_environment(where: _Where, path: str, value: object, reg: _Registry) -> Environment:
    if isinstance(value, Mapping):
        _check_keys(where, path, value, _INLINE_ENV_KEYS, "an inline environment")
        return _inline_environment(
            where, _join(path, "docker"), _require(where, path, value, "docker")
        )
    if not isinstance(value, str):
        where.fail(path, "expected an environment name or a mapping {docker: <image-ref>}", value)
    if value not in reg.environments:
        where.unknown(UnknownEnvironmentError, path, value, list(reg.environments))
    return reg.environments[value]


def _extra_env(where: _Where, path: str, value: object) -> dict[str, str]:
    if not isinstance(value, Mapping):
        where.fail(path, "expected a mapping {VARIABLE: 'value'}", value)
    result: dict[str, str] = {}
    for key, item in value.items():
        key_path = _join(path, str(key))
        if not isinstance(key, str):
            where.fail(key_path, "expected a variable name string", key)
        try:
            check_env_var_name(key)
        except ValueError:
            where.fail(key_path, "expected a variable name matching [A-Za-z_][A-Za-z0-9_]*", key)
        if not isinstance(item, str):
            where.fail(key_path, "expected a string value (quote it in YAML)", item)
        if "\x00" in item:
            where.fail(key_path, "expected a value without NUL characters", item)
        result[key] = item
    return result


def _build_cell(
    where: _Where,
    *,
    name: str,
    mitigations: Sequence[Mitigation],
    mitigations_path: str,
    environment: Environment,
    extra_env: Mapping[str, str],
    trials: int,
    steps: int,
) -> Cell:
    try:
        env = merge_env(mitigations, extra_env)
    except MitigationConflictError as exc:
        where.fail(mitigations_path, f"conflicting mitigations: {exc}", cell=True)
    return Cell(
        name=name,
        mitigations=tuple(m.name for m in mitigations),
        environment=environment,
        extra_env=extra_env,
        trials=trials,
        steps=steps,
        env=env,
        mitigation_entries=tuple(mitigations),
    )


def _cell_from_data(
    where: _Where, index: int, data: object, reg: _Registry, trials: int, steps: int
) -> Cell:
    path = f"cells[{index}]"
    if not isinstance(data, Mapping):
        where.fail(path, "expected a mapping with keys name, mitigations, environment", data)
    _check_keys(where, path, data, _CELL_KEYS, "a cell")
    name = _safe_name(where, _join(path, "name"), _require(where, path, data, "name"))

    mit_path = _join(path, "mitigations")
    raw = _require(where, path, data, "mitigations")
    if not isinstance(raw, list) or not raw:
        where.fail(mit_path, "expected a non-empty list of mitigation names (use [none])", raw)
    mitigations: list[Mitigation] = []
    for i, item in enumerate(raw):
        mitigation = _resolve_mitigation(where, f"{mit_path}[{i}]", item, reg)
        if any(m.name == mitigation.name for m in mitigations):
            where.fail(f"{mit_path}[{i}]", "expected each mitigation once per cell", item)
        mitigations.append(mitigation)

    env_path = _join(path, "environment")
    environment = _resolve_environment(
        where, env_path, _require(where, path, data, "environment"), reg
    )
    extra = _extra_env(where, _join(path, "extra_env"), data.get("extra_env", {}))
    if "trials" in data:
        trials = _positive_int(where, _join(path, "trials"), data["trials"])
    if "steps" in data:
        steps = _positive_int(where, _join(path, "steps"), data["steps"])
    return _build_cell(
        where,
        name=name,
        mitigations=mitigations,
        mitigations_path=mit_path,
        environment=environment,
        extra_env=extra,
        trials=trials,
        steps=steps,
    )


def _default_baseline(cells: Sequence[Cell]) -> str | None:
    """Recipe-mode default: first `baseline-*` cell, else first `[none]` cell, else the only
    cell; None when none of these applies (the caller reports it)."""
    for cell in cells:
        if cell.name.startswith("baseline-"):
            return cell.name
    for cell in cells:
        if cell.mitigations == ("none",):
            return cell.name
    return cells[0].name if len(cells) == 1 else None


def _check_baseline(where: _Where, path: str, value: object, cells: Sequence[Cell]) -> str:
    name = _string(where, path, value)
    names = [cell.name for cell in cells]
    if name not in names:
        where.fail(path, f"expected the name of a cell ({', '.join(names)})", name)
    return name


# --------------------------------------------------------------------------- file loading


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate mapping keys instead of keeping the last one."""


def _construct_unique_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    loader.flatten_mapping(node)
    seen: set[object] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node)
        if key in seen:
            mark = key_node.start_mark
            raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", mark)
        seen.add(key)
    return loader.construct_mapping(node)


_UniqueKeyLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_unique_mapping
)


def _parse(path: Path, text: str) -> object:
    label = str(path)
    if path.suffix.lower() == ".json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise RecipeSchemaError(
                f"{label}: line {exc.lineno}, column {exc.colno}: invalid JSON: {exc.msg}"
            ) from None
    try:
        # A SafeLoader subclass: plain data only, never arbitrary Python objects.
        return yaml.load(text, Loader=_UniqueKeyLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        problem = " ".join(str(problem).split())  # one line, whatever yaml put in it
        raise RecipeSchemaError(f"{label}: {where}invalid YAML: {problem}") from None


def load_recipe(path: Path) -> Recipe:
    """Load, validate and resolve the recipe at `path` (`.yaml`, `.yml` or `.json`).

    Raises `RecipeSchemaError` (bad file, syntax, schema), `RecipeCellError` (contradictory
    cell) or the registry's `Unknown{Mitigation,Environment,Workload}Error`; every message is
    one line with the file and the key path.
    """
    path = Path(path)
    if path.suffix.lower() not in RECIPE_SUFFIXES:
        raise RecipeSchemaError(
            f"{path}: expected a recipe file ending in {', '.join(RECIPE_SUFFIXES)}"
        )
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise RecipeSchemaError(f"{path}: cannot read recipe: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RecipeSchemaError(f"{path}: expected UTF-8 text ({exc.reason})") from None
    data = _parse(path, text)
    return _recipe_from_data(
        _Where(str(path)), data, source=path, sha256=hashlib.sha256(raw).hexdigest()
    )


def _confound(where: _Where, value: object) -> tuple[Mapping[Any, Any], float]:
    """The `confound` mapping (empty when absent) and its validated threshold."""
    if value is None:
        return {}, DEFAULT_CONFOUND_THRESHOLD
    if not isinstance(value, Mapping):
        where.fail("confound", "expected a mapping with keys threshold, baseline_cell", value)
    _check_keys(where, "confound", value, _CONFOUND_KEYS, "confound")
    threshold = DEFAULT_CONFOUND_THRESHOLD
    if value.get("threshold") is not None:
        threshold = _threshold(where, "confound.threshold", value["threshold"])
    return value, threshold


def _recipe_from_data(where: _Where, data: object, *, source: Path, sha256: str) -> Recipe:
    if not isinstance(data, Mapping):
        where.fail("(top level)", "expected a mapping of recipe keys", data)
    _check_keys(where, "", data, _TOP_KEYS, "the recipe")

    version = _require(where, "", data, "schema_version")
    supported = ", ".join(str(v) for v in SUPPORTED_SCHEMA_VERSIONS)
    if isinstance(version, bool) or not isinstance(version, int):
        where.fail("schema_version", f"expected an integer (supported: {supported})", version)
    if version not in SUPPORTED_SCHEMA_VERSIONS:
        where.fail("schema_version", f"unsupported version (supported: {supported})", version)

    reg = _Registry.load()
    ticket = None
    if data.get("ticket") is not None:
        ticket = _ticket(where, "ticket", data["ticket"])
    workload = _resolve_workload(where, "workload", _require(where, "", data, "workload"), reg)
    trials = _positive_int(where, "trials", _require(where, "", data, "trials"))
    steps = _positive_int(where, "steps", _require(where, "", data, "steps"))

    confound_raw, threshold = _confound(where, data.get("confound"))

    cells_raw = _require(where, "", data, "cells")
    if not isinstance(cells_raw, list) or not cells_raw:
        where.fail("cells", "expected a non-empty list of cells", cells_raw)
    cells: list[Cell] = []
    for index, item in enumerate(cells_raw):
        cell = _cell_from_data(where, index, item, reg, trials, steps)
        if any(c.name == cell.name for c in cells):
            where.fail(f"cells[{index}].name", "expected a unique cell name", cell.name)
        cells.append(cell)

    explicit = confound_raw.get("baseline_cell")
    if explicit is not None:
        baseline = _check_baseline(where, "confound.baseline_cell", explicit, cells)
    else:
        default = _default_baseline(cells)
        if default is None:
            where.fail(
                "confound.baseline_cell",
                "required: no cell is named 'baseline-*' or has mitigations [none]",
            )
        baseline = default

    return Recipe(
        schema_version=version,
        ticket=ticket,
        workload=workload.name,
        trials=trials,
        steps=steps,
        confound=ConfoundSettings(threshold=threshold, baseline_cell=explicit),
        cells=tuple(cells),
        baseline=baseline,
        source=source,
        sha256=sha256,
        workload_source_package=workload.source_package,
    )


# --------------------------------------------------------------------------- flag mode


def recipe_from_flags(
    *,
    workload: str,
    mitigation_axis: Sequence[str],
    environment_axis: Sequence[str],
    trials: int,
    steps: int,
    ticket: str | None = None,
    baseline_cell: str | None = None,
    confound_threshold: float = DEFAULT_CONFOUND_THRESHOLD,
) -> Recipe:
    """Build the in-memory recipe of `--mode matrix`: the full mitigation x environment product.

    Cells are named `<mitigation>-<environment>` in axis order (mitigation-major). An
    environment item `image:<ref>` is an inline docker environment named exactly like the
    recipe's `{docker: <ref>}` (`_inline_<blake2b8>`) and never touches the registry; a bare
    name must be registered. Default baseline: the (`none`, first environment) cell when `none`
    is on the mitigation axis, else the first cell. Errors name the flag, e.g.
    `--environment-axis[1]: unknown environment 'x' ...`.
    """
    where = _Where(None)
    reg = _Registry.load()
    wl = _resolve_workload(where, "--workload", workload, reg)
    trials = _positive_int(where, "--trials", trials)
    steps = _positive_int(where, "--steps", steps)
    ticket = None if ticket is None else _ticket(where, "--ticket", ticket)
    threshold = _threshold(where, "--confound-threshold", confound_threshold)

    if not mitigation_axis:
        where.fail("--mitigation-axis", "expected at least one mitigation name (e.g. none)")
    if not environment_axis:
        where.fail("--environment-axis", "expected at least one environment (e.g. local)")
    mitigations = [
        _resolve_mitigation(where, f"--mitigation-axis[{i}]", item, reg)
        for i, item in enumerate(mitigation_axis)
    ]
    environments: list[Environment] = []
    for i, item in enumerate(environment_axis):
        item_path = f"--environment-axis[{i}]"
        text = _string(where, item_path, item)
        if text.startswith(IMAGE_PREFIX):
            environments.append(_inline_environment(where, item_path, text[len(IMAGE_PREFIX) :]))
        else:
            environments.append(_resolve_environment(where, item_path, text, reg))
    _check_unique(where, "--mitigation-axis", [m.name for m in mitigations])
    _check_unique(where, "--environment-axis", [e.name for e in environments])

    cells: list[Cell] = []
    for i, mitigation in enumerate(mitigations):
        for environment in environments:
            name = f"{mitigation.name}-{environment.name}"
            _safe_name(where, f"--mitigation-axis[{i}] (cell name)", name)
            cells.append(
                _build_cell(
                    where,
                    name=name,
                    mitigations=[mitigation],
                    mitigations_path=f"--mitigation-axis[{i}]",
                    environment=environment,
                    extra_env={},
                    trials=trials,
                    steps=steps,
                )
            )

    if baseline_cell is not None:
        baseline = _check_baseline(where, "--baseline-cell", baseline_cell, cells)
    elif "none" in [m.name for m in mitigations]:
        baseline = f"none-{environments[0].name}"
    else:
        baseline = cells[0].name

    return Recipe(
        schema_version=SUPPORTED_SCHEMA_VERSIONS[-1],
        ticket=ticket,
        workload=wl.name,
        trials=trials,
        steps=steps,
        confound=ConfoundSettings(threshold=threshold, baseline_cell=baseline_cell),
        cells=tuple(cells),
        baseline=baseline,
        source=None,
        sha256=None,
        workload_source_package=wl.source_package,
    )


def _check_unique(where: _Where, path: str, names: Sequence[str]) -> None:
    seen: set[str] = set()
    for i, name in enumerate(names):
        if name in seen:
            where.fail(f"{path}[{i}]", "expected each value once (duplicate)", name)
        seen.add(name)


# --------------------------------------------------------------------------- resolved dump


def _environment_dict(environment: Environment) -> dict[str, object]:
    return {
        "name": environment.name,
        "kind": environment.kind,
        "image": environment.image,
        "python": environment.python,
        "rocm": environment.rocm,
        "inline": environment.source_package == INLINE_SOURCE_PACKAGE,
        "source_package": environment.source_package,
        "description": environment.description,
        "env": dict(environment.env),
    }


def resolved_recipe_dict(recipe: Recipe) -> dict[str, object]:
    """The recipe as executed, for `recipe.resolved.yaml` (plain dicts/lists/scalars only).

    Every mitigation is expanded to its env bundle and `source_package`, every environment to
    kind/image/auto-name, every cell carries its effective trials/steps and merged env; the
    baseline and threshold are the resolved values; `source`/`sha256` identify the recipe file
    (both null in flag mode, where `origin` is `flags`).
    """
    return {
        "schema_version": recipe.schema_version,
        "origin": "recipe" if recipe.source is not None else "flags",
        "source": None if recipe.source is None else str(recipe.source),
        "sha256": recipe.sha256,
        "ticket": recipe.ticket,
        "workload": {"name": recipe.workload, "source_package": recipe.workload_source_package},
        "trials": recipe.trials,
        "steps": recipe.steps,
        "confound": {"threshold": recipe.confound.threshold, "baseline_cell": recipe.baseline},
        "cells": [
            {
                "name": cell.name,
                "mitigations": [
                    {"name": m.name, "source_package": m.source_package, "env": dict(m.env)}
                    for m in cell.mitigation_entries
                ],
                "environment": _environment_dict(cell.environment),
                "extra_env": dict(cell.extra_env),
                "trials": cell.trials,
                "steps": cell.steps,
                "env": dict(cell.env),
            }
            for cell in recipe.cells
        ],
    }


def dump_resolved_yaml(recipe: Recipe) -> str:
    """`resolved_recipe_dict(recipe)` as YAML text, keys in schema order."""
    return yaml.safe_dump(resolved_recipe_dict(recipe), sort_keys=False, allow_unicode=True)
