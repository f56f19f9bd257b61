"""Workload parameters of a recipe, checked the way the real run checks them.

The real run calls the workload's validator (e.g. `FsdpConfig.from_environ`) under each cell's
environment before its first trial; `--dry-run` calls the same validator here, so what the
dry run accepts is what runs (`AORTA_FSDP_LR: banana` fails in both).
"""

from __future__ import annotations

from collections.abc import Mapping

from aorta.errors import WorkloadConfigError
from aorta.registry.loader import load_workloads
from aorta.triage.recipe.model import Recipe


def check_workload_parameters(recipe: Recipe, environ: Mapping[str, str]) -> None:
    """Raise a one-line `WorkloadConfigError` naming the recipe and cell for a bad parameter.

    `environ` is the process environment the cells' variables are applied over (the real run
    applies them over `os.environ`). A workload without a validator, or one not installed
    here, is not checked (loading the recipe already refused an unknown workload).
    """
    workload = load_workloads().get(recipe.workload)
    if workload is None or workload.validate is None:
        return
    label = str(recipe.source) if recipe.source is not None else "flags"
    for index, cell in enumerate(recipe.cells):
        try:
            workload.validate({**environ, **cell.env})
        except WorkloadConfigError as exc:
            raise WorkloadConfigError(f"{label}: cells[{index}] ({cell.name}): {exc}") from None
