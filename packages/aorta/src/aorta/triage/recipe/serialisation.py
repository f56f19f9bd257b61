"""`recipe.resolved.yaml`: the recipe as executed, written and read back in one place.

Writing expands every registry name (mitigation env bundles, environment kind/image); reading
rebuilds the `Recipe` from those expanded values, so today's registry plays no part when a
run directory is re-analysed or resumed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from aorta.registry.models import Environment, Mitigation, check_entry_name
from aorta.triage.analysis.confound import DEFAULT_ALPHA
from aorta.triage.names import image_ref_problem
from aorta.triage.recipe.checks import (
    Where,
    adaptive_settings,
    boolean,
    check_keys,
    join_path,
    order_mode,
    order_seed,
    positive_int,
    require,
    safe_name,
    string,
    ticket_name,
    valid_alpha,
    valid_threshold,
)
from aorta.triage.recipe.executor import executor_dict, executor_from_data
from aorta.triage.recipe.fields import CELL_FIELDS, CONFOUND_FIELDS, TOP_FIELDS, keys
from aorta.triage.recipe.model import INLINE_SOURCE_PACKAGE, Cell, ConfoundSettings, Recipe
from aorta.triage.recipe.validation import (
    check_baseline,
    check_unique,
    command_args,
    command_workload,
    extra_env_mapping,
    schema_version,
)

if TYPE_CHECKING:
    from aorta.runner.command.spec import CommandSpec

__all__ = [
    "dump_resolved_yaml",
    "is_resolved_recipe",
    "recipe_from_resolved",
    "resolved_recipe_dict",
]


# --------------------------------------------------------------------------- write


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
        "workload": _workload_dict(recipe),
        "trials": recipe.trials,
        "steps": recipe.steps,
        "order": recipe.order,
        "order_seed": recipe.order_seed,
        "fingerprint_kernels": recipe.fingerprint_kernels,
        "locate": recipe.locate,
        "executor": executor_dict(recipe.executor),
        "adaptive": None
        if recipe.adaptive is None
        else {"max_trials": recipe.adaptive.max_trials, "rule": recipe.adaptive.rule},
        "confound": {
            "threshold": recipe.confound.threshold,
            "baseline_cell": recipe.baseline,
            "alpha": recipe.confound.alpha,
        },
        "cells": [
            {
                "name": cell.name,
                "mitigations": [
                    {
                        "name": m.name,
                        "source_package": m.source_package,
                        "env": dict(m.env),
                        "process_scoped": m.process_scoped,
                    }
                    for m in cell.mitigation_entries
                ],
                "environment": _environment_dict(cell.environment),
                "extra_env": dict(cell.extra_env),
                "trials": cell.trials,
                "steps": cell.steps,
                "stop_after_failures": cell.stop_after_failures,
                "env": dict(cell.env),
                **({"command_args": list(cell.command_args)} if cell.command_args else {}),
            }
            for cell in recipe.cells
        ],
    }


def _workload_dict(recipe: Recipe) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": recipe.workload,
        "source_package": recipe.workload_source_package,
    }
    if recipe.command is not None:
        data["command"] = recipe.command.to_dict()
    return data


def dump_resolved_yaml(recipe: Recipe) -> str:
    """`resolved_recipe_dict(recipe)` as YAML text, keys in schema order."""
    return yaml.safe_dump(resolved_recipe_dict(recipe), sort_keys=False, allow_unicode=True)


# --------------------------------------------------------------------------- read back


# Known keys, derived from the one declaration of the recipe's fields.
_RESOLVED_KEYS = keys(TOP_FIELDS, "resolved")
_CONFOUND_KEYS = keys(CONFOUND_FIELDS, "resolved")
_WORKLOAD_KEYS = ("name", "source_package", "command")
_CELL_KEYS = keys(CELL_FIELDS, "resolved")
_MITIGATION_KEYS = ("name", "source_package", "env", "process_scoped")
_ENVIRONMENT_KEYS = (
    "name",
    "kind",
    "image",
    "python",
    "rocm",
    "inline",
    "source_package",
    "description",
    "env",
)
_KINDS = ("local", "docker", "venv")


def _mapping(where: Where, path: str, value: object, keys: Sequence[str]) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        where.fail(path, f"expected a mapping with keys {', '.join(keys)}", value)
    check_keys(where, path, value, keys, path or "the resolved recipe")
    return value


def _optional_string(where: Where, path: str, value: object) -> str | None:
    return None if value is None else string(where, path, value)


def _registry_name(where: Where, path: str, value: object) -> str:
    name = string(where, path, value)
    try:
        check_entry_name(name)
    except ValueError:
        where.fail(path, "expected a registry name (letters, digits and '_.+-')", name)
    return name


def _environment(where: Where, path: str, value: object) -> Environment:
    data = _mapping(where, path, value, _ENVIRONMENT_KEYS)
    name = _registry_name(where, join_path(path, "name"), require(where, path, data, "name"))
    safe_name(where, join_path(path, "name"), name)  # it names environments/<name>/
    kind = string(where, join_path(path, "kind"), require(where, path, data, "kind"))
    if kind not in _KINDS:
        where.fail(join_path(path, "kind"), f"expected one of {', '.join(_KINDS)}", kind)
    image = _optional_string(where, join_path(path, "image"), data.get("image"))
    python = _optional_string(where, join_path(path, "python"), data.get("python"))
    if kind == "docker":
        problem = image_ref_problem(image or "")
        if problem:
            where.fail(join_path(path, "image"), problem, image)
    if kind == "venv" and (not python or "\x00" in python or not python.startswith("/")):
        where.fail(join_path(path, "python"), "expected an absolute interpreter path", python)
    return Environment(
        name=name,
        kind=kind,  # type: ignore[arg-type]  # checked against _KINDS above
        description=_optional_string(where, join_path(path, "description"), data.get("description"))
        or "(from recipe.resolved.yaml)",
        source_package=_optional_string(
            where, join_path(path, "source_package"), data.get("source_package")
        )
        or INLINE_SOURCE_PACKAGE,
        image=image,
        python=python,
        rocm=boolean(where, join_path(path, "rocm"), data.get("rocm", False)),
        env=extra_env_mapping(where, join_path(path, "env"), data.get("env", {})),
    )


def _mitigation(where: Where, path: str, value: object) -> Mitigation:
    data = _mapping(where, path, value, _MITIGATION_KEYS)
    return Mitigation(
        name=_registry_name(where, join_path(path, "name"), require(where, path, data, "name")),
        env=extra_env_mapping(where, join_path(path, "env"), require(where, path, data, "env")),
        description="(from recipe.resolved.yaml)",
        source_package=_optional_string(
            where, join_path(path, "source_package"), data.get("source_package")
        )
        or "unknown",
        process_scoped=boolean(
            where, join_path(path, "process_scoped"), data.get("process_scoped", False)
        ),
    )


def _cell(where: Where, index: int, value: object, command: CommandSpec | None) -> Cell:
    path = f"cells[{index}]"
    data = _mapping(where, path, value, _CELL_KEYS)
    name = safe_name(where, join_path(path, "name"), require(where, path, data, "name"))
    raw = require(where, path, data, "mitigations")
    if not isinstance(raw, list) or not raw:
        where.fail(join_path(path, "mitigations"), "expected a non-empty list", raw)
    mitigations = tuple(
        _mitigation(where, f"{path}.mitigations[{i}]", item) for i, item in enumerate(raw)
    )
    check_unique(where, join_path(path, "mitigations"), [m.name for m in mitigations])
    return Cell(
        name=name,
        mitigations=tuple(m.name for m in mitigations),
        environment=_environment(
            where, join_path(path, "environment"), require(where, path, data, "environment")
        ),
        extra_env=extra_env_mapping(where, join_path(path, "extra_env"), data.get("extra_env", {})),
        trials=positive_int(where, join_path(path, "trials"), require(where, path, data, "trials")),
        steps=positive_int(where, join_path(path, "steps"), require(where, path, data, "steps")),
        env=extra_env_mapping(where, join_path(path, "env"), require(where, path, data, "env")),
        mitigation_entries=mitigations,
        command_args=(
            command_args(
                where, join_path(path, "command_args"), data["command_args"], command is not None
            )
            if "command_args" in data
            else ()
        ),
        stop_after_failures=(
            None
            if data.get("stop_after_failures") is None
            else positive_int(
                where, join_path(path, "stop_after_failures"), data["stop_after_failures"]
            )
        ),
    )


def is_resolved_recipe(data: object) -> bool:
    """Whether parsed recipe data is a `recipe.resolved.yaml` (it records its `origin`)."""
    return isinstance(data, Mapping) and "origin" in data


def recipe_from_resolved(
    data: object,
    *,
    label: str | None = None,
    threshold: float | None = None,
    alpha: float | None = None,
    source: Path | None = None,
    sha256: str | None = None,
) -> Recipe:
    """The `Recipe` a run executed, rebuilt and validated from `recipe.resolved.yaml` content.

    A run directory may come from someone else, so everything in it goes through the checks a
    recipe gets (names that become directories, variable names, image references, counts,
    threshold, baseline); errors are one line prefixed with `label` (the file). `threshold` /
    `alpha` replace the recorded ones (re-analysis); `source`/`sha256` default to the recorded
    ones. A file written before `alpha` was recorded gets the default.
    """
    where = Where(label)
    top = _mapping(where, "", data, _RESOLVED_KEYS)
    version = schema_version(where, require(where, "", top, "schema_version"))
    origin = require(where, "", top, "origin")
    if origin not in ("recipe", "flags"):
        where.fail("origin", "expected recipe or flags", origin)
    ticket = None if top.get("ticket") is None else ticket_name(where, "ticket", top["ticket"])
    workload = _mapping(where, "workload", require(where, "", top, "workload"), _WORKLOAD_KEYS)
    workload_name = safe_name(where, "workload.name", require(where, "workload", workload, "name"))
    confound = _mapping(where, "confound", require(where, "", top, "confound"), _CONFOUND_KEYS)
    recorded = valid_threshold(
        where, "confound.threshold", require(where, "confound", confound, "threshold")
    )
    recorded_alpha = (
        DEFAULT_ALPHA
        if confound.get("alpha") is None
        else valid_alpha(where, "confound.alpha", confound["alpha"])
    )
    raw_cells = require(where, "", top, "cells")
    if not isinstance(raw_cells, list) or not raw_cells:
        where.fail("cells", "expected a non-empty list of cells", raw_cells)
    command = _command(where, workload.get("command"))
    cells = [_cell(where, i, item, command) for i, item in enumerate(raw_cells)]
    check_unique(where, "cells", [c.name for c in cells])
    baseline = check_baseline(
        where,
        "confound.baseline_cell",
        require(where, "confound", confound, "baseline_cell"),
        cells,
    )
    recorded_source = _optional_string(where, "source", top.get("source"))
    return Recipe(
        schema_version=version,
        ticket=ticket,
        workload=workload_name,
        trials=positive_int(where, "trials", require(where, "", top, "trials")),
        steps=positive_int(where, "steps", require(where, "", top, "steps")),
        confound=ConfoundSettings(
            threshold=recorded if threshold is None else threshold,
            baseline_cell=baseline,
            alpha=recorded_alpha if alpha is None else alpha,
        ),
        cells=tuple(cells),
        baseline=baseline,
        source=source or (None if recorded_source is None else Path(recorded_source)),
        sha256=sha256 or _optional_string(where, "sha256", top.get("sha256")),
        workload_source_package=_optional_string(
            where, "workload.source_package", workload.get("source_package")
        ),
        resolved=True,
        command=command,
        # Runs written before order modes existed ran their cells one after the other.
        order=order_mode(where, "order", top.get("order", "sequential")),
        order_seed=order_seed(where, "order_seed", top.get("order_seed", 0)),
        # Absent in files written before it existed. Not checked against the installed
        # extra: re-analysis reads this file without running anything.
        fingerprint_kernels=boolean(
            where, "fingerprint_kernels", top.get("fingerprint_kernels", False)
        ),
        locate=boolean(where, "locate", top.get("locate", False)),  # absent before it existed
        # Absent in files written before it existed: those ran locally.
        executor=executor_from_data(where, "executor", top.get("executor")),
        adaptive=adaptive_settings(where, "adaptive", top.get("adaptive")),  # absent: not adaptive
    )


def _command(where: Where, value: object) -> CommandSpec | None:
    # Validated like a recipe's (the executable is checked again here: a resumed run whose
    # program has gone away fails before any trial, with one line).
    if value is None:
        return None
    if not isinstance(value, Mapping):
        where.fail("workload.command", "expected a command workload mapping", value)
    return command_workload(where, "workload.command", value)
