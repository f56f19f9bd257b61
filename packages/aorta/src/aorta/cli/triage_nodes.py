"""`aorta triage nodes RUN_DIR`: per-node failure rates and the nodes to exclude.

Reads the run's trial files only (no torch, no SLURM). stdout carries just the exclusion list
(so `--exclude=$(aorta triage nodes RUN)` works), the table goes to stderr.
"""

from __future__ import annotations

import json
from pathlib import Path

import click


def print_nodes(run_dir: Path, alpha: float | None, as_json: bool) -> int:
    """Print the per-node table (stderr) and the suspect nodes (stdout)."""
    from aorta.triage.analysis.nodes import (
        exclusion_document,
        exclusion_list,
        node_banner,
        node_rates,
        suspect_nodes,
    )
    from aorta.triage.recipe.checks import Where, valid_alpha
    from aorta.triage.run.rundir import load_run_recipe, trials_on_disk

    recipe = load_run_recipe(run_dir)
    level = recipe.confound.alpha if alpha is None else valid_alpha(Where(None), "--alpha", alpha)
    pairs = [
        (None if t.host is None else t.host.node, t.outcome)
        for cell in recipe.cells
        for t in trials_on_disk(run_dir, cell)
    ]
    rates = node_rates(pairs)
    if not rates:
        click.echo(f"{run_dir}: no measured trial records a node", err=True)
    width = max((len(r.node) for r in rates), default=0)
    for r in rates:
        p = "n/a (one node)" if r.p_adjusted is None else f"{r.p_adjusted:.3g}"
        click.echo(
            f"  {r.node:<{width}}  failed {r.failures}/{r.trials}  "
            f"rest {r.rest_failures}/{r.rest_trials}  adjusted p {p}",
            err=True,
        )
    banner = node_banner(rates, level)
    click.echo(banner or f"no node stands out at alpha {level}", err=True)
    suspects = suspect_nodes(rates, level)
    if as_json:
        click.echo(json.dumps(exclusion_document(suspects), indent=2))
    else:
        click.echo(exclusion_list(suspects))
    return 0


@click.command("nodes")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--alpha", type=float, default=None, help="Significance level (default: the run's).")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print oellm-autoexp's excluded_nodes.json document instead of node1,node2.",
)
def nodes_command(run_dir: Path, alpha: float | None, as_json: bool) -> int:
    """Failure rate per node of RUN_DIR (Fisher vs the other nodes, Holm-adjusted); print the
    nodes where failures concentrate, comma-separated, as `sbatch --exclude` and
    oellm-autoexp's node exclusion take them. Runs nothing."""
    return print_nodes(run_dir, alpha, as_json)
