"""`recipe.resolved.yaml`: the recipe as executed, written and read back in one place.

Writing expands every registry name (mitigation env bundles, environment kind/image); reading
rebuilds the `Recipe` from those expanded values, so today's registry plays no part when a
run directory is re-analysed or resumed.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from aorta.registry.models import Environment, Mitigation
from aorta.triage.recipe.model import INLINE_SOURCE_PACKAGE, Cell, ConfoundSettings, Recipe

__all__ = ["dump_resolved_yaml", "recipe_from_resolved", "resolved_recipe_dict"]


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
        "workload": {"name": recipe.workload, "source_package": recipe.workload_source_package},
        "trials": recipe.trials,
        "steps": recipe.steps,
        "order": recipe.order,
        "order_seed": recipe.order_seed,
        "confound": {"threshold": recipe.confound.threshold, "baseline_cell": recipe.baseline},
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
            }
            for cell in recipe.cells
        ],
    }


def dump_resolved_yaml(recipe: Recipe) -> str:
    """`resolved_recipe_dict(recipe)` as YAML text, keys in schema order."""
    return yaml.safe_dump(resolved_recipe_dict(recipe), sort_keys=False, allow_unicode=True)


# --------------------------------------------------------------------------- read back


def _cell(data: Mapping[str, Any]) -> Cell:
    env_data = {k: v for k, v in data["environment"].items() if k != "inline"}
    mitigations = tuple(
        Mitigation(
            name=m["name"],
            env=m["env"],
            description="(from recipe.resolved.yaml)",
            source_package=m["source_package"],
            process_scoped=m.get("process_scoped", False),
        )
        for m in data["mitigations"]
    )
    return Cell(
        name=data["name"],
        mitigations=tuple(m.name for m in mitigations),
        environment=Environment(**env_data),
        extra_env=data["extra_env"],
        trials=data["trials"],
        steps=data["steps"],
        env=data["env"],
        mitigation_entries=mitigations,
        stop_after_failures=data.get("stop_after_failures"),
    )


def recipe_from_resolved(data: Mapping[str, Any], *, threshold: float | None = None) -> Recipe:
    """The `Recipe` a run executed, rebuilt from its `recipe.resolved.yaml` content."""
    confound = data["confound"]
    source = data.get("source")
    return Recipe(
        schema_version=data["schema_version"],
        ticket=data["ticket"],
        workload=data["workload"]["name"],
        trials=data["trials"],
        steps=data["steps"],
        confound=ConfoundSettings(
            threshold=confound["threshold"] if threshold is None else threshold,
            baseline_cell=confound["baseline_cell"],
        ),
        cells=tuple(_cell(cell) for cell in data["cells"]),
        baseline=confound["baseline_cell"],
        source=None if source is None else Path(source),
        sha256=data.get("sha256"),
        workload_source_package=data["workload"].get("source_package"),
        # Runs written before order modes existed ran their cells one after the other.
        order=data.get("order", "sequential"),
        order_seed=data.get("order_seed", 0),
    )
