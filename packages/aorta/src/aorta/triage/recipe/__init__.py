"""The triage recipe: schema, loader (YAML/JSON), flag -> recipe builder, resolved dump.

Modules: `model` (the frozen data), `fields` (every field declared once: keys, flags),
`validation` (checks and name resolution), `loading` (files), `flags` (flag mode),
`serialisation` (`recipe.resolved.yaml`, written and read back).

A recipe names a workload, trial/step counts, confound settings and an explicit list of cells
(mitigations x environment). Validation happens once, here, at load time; what comes out is a
frozen `Recipe` whose cells carry everything the runner needs (resolved environment, merged
env vars, effective trials/steps). Both `load_recipe()` and `recipe_from_flags()` go through
the same resolution helpers, so the two modes cannot drift apart.

Every error is one line: `<file>: <key path>: expected ..., got ...`. Flag mode uses the flag
name as the key path (`--mitigation-axis[1]`) and no file prefix.

Decisions where the spec is silent (documented in the docstrings below as well):

- `trials`/`steps` are positive ints; YAML booleans are not ints here.
- `confound.threshold` is a finite number >= 1.0 (`confound.threshold_problem`, the one check
  every threshold goes through).
- `extra_env` values must be strings (quote them in YAML): YAML would turn `1.0` into a float
  and back into `"1.0"` or `"1"` depending on the writer, a silent surprise in an env var.
- String fields (`ticket`, names) must be YAML strings: `ticket: 2024-01-01` or `name: yes`
  are rejected with "quote it" rather than stringified.
- A mitigation listed twice in one cell is rejected (almost always a typo).
- Duplicate keys in a YAML mapping are rejected (YAML would silently keep the last one).
- Nothing from a recipe reaches a shell: the runner passes names and image refs as argv items.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from aorta.triage.analysis.confound import DEFAULT_CONFOUND_THRESHOLD
    from aorta.triage.errors import RecipeCellError, RecipeSchemaError, UntrustedRecipeError
    from aorta.triage.recipe.flags import recipe_from_flags
    from aorta.triage.recipe.loading import load_recipe
    from aorta.triage.recipe.model import (
        IMAGE_PREFIX,
        INLINE_SOURCE_PACKAGE,
        RECIPE_SUFFIXES,
        SUPPORTED_SCHEMA_VERSIONS,
        Cell,
        ConfoundSettings,
        Recipe,
    )
    from aorta.triage.recipe.serialisation import (
        dump_resolved_yaml,
        recipe_from_resolved,
        resolved_recipe_dict,
    )
    from aorta.triage.recipe.trust import check_trust

# Loaded on first use: the CLI builds its flag-mode options from `recipe.fields` at import
# time, and `aorta triage --help` must not pay for the readers (YAML, the registry).
_HOME = {
    "DEFAULT_CONFOUND_THRESHOLD": "aorta.triage.analysis.confound",
    "RecipeCellError": "aorta.triage.errors",
    "RecipeSchemaError": "aorta.triage.errors",
    "UntrustedRecipeError": "aorta.triage.errors",
    "recipe_from_flags": "aorta.triage.recipe.flags",
    "load_recipe": "aorta.triage.recipe.loading",
    "IMAGE_PREFIX": "aorta.triage.recipe.model",
    "INLINE_SOURCE_PACKAGE": "aorta.triage.recipe.model",
    "RECIPE_SUFFIXES": "aorta.triage.recipe.model",
    "SUPPORTED_SCHEMA_VERSIONS": "aorta.triage.recipe.model",
    "Cell": "aorta.triage.recipe.model",
    "ConfoundSettings": "aorta.triage.recipe.model",
    "Recipe": "aorta.triage.recipe.model",
    "dump_resolved_yaml": "aorta.triage.recipe.serialisation",
    "recipe_from_resolved": "aorta.triage.recipe.serialisation",
    "resolved_recipe_dict": "aorta.triage.recipe.serialisation",
    "check_trust": "aorta.triage.recipe.trust",
}


def __getattr__(name: str) -> object:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # once: later lookups are plain attribute reads
    return value


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
    "UntrustedRecipeError",
    "check_trust",
    "dump_resolved_yaml",
    "load_recipe",
    "recipe_from_flags",
    "recipe_from_resolved",
    "resolved_recipe_dict",
]
