"""Reading a recipe file: YAML (duplicate keys refused) or JSON, then validation.

Decisions where the spec is silent:

- Duplicate keys in a YAML mapping are rejected (YAML would silently keep the last one).
- The file must be UTF-8 and end in `.yaml`, `.yml` or `.json`.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import yaml

from aorta.triage.errors import RecipeSchemaError
from aorta.triage.recipe.model import RECIPE_SUFFIXES, Recipe
from aorta.triage.recipe.serialisation import is_resolved_recipe, recipe_from_resolved
from aorta.triage.recipe.validation import Registry, Where, recipe_from_data, resolve_workload

__all__ = ["load_recipe"]


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
    if is_resolved_recipe(data):
        # A run's recipe.resolved.yaml re-runs as recorded: pinned to its env bundles.
        recipe = recipe_from_resolved(
            data, label=str(path), source=path, sha256=hashlib.sha256(raw).hexdigest()
        )
        # The workload is code of this machine: it must be installed here.
        resolve_workload(Where(str(path)), "workload.name", recipe.workload, Registry.load())
        return recipe
    return recipe_from_data(
        Where(str(path)), data, source=path, sha256=hashlib.sha256(raw).hexdigest()
    )
