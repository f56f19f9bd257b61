"""Errors of the triage recipe: one line each, naming the file, the key path and the expectation."""

from __future__ import annotations

from collections.abc import Sequence

from aorta.errors import AortaUsageError


class RecipeSchemaError(AortaUsageError):
    """The recipe (file or flags) does not follow the schema: wrong type, missing/unknown key."""


class UntrustedRecipeError(AortaUsageError):
    """A recipe read back from a run directory would execute something this machine does not
    vouch for (a venv interpreter, a docker image, changed mitigation variables)."""


class RecipeProblemsError(RecipeSchemaError):
    """Several independent problems of one recipe, one line each (all reported at once)."""

    def __init__(self, problems: Sequence[AortaUsageError]) -> None:
        super().__init__("\n".join(str(p) for p in problems))
        self.problems = tuple(problems)


class RecipeCellError(AortaUsageError):
    """One cell is well-formed but contradictory, e.g. two mitigations set one variable."""
