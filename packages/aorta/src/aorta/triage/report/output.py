"""Where a triage run's results go, and what `matrix.json` / `matrix.md` say.

One directory per invocation, never reused:
`<output_root>/<ticket or _no_ticket_>/<workload>/<YYYY-MM-DDTHH-MM-SS>/`, its files laid out
as `aorta.triage.layout.RunDir` says.

`new_run_dir` creates that directory exclusively; `write_report` writes `matrix.json` (full data),
`matrix.png` (the picture, when matplotlib is installed) and `matrix.md` (the readable table).
Every file goes through `aorta.atomic`, so a reader never sees a half-written matrix.

Rendering choices the spec leaves open, made here (the Notes section of matrix.md repeats the
reader-facing ones):

- NaN rate is `failed / trials run` in whole percent, followed by its Wilson interval in
  brackets, also in percent (`50% [22-78]`, with an en dash in the output). Rates that would
  round to 0 % or 100 % without being exactly that read `<1` / `>99`, so a rare failure is
  never shown as "0%".
- Trials is `failed / measured` (measured = passed + failed); errored trials follow in brackets
  (`3 / 7 (+1 error)`); when fewer trials ran than were requested it reads `1 / 6 of 8`.
- p vs baseline is the two-sided Fisher exact p-value, three decimals, `<0.001` below that, `—`
  where there is nothing to compare (the baseline row, errored cells, errored baseline); when
  the Holm adjustment changed it, the adjusted value (the one the labels use) follows,
  `0.077 (Holm 0.231)`.
- Missing numbers read `n/a` (never `—`, which in the Confound column means "trust it").
- Cells the recipe lists but that never ran (interrupted run) and that the matrix does not hold
  get a row labelled `not run`, so the table always shows the whole recipe.
- Free text (warnings, error reasons) is folded onto one line so it cannot break the blockquote
  or the table; names are already restricted to `[A-Za-z0-9_.+-]` by the recipe loader.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from aorta.atomic import create_run_dir
from aorta.instrumentation.redaction import redact_environ
from aorta.triage.analysis.matrix import Matrix, MatrixRow, executions
from aorta.triage.analysis.step_sources import load_range
from aorta.triage.layout import relative_trial_path
from aorta.triage.names import NO_TICKET, runs_parent
from aorta.triage.recipe import Cell, Recipe
from aorta.triage.report.adaptive_report import adaptive_json
from aorta.triage.report.onset_report import onset_json
from toolkit_core.timestamps import dir_stamp, iso_stamp

__all__ = [
    "NO_TICKET",
    "REPORT_SCHEMA_VERSION",
    "MatrixReport",
    "new_run_dir",
    "report_json",
    "runs_parent",
]

REPORT_SCHEMA_VERSION = 1

MISSING = "n/a"
NO_COMPARISON = "\u2014"  # em dash, as the spec's p / confound columns use it
NOT_RUN_LABEL = "not run"
HOST_SCOPE = "host"
ENV_SCOPE_PREFIX = "environment "


@dataclass(frozen=True)
class MatrixReport:
    """Everything `matrix.json` and `matrix.md` are rendered from.

    `partial_scopes` names the probe scopes whose environment snapshot is partial (`"host"`,
    `"environment <name>"`); `cells_not_run` names the recipe cells an interrupted run never
    reached; `resumed_at` lists when `aorta triage run --resume` added trials to the run.
    """

    recipe: Recipe
    matrix: Matrix
    run_dir: Path
    run_timestamp: str  # ISO UTC, e.g. "2026-04-28T14:12:03Z"
    partial_scopes: tuple[str, ...] = ()
    interrupted: bool = False
    cells_not_run: tuple[str, ...] = ()
    resumed_at: tuple[str, ...] = ()
    # Interleaved order: the cells of each round, in the order they ran (all attempts).
    rounds: tuple[tuple[str, ...], ...] = ()
    # Docker environments: the digest of the image that ran, or "unresolved".
    image_digests: Mapping[str, str] = field(default_factory=dict)
    # SLURM executor: cells with trials still queued or running when this matrix was written.
    in_progress: tuple[str, ...] = ()


# --------------------------------------------------------------------------- layout


def new_run_dir(output_root: Path, recipe: Recipe, now: datetime) -> tuple[Path, str]:
    """Create `<output_root>/<ticket or _no_ticket_>/<workload>/<YYYY-MM-DDTHH-MM-SS>/`.

    The directory is created exclusively and never reused: a second run in the same second
    gets `-1`, `-2`, ... appended (`aorta.atomic.create_run_dir`). `now` is converted to UTC (a
    naive value is taken as UTC). Returns the directory and the run timestamp as ISO UTC text
    (`2026-04-28T14:12:03Z`). Raises `ValueError` if the ticket or workload is not a safe
    directory name (the recipe loader already guarantees it; this guards other callers).
    """
    run_dir = create_run_dir(
        runs_parent(output_root, recipe), dir_stamp(now), root=Path(output_root)
    )
    return run_dir, iso_stamp(now)


# --------------------------------------------------------------------------- matrix.json


def recipe_cells(recipe: Recipe) -> dict[str, Cell]:
    return {cell.name: cell for cell in recipe.cells}


def _environment_descriptor(cell: Cell, digests: Mapping[str, str]) -> dict[str, Any]:
    env = cell.environment
    descriptor: dict[str, Any] = {
        "name": env.name,
        "kind": env.kind,
        "image": env.image,
        "source_package": env.source_package,
    }
    if env.kind == "docker":
        descriptor["image_digest"] = digests.get(env.name, "unresolved")
    return descriptor


def row_label(row: MatrixRow, report: MatrixReport) -> str:
    """The row's Confound label; a cell an interrupted run never reached reads `not run`."""
    if row.name in report.cells_not_run and row.stats.trials_run == 0:
        return NOT_RUN_LABEL
    return row.confound


def _cell_json(row: MatrixRow, cell: Cell | None, report: MatrixReport) -> dict[str, Any]:
    data = row.to_dict(report.matrix.alpha)
    data["confound"] = row_label(row, report)
    paths = [relative_trial_path(row.name, t.trial_id) for t in row.stats.trials]
    for trial, path in zip(data["trials"], paths, strict=True):
        trial["path"] = path
    data["trial_paths"] = paths
    # A row without a recipe cell should not happen (the runner builds both from one recipe);
    # the configuration fields are then null rather than the whole report failing.
    data["mitigations"] = list(cell.mitigations) if cell is not None else None
    data["environment"] = (
        _environment_descriptor(cell, report.image_digests) if cell is not None else None
    )
    # Redacted like every recorded environment; recipe.resolved.yaml keeps the real values
    # because resume re-runs them.
    data["env"] = redact_environ(cell.env) if cell is not None else None
    data["extra_env"] = redact_environ(cell.extra_env) if cell is not None else None
    # "trials" already holds the per-trial records, hence the "effective_" prefix.
    data["effective_trials"] = cell.trials if cell is not None else None
    data["effective_steps"] = cell.steps if cell is not None else None
    data["onset"] = onset_json(row.stats.trials)
    return data


def report_json(report: MatrixReport) -> dict[str, Any]:
    """The content of `matrix.json`: strict JSON (`json.dumps(..., allow_nan=False)` accepts it).

    Top level: schema version, ticket, workload, recipe origin (path + sha256, or flags), run
    timestamp, baseline and its mean step time, threshold / confidence / alpha / smallest_cure,
    interruption state, partial probe scopes, the matrix's warnings and notes. Per cell: everything
    `MatrixRow.to_dict` gives (counts, stats, raw step times, ratio, confound, evidence) plus
    the cell's mitigations, resolved env vars (`env`), `extra_env`, environment descriptor,
    effective trials/steps and the trial JSON paths relative to the run directory.
    """
    recipe, matrix = report.recipe, report.matrix
    cells = recipe_cells(recipe)
    return {
        "schema_version": REPORT_SCHEMA_VERSION,
        "ticket": recipe.ticket,
        "workload": recipe.workload,
        "workload_source_package": recipe.workload_source_package,
        "recipe": {
            "origin": "recipe" if recipe.source is not None else "flags",
            "source": None if recipe.source is None else str(recipe.source),
            "sha256": recipe.sha256,
        },
        "run_timestamp": report.run_timestamp,
        "resumed_at": list(report.resumed_at),
        "order": {
            "mode": recipe.order,
            "seed": recipe.order_seed,
            "rounds": [list(names) for names in report.rounds],
        },
        "executions": list(executions([row.stats for row in matrix.rows])),
        "trials": recipe.trials,
        "steps": recipe.steps,
        "baseline": matrix.baseline,
        "baseline_mean_step_time_ms": _finite_or_none(matrix.baseline_row.stats.mean_step_time_ms),
        "threshold": matrix.threshold,
        "confidence": matrix.confidence,
        "alpha": matrix.alpha,
        "smallest_cure": matrix.smallest_cure,
        "interrupted": report.interrupted,
        "cells_not_run": list(report.cells_not_run),
        "cells_in_progress": list(report.in_progress),
        "partial_scopes": list(report.partial_scopes),
        "host_load": _host_load_json(matrix),
        "warnings": list(matrix.warnings),
        "notes": list(matrix.notes),
        "cells": [_cell_json(row, cells.get(row.name), report) for row in matrix.rows],
        "adaptive": adaptive_json(matrix, recipe),
    }


def _host_load_json(matrix: Matrix) -> dict[str, Any] | None:
    found = load_range([row.stats for row in matrix.rows])
    return None if found is None else found.to_dict()


def _finite_or_none(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)
