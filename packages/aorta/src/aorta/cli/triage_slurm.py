"""The CLI side of the SLURM executor: `--executor slurm`, `--detach`, `aorta triage status`.

Imported only when a command needs SLURM: `aorta --help` never loads oellm-autoexp.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click

from aorta.text_safety import terminal_text

if TYPE_CHECKING:
    from aorta.triage.recipe import Recipe
    from aorta.triage.slurm.executor import CellQueue


def apply_executor(recipe: Recipe, executor: str | None, slurm_config: Path | None) -> Recipe:
    """`--executor` / `--slurm-config` on top of the recipe's own `executor:`."""
    from aorta.triage.recipe.executor import SlurmSettings, load_slurm_config

    if slurm_config is not None and executor != "slurm":
        raise click.UsageError("--slurm-config: only with --executor slurm")
    if executor is None:
        return recipe
    if executor == "local":
        return dataclasses.replace(recipe, executor=None)
    settings = load_slurm_config(slurm_config) if slurm_config else SlurmSettings()
    return dataclasses.replace(recipe, executor=settings)


class QueueLines:
    """Plain lines (stderr) for the SLURM queue: one per change of the cells' counts."""

    def queue(self, cells: Sequence[CellQueue]) -> None:
        """`slurm: a 1 pending/2 running/1 done, ...; failures so far: N`."""
        parts = [f"{c.name} {c.pending} pending/{c.running} running/{c.done} done" for c in cells]
        failed = sum(c.failed for c in cells)
        errors = sum(c.errors for c in cells)
        click.echo(
            f"aorta triage: slurm: {', '.join(parts)}; failures so far: {failed}"
            + (f", errors: {errors}" if errors else ""),
            err=True,
        )

    def notice(self, message: str) -> None:
        """A line from oellm-autoexp."""
        click.echo(f"aorta triage: slurm: {terminal_text(message)}", err=True)


def say_detached(run_dir: Path, *, adaptive: bool = False) -> None:
    """What to run next after `--detach` (an adaptive run: only its due round went out)."""
    click.echo(f"aorta triage: submitted to SLURM; run directory: {run_dir}")
    click.echo(f"aorta triage: where it stands: aorta triage status {run_dir}")
    from aorta.triage.run.rundir import resume_command

    command = resume_command(run_dir)
    if adaptive:
        # Nothing on the cluster applies the rule: a driver has to see each round finish.
        click.echo(
            "aorta triage: adaptive: only the round now due was submitted; the next one goes "
            f"out when a resume sees this one finished ({command} watches every round to the "
            "end; with --detach it submits the round due and returns)"
        )
    click.echo(f"aorta triage: watch it and write the matrix: {command}")


def print_status(run_dir: Path) -> int:
    """`aorta triage status RUN_DIR`: per cell pending / running / done, failures and errors."""
    from aorta.triage.run.rundir import load_run_recipe
    from aorta.triage.slurm.state import is_slurm_run, load_state

    recipe = load_run_recipe(run_dir)
    if not is_slurm_run(run_dir):
        from aorta.triage.run.rundir import trials_on_disk

        click.echo(f"{run_dir}: a local run")
        for cell in recipe.cells:
            found = len(trials_on_disk(run_dir, cell))
            click.echo(f"  {cell.name}: {found}/{cell.trials} trial(s) on disk")
        return 0
    from aorta.triage.slurm.executor import slurm_status

    rows = slurm_status(recipe, run_dir)
    state = load_state(run_dir, {cell.name: cell.trials for cell in recipe.cells})
    sessions = ", ".join(s.session_id or "(none)" for s in state.submissions) or "none"
    where = "finished" if state.finished else "not finished"
    click.echo(f"{run_dir}: SLURM executor, {where}; oellm-autoexp session(s): {sessions}")
    width = max(len(row.name) for row in rows)
    for row in rows:
        click.echo(
            f"  {row.name:<{width}}  pending {row.pending}  running {row.running}  "
            f"done {row.done}  failed {row.failed}  errors {row.errors}"
        )
    if not state.finished:
        click.echo(
            "(as the last monitor pass saw it; `aorta triage run --resume RUN_DIR` watches on)"
        )
    return 0
