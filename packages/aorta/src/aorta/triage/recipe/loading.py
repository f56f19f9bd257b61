"""Reading a recipe file: YAML (duplicate keys refused) or JSON, then validation.

Decisions where the spec is silent:

- Duplicate keys in a mapping are rejected, in YAML and in JSON (both would silently keep
  the last one).
- The file must be UTF-8 and end in `.yaml`, `.yml` or `.json`; only regular files are read
  (a FIFO would block forever, `/dev/zero` never ends), at most `MAX_RECIPE_BYTES`.
- Hostile structure fails with one line before validation walks it: YAML aliases expanding
  to more than `MAX_EXPANDED_NODES` values ("billion laughs"), nesting deeper than
  `MAX_NESTING`, unhashable keys, integers beyond Python's digit limit,
  lone surrogates in strings and YAML 1.1 base-60 numbers (`1:30` would be 90).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from aorta.triage.errors import RecipeSchemaError
from aorta.triage.recipe.checks import Where
from aorta.triage.recipe.model import RECIPE_SUFFIXES, Recipe
from aorta.triage.recipe.serialisation import is_resolved_recipe, recipe_from_resolved
from aorta.triage.recipe.text import parse_recipe_text, read_regular_file
from aorta.triage.recipe.validation import Registry, recipe_from_data, resolve_workload

__all__ = ["load_recipe"]


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
    raw = read_regular_file(str(path), path)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RecipeSchemaError(f"{path}: expected UTF-8 text ({exc.reason})") from None
    data = parse_recipe_text(str(path), text, json_format=path.suffix.lower() == ".json")
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
