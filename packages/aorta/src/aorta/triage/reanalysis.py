"""`aorta triage matrix <run-dir>`: rebuild a run's matrix from the files on disk.

Nothing runs: the recipe comes back from `recipe.resolved.yaml` (the recipe as executed, so
the registry of today plays no part), every cell from its `cells/<cell>/trial_*.json`, and a
cell that has no trial files keeps the error recorded in the previous `matrix.json`. The
previous `matrix.md` / `matrix.json` are moved to `previous/<timestamp>/` first: a
re-analysis never destroys the matrix it replaces.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from aorta.atomic import create_run_dir
from aorta.errors import AortaUsageError
from aorta.registry.models import Environment, Mitigation
from aorta.runner.models import TrialResult
from aorta.triage.matrix import CellStats, aggregate_cell, build_matrix, error_cell
from aorta.triage.output import JSON_NAME, MARKDOWN_NAME, MatrixReport, cell_dir, write_report
from aorta.triage.recipe import Cell, ConfoundSettings, Recipe

NO_TRIALS = "no trial results on disk"


def _load(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
        return json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (OSError, ValueError, yaml.YAMLError) as exc:
        reason = " ".join(str(exc).split())  # YAML errors span lines; ours is one line
        raise AortaUsageError(f"{path}: cannot read it as a triage run file: {reason}") from None


def _cell(data: Mapping[str, Any]) -> Cell:
    env_data = {k: v for k, v in data["environment"].items() if k != "inline"}
    mitigations = tuple(
        Mitigation(
            name=m["name"],
            env=m["env"],
            description="(from recipe.resolved.yaml)",
            source_package=m["source_package"],
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
    )


def _cell_stats(run_dir: Path, cell: Cell, previous_errors: Mapping[str, str]) -> CellStats:
    paths = sorted(cell_dir(run_dir, cell.name).glob("trial_*.json"))
    if not paths:
        reason = previous_errors.get(cell.name, NO_TRIALS)
        return error_cell(cell.name, reason, trials_requested=cell.trials)
    results = [TrialResult.from_dict(_load(path)) for path in paths]
    return aggregate_cell(cell.name, results, trials_requested=cell.trials)


def _partial_scopes(run_dir: Path) -> tuple[str, ...]:
    scopes = []
    host = run_dir / "host_env.json"
    if host.exists() and _load(host).get("partial"):
        scopes.append("host")
    for env_file in sorted((run_dir / "environments").glob("*/env.json")):
        if _load(env_file).get("partial"):
            scopes.append(f"environment {env_file.parent.name}")
    return tuple(scopes)


def reanalyze(
    run_dir: Path, *, threshold: float | None = None, now: datetime | None = None
) -> MatrixReport:
    """Rebuild and rewrite `run_dir`'s matrix (optionally with another confound threshold)."""
    resolved = run_dir / "recipe.resolved.yaml"
    if not resolved.is_file():
        raise AortaUsageError(f"{run_dir}: not a triage run directory (no recipe.resolved.yaml)")
    if threshold is not None and not threshold > 0:
        raise AortaUsageError(f"--confound-threshold: expected a positive number, got {threshold}")
    try:
        recipe = recipe_from_resolved(_load(resolved), threshold=threshold)
    except (KeyError, TypeError, ValueError) as exc:
        raise AortaUsageError(
            f"{resolved}: not a recipe.resolved.yaml aorta wrote: {exc}"
        ) from None
    previous_path = run_dir / JSON_NAME
    previous = _load(previous_path) if previous_path.exists() else {}
    errors = {c["name"]: c["error"] for c in previous.get("cells", []) if c.get("error")}
    stats = [_cell_stats(run_dir, cell, errors) for cell in recipe.cells]
    matrix = build_matrix(stats, baseline=recipe.baseline, threshold=recipe.confound.threshold)
    moment = now or datetime.now(UTC)
    existing = [run_dir / name for name in (MARKDOWN_NAME, JSON_NAME) if (run_dir / name).exists()]
    if existing:
        archive = create_run_dir(run_dir / "previous", moment.strftime("%Y-%m-%dT%H-%M-%S"))
        for path in existing:
            path.rename(archive / path.name)
    # Cells an interrupted run never reached, unless their trials have appeared since.
    not_run = tuple(
        s.name for s in stats if s.error and s.name in previous.get("cells_not_run", ())
    )
    report = MatrixReport(
        recipe=recipe,
        matrix=matrix,
        run_dir=run_dir,
        run_timestamp=previous.get("run_timestamp") or moment.strftime("%Y-%m-%dT%H:%M:%SZ"),
        partial_scopes=_partial_scopes(run_dir),
        interrupted=bool(previous.get("interrupted")),
        cells_not_run=not_run,
    )
    write_report(report)
    return report
