"""The `oellm-autoexp` command.

Exit codes: 0 ok, 1 the run failed, 2 usage or config error, 130 interrupted. A user mistake is
one line on stderr, never a traceback. Imports here stay light (click only): `--help` must not
pay for Hydra, OmegaConf, Jinja2 or any backend; commands import what they need when they run.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from oellm_autoexp.errors import EXIT_OK
from toolkit_core.cli import LazyGroup, console_exit, run_cli, version_option

if TYPE_CHECKING:
    from oellm_autoexp.plan import Plan
    from oellm_autoexp.planning import PlanResult, WrittenPlan

SUMMARY_ROWS = 20

_config_argument = click.argument("config")
_overrides_argument = click.argument("overrides", nargs=-1)
_config_dir_option = click.option(
    "--config-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Hydra config tree to load CONFIG names from (default: the packaged tree).",
)
_test_only_option = click.option(
    "--test-only",
    "test_only",
    type=click.Choice(["auto", "always", "never"]),
    default=None,
    help="Run `sbatch --test-only` on the scripts: auto (when sbatch is on PATH; a rejection is "
    "a warning), always (a rejection fails), never. Default: slurm.test_only.",
)


# monitor, status, cleanup (oellm_autoexp.cli.monitor) and migrate (oellm_autoexp.cli.migrate)
# are imported when they run or `--help` lists them: `submit` and `plan` do not use them.
_LAZY_COMMANDS = {
    "monitor": "oellm_autoexp.cli.monitor:monitor_command",
    "status": "oellm_autoexp.cli.monitor:status_command",
    "cleanup": "oellm_autoexp.cli.monitor:cleanup_command",
    "migrate": "oellm_autoexp.cli.migrate:migrate_command",
}


@click.group(
    cls=LazyGroup,
    lazy=_LAZY_COMMANDS,
    context_settings={"help_option_names": ["-h", "--help"]},
)
@version_option("oellm-autoexp", "oellm-autoexp")
@click.option(
    "-v",
    "--verbose",
    is_flag=True,
    help="Also show what backends print while validating (e.g. Megatron's import warnings).",
)
def cli(verbose: bool) -> None:
    """One YAML config to SLURM job arrays.

    Expand a sweep, render SBATCH scripts, submit them, monitor the jobs and restart them by
    policy, with resumable session state. SLURM does the scheduling.

    CONFIG is a YAML file path or a config name from the Hydra tree (e.g. `autoexp`),
    followed by overrides such as `sweep=lr_grid project.name=run1 +slurm.sbatch.qos=high`.
    """
    if verbose:
        _show_backend_output()


def _show_backend_output() -> None:
    """Send what backend validation captured (logger ``oellm_autoexp.megatron``) to stderr."""
    import logging

    logger = logging.getLogger("oellm_autoexp.megatron")
    logger.setLevel(logging.INFO)
    if any(h.get_name() == "oellm-autoexp-verbose" for h in logger.handlers):
        return  # main() called again in the same process
    handler = logging.StreamHandler()
    handler.set_name("oellm-autoexp-verbose")
    handler.setFormatter(logging.Formatter("oellm-autoexp: %(message)s"))
    logger.addHandler(handler)


def _plan(
    config: str, overrides: Sequence[str], config_dir: Path | None, test_only: str | None
) -> tuple[PlanResult, list[str]]:
    from oellm_autoexp.api_plan import plan  # what `api.plan` is, without the rest of `api`

    notes = _Notes()
    result = plan(config, overrides, config_dir=config_dir, test_only=test_only, reporter=notes)
    return result, notes.lines


class _Notes:
    """Collects the plan's notes: `plan` prints them after its summary, `submit` before."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def info(self, message: str) -> None:
        self.lines.append(message)

    def warning(self, message: str) -> None:
        self.lines.append(message)

    def action(self, action: Any) -> None:
        """Planning produces no monitor events."""


@cli.command("plan")
@_config_argument
@_overrides_argument
@_config_dir_option
@_test_only_option
@click.option("--all", "show_all", is_flag=True, help="List every job, not only the first 20.")
def plan_command(
    config: str,
    overrides: tuple[str, ...],
    config_dir: Path | None,
    test_only: str | None,
    show_all: bool,
) -> None:
    """Expand the sweep and write scripts and plan files; submit nothing."""
    from dataclasses import replace

    from oellm_autoexp.api_plan import plan_streamed  # `api.plan_streamed`

    collected = _Notes()
    written = plan_streamed(
        config, overrides, config_dir=config_dir, test_only=test_only, reporter=collected
    )
    if show_all and written.jobs > len(written.plan.jobs):
        # --all lists every job: read back the plan just written.
        full = _read_plan(written.plan.plan_dir)
        written = replace(written, plan=full)
    _print_summary(written, show_all=show_all)
    for note in collected.lines:
        click.echo(note, err=note.startswith("warning"))


@cli.command("submit")
@_config_argument
@_overrides_argument
@_config_dir_option
@_test_only_option
@click.option("--dry-run", is_flag=True, help="Print the scripts and exact sbatch commands only.")
@click.option(
    "--no-monitor", is_flag=True, help="Return after submission; monitor later with `monitor`."
)
@click.option(
    "--yes",
    "-y",
    "assume_yes",
    is_flag=True,
    help="Submit without asking, even above scheduler.confirm_above_hours.",
)
@click.option(
    "--array-subset",
    default=None,
    metavar="LIST",
    help="Submit only these jobs of the plan (its '#' column), e.g. 3,5-7.",
)
@click.option(
    "--chain",
    "--repeat",
    "chain",
    type=int,
    default=1,
    metavar="N",
    help="Submit the jobs N times, each waiting for the previous one to end (afterany).",
)
@click.option(
    "--local",
    is_flag=True,
    help="Run the jobs on this machine without SLURM, one at a time, same logs and markers.",
)
@click.option(
    "--attach",
    is_flag=True,
    help="If a session of this plan is still active, monitor it instead of submitting again.",
)
@click.option(
    "--new-session",
    is_flag=True,
    help="Submit even if a session of this plan is still active (its jobs run twice).",
)
def submit_command(
    config: str,
    overrides: tuple[str, ...],
    config_dir: Path | None,
    test_only: str | None,
    dry_run: bool,
    no_monitor: bool,
    assume_yes: bool,
    array_subset: str | None,
    chain: int,
    local: bool,
    attach: bool,
    new_session: bool,
) -> int:
    """Plan, then submit the scripts with sbatch and monitor the jobs.

    Prints the GPU-hours the plan requests and asks before submitting more than
    scheduler.confirm_above_hours (--yes: do not ask; no terminal: refused without --yes).
    With --dry-run: print every script and the exact sbatch commands; submit nothing.
    While an earlier session of the same plan is active, submitting is refused unless
    --attach (monitor that session) or --new-session (submit again).
    """
    if attach and new_session:
        raise click.UsageError("--attach and --new-session exclude each other")
    result, notes = _plan(config, overrides, config_dir, test_only)
    for note in notes:
        click.echo(note, err=True)
    # --- cost gate (oellm_autoexp.plan_cost) ---
    from oellm_autoexp.plan_cost import confirm_cost, plan_cost
    from oellm_autoexp.submit_options import (
        check_chain,
        check_local,
        describe_selection,
        parse_subset,
    )

    only = None
    if array_subset is not None:  # checked before the cost prompt, not after it
        only = parse_subset(array_subset, [job.index for job in result.plan.jobs])
    cost = plan_cost(result.plan, only=only, copies=check_chain(chain))
    click.echo(f"plan {result.plan.plan_id} {cost.describe()}", err=True)
    if local:
        check_local(result.config, monitor=not no_monitor, dry_run=dry_run)
    if_active = "attach" if attach else "new" if new_session else "refuse"
    attaching: list[Any] = []
    if not dry_run and not local:  # refused (or attached) before the cost question
        from oellm_autoexp import api

        attaching = api.earlier_submission(result, array_subset=array_subset, if_active=if_active)
    if not dry_run and not local and not attaching:  # a local run spends no cluster time
        confirm_cost(
            cost,
            result.config.get("scheduler", {}).get("confirm_above_hours"),
            assume_yes=assume_yes,
            interactive=sys.stdin.isatty(),
            ask=lambda question: click.confirm(question, default=False, err=True),
        )
    # --- end cost gate ---
    if not dry_run:
        from oellm_autoexp.cli.monitor import run_submit

        return run_submit(
            result,
            monitor=not no_monitor,
            array_subset=array_subset,
            chain=chain,
            local=local,
            if_active=if_active,
        )
    for script in result.plan.scripts:
        click.echo(f"# ---- {script.path}")
        click.echo(result.scripts[script.path], nl=False)
    click.echo("# ---- sbatch commands (dry run: nothing was submitted)")
    import shlex

    from oellm_autoexp.sweep.stages import submission_note

    for script, argv in zip(result.plan.scripts, result.plan.sbatch_commands(), strict=True):
        waits = submission_note(result.plan, script)
        click.echo(shlex.join(argv) + (f"  # {waits}" if waits else ""))
    selection = describe_selection(only, chain)
    if selection:  # the commands above are the whole plan's; say what the flags change
        click.echo(f"# {selection}")
    return EXIT_OK


def _print_summary(written: WrittenPlan, *, show_all: bool) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    plan = written.plan
    # Every value printed here comes from the config (sweep values, names, paths): data, never
    # Rich markup, so `[dummy] training` prints as written and `[/]` cannot raise.
    console = Console(highlight=False, markup=False)
    if not console.is_terminal:  # piped: no line-wrapping at 80 columns
        console = Console(highlight=False, markup=False, width=200)
    arrays = sum(1 for s in plan.scripts if s.array_spec)
    console.print(
        f"plan {plan.plan_id}: {written.jobs} job(s) in {len(plan.scripts)} script(s) "
        f"({arrays} array(s)); nothing submitted"
    )
    table = Table(show_edge=False, pad_edge=False)
    stage_columns = ("stage", "starts") if written.staged else ()
    for column in ("#", "name", "job id", *stage_columns, "script", "task", "params"):
        table.add_column(column, overflow="fold")
    jobs = plan.jobs if show_all else plan.jobs[:SUMMARY_ROWS]
    names = {job.job_id: job.name for job in plan.jobs}
    for job in jobs:
        params = " ".join(f"{k}={_short(v)}" for k, v in job.params.items())
        task = str(job.array.task_index) if job.array else "-"
        stage_cells: tuple[str, ...] = ()
        if written.staged:
            link = job.stage
            starts = "at once"
            if link is not None and link.after is not None:
                starts = f"{link.start} of {names.get(link.after, link.after)}"
            stage_cells = (link.stage if link else "-", starts)
        cells = (str(job.index), job.name, job.job_id, *stage_cells, job.script.name, task, params)
        table.add_row(*(Text(cell) for cell in cells))
    console.print(table)
    if len(jobs) < written.jobs:
        console.print(f"... and {written.jobs - len(jobs)} more (--all lists every job)")
    # --- sweep.filter and cost lines (oellm_autoexp.sweep.filter, oellm_autoexp.plan_cost) ---
    from oellm_autoexp.plan_cost import cost_of_directives

    if written.config.get("sweep", {}).get("filter"):
        console.print(f"sweep.filter: {written.jobs} of {written.combinations} combinations kept")
    console.print(f"cost: {cost_of_directives(written.sbatch_counts).describe()}")
    # --- end ---
    console.print(
        f"artifacts: {plan.plan_dir}  (plan.json, provenance.json, sweep.json, config.yaml, "
        "scripts/)"
    )


def _read_plan(plan_dir: Path) -> Plan:
    import json

    from oellm_autoexp.plan import Plan

    return Plan.from_dict(json.loads((plan_dir / "plan.json").read_text(encoding="utf-8")))


def _short(value: Any) -> str:
    text = repr(value) if isinstance(value, str) and " " in value else str(value)
    return text if len(text) <= 40 else text[:37] + "..."


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI and map outcomes to exit codes (`toolkit_core.cli.run_cli`)."""
    return run_cli(cli, argv, "oellm-autoexp")


def console_main() -> int:
    """The `oellm-autoexp` console script (and ``python -m oellm_autoexp.cli``): `main`, then
    exit without a final walk of every object (`toolkit_core.cli.console_exit`)."""
    return console_exit(main)
