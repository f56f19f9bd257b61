"""`aorta triage`: the mitigation x environment matrix (recipe mode and flag mode)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from aorta.cli.command_options import command_options
from aorta.cli.recipe_options import recipe_flag_options, recipe_flag_params
from aorta.cli.triage_nodes import nodes_command
from aorta.instrumentation.redaction import redact_value
from aorta.runner.command.flags import COMMAND_FLAGS, command_mapping
from aorta.text_safety import terminal_text

if TYPE_CHECKING:
    from aorta.cli.progress import ProgressMode
    from aorta.runner.command.spec import CommandSpec
    from aorta.triage.recipe import Cell, Recipe
    from aorta.triage.report.writer import PlotDrawer


def _split(value: str | None) -> list[str]:
    return [] if value is None else [part.strip() for part in value.split(",")]


def _list_catalog(kind: str) -> None:
    from aorta.registry.loader import load_environments, load_mitigations

    catalog = load_mitigations() if kind == "mitigations" else load_environments()
    width = max(len(name) for name in catalog)
    for name, entry in catalog.items():
        click.echo(f"{name:<{width}}  [{entry.source_package}]  {entry.description}")
    for broken in catalog.broken:
        click.echo(f"aorta: warning: skipped {broken.describe()}", err=True)


@click.group("triage", invoke_without_command=True)
@click.option("--list-mitigations", is_flag=True, help="List mitigations with their package.")
@click.option("--list-environments", is_flag=True, help="List environments with their package.")
@click.pass_context
def triage_group(ctx: click.Context, list_mitigations: bool, list_environments: bool) -> int:
    """Run a workload under a matrix of mitigations x environments and flag speed confounds."""
    if list_mitigations:
        _list_catalog("mitigations")
    if list_environments:
        _list_catalog("environments")
    if not (list_mitigations or list_environments or ctx.invoked_subcommand):
        click.echo(ctx.get_help())
    return 0


def _describe(recipe: Recipe, run_dir: Path) -> None:
    """The resolved cells, one line each (what --dry-run prints); for a command workload
    also its settings and each cell's command line as trial 0 in `run_dir` runs it."""
    click.echo(
        f"recipe: workload={recipe.workload} ticket={recipe.ticket or '_no_ticket_'} "
        f"baseline={recipe.baseline} threshold={recipe.confound.threshold} "
        f"order={recipe.order}"
        + (f" (shuffle seed {recipe.order_seed})" if recipe.order == "interleaved" else "")
        + f" alpha={recipe.confound.alpha}"
    )
    if recipe.command is not None:
        click.echo(f"command workload: {_command_settings(recipe.command)}")
    if recipe.adaptive is not None:
        n = recipe.adaptive.max_trials
        click.echo(
            f"adaptive: rounds until every cell is decided, at most {n} trials per cell "
            f"(rule: {recipe.adaptive.rule})"
        )
    if recipe.executor is not None:
        from aorta.triage.recipe.executor import describe_settings

        shown = describe_settings(recipe.executor)
        click.echo(f"executor: slurm (every trial a SLURM array task) {shown}".rstrip())
    for cell in recipe.cells:
        env = cell.environment
        where = env.name if env.kind == "local" else f"{env.name} ({env.kind} {env.image})"
        # Redacted like every record: dry-run output gets pasted into tickets.
        shown = " ".join(f"{k}={redact_value(k, v)}" for k, v in cell.env.items())
        vars_ = shown or "(no env vars)"
        stop = cell.stop_after_failures
        capped = stop is not None or recipe.adaptive is not None
        budget = f"trials<={cell.trials}" if capped else f"trials={cell.trials}"
        stop_text = "" if stop is None else f" stop_after_failures={stop}"
        click.echo(
            f"  {cell.name}: mitigations={','.join(cell.mitigations)} environment={where} "
            f"{budget}{stop_text} steps={cell.steps} env: {vars_}"
        )
        if recipe.command is not None:
            click.echo(
                f"    trial 0 runs: {terminal_text(_trial_zero_command(recipe, cell, run_dir))}"
            )


def _command_settings(spec: CommandSpec) -> str:
    """The command workload's settings as `key=value` words (the argv is shown per cell)."""
    rest = {key: value for key, value in spec.to_dict().items() if key != "command"}
    step_time = rest.pop("step_time", "none")
    if isinstance(step_time, dict):
        step_time = f"regex {step_time['regex']!r} ({step_time['unit']})"
    settings = {"step_time": step_time, **rest}
    return " ".join(f"{key}={value}" for key, value in settings.items())


def _trial_zero_command(recipe: Recipe, cell: Cell, run_dir: Path) -> str:
    """The shell-quoted command line of the cell's trial 0, secrets in it redacted."""
    import shlex

    from aorta.instrumentation.redaction import redact_argv
    from aorta.runner.command.runner import trial_argv
    from aorta.triage.run.local import cell_request

    request = cell_request(recipe, run_dir, cell, range(cell.trials), fresh_process=False)
    return shlex.join(redact_argv(trial_argv(request, 0)))


@triage_group.command("run")
@click.option("--recipe", "recipe_path", type=click.Path(path_type=Path), help="Recipe file.")
@click.option(
    "--resume",
    "resume_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Run the trials an earlier run directory is missing, in that directory.",
)
@click.option("--mode", type=click.Choice(["matrix"]), help="Flag mode (builds a recipe).")
@recipe_flag_options
@click.option(
    "--output-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("triage_results"),
    show_default=True,
)
@click.option("--dry-run", is_flag=True, help="Validate and print the resolved cells only.")
@click.option(
    "--trust-environments",
    is_flag=True,
    help="Run a recipe read back from a run directory (--resume, or --recipe "
    "recipe.resolved.yaml) even where it runs an interpreter, docker image or variables this "
    "machine's registry does not vouch for.",
)
@click.option(
    "--allow-shared-writable",
    is_flag=True,
    help="--resume: read the run directory even if another user owns it or others can write "
    "it (they could change what the resume runs; see docs/security.md).",
)
@click.option(
    "--progress",
    type=click.Choice(["auto", "live", "plain"]),
    default="auto",
    show_default=True,
    help="live: a table redrawn in place; plain: one line per trial; auto: live on a "
    "terminal unless CI is set.",
)
@click.option(
    "--executor",
    type=click.Choice(["local", "slurm"]),
    help="Where the trials run (default: the recipe's executor, else local): slurm runs every "
    "trial as a SLURM array task through oellm-autoexp.",
)
@click.option(
    "--slurm-config",
    type=click.Path(dir_okay=False, path_type=Path),
    help="With --executor slurm: a YAML file of executor.slurm settings (partition, time, ...).",
)
@click.option(
    "--detach",
    is_flag=True,
    help="SLURM executor: return once the trials are submitted (see `aorta triage status`).",
)
@command_options
def run_command(
    recipe_path: Path | None,
    resume_dir: Path | None,
    mode: str | None,
    workload: str | None,
    mitigation_axis: str | None,
    environment_axis: str | None,
    trials: int | None,
    order: str,
    stop_after_failures: int | None,
    max_trials: int | None,
    until_decided: bool,
    adaptive_rule: str | None,
    locate: bool,
    steps: int,
    ticket: str | None,
    baseline_cell: str | None,
    confound_threshold: float,
    alpha: float,
    output_dir: Path,
    dry_run: bool,
    trust_environments: bool,
    allow_shared_writable: bool,
    progress: ProgressMode,
    executor: str | None,
    slurm_config: Path | None,
    detach: bool,
    command: tuple[str, ...],
    **command_flags: Any,
) -> int:
    """Run the matrix from --recipe FILE, from flags with --mode matrix, or finish an
    interrupted run with --resume RUN_DIR.

    In flag mode, everything after `--` is the training command to triage (a command
    workload, instead of --workload): `... --trials 8 -- python train.py --seed {seed}`.

    Exit 0 when every cell ran, 1 when a cell or a trial errored, 2 for bad input, 130 on
    Ctrl-C (a
    partial matrix marked interrupted is written first; --resume continues it).
    """
    from aorta.triage.recipe import load_recipe, recipe_from_flags
    from aorta.triage.recipe.trust import check_recipe_file_trust

    if sum(x is not None for x in (recipe_path, mode, resume_dir)) != 1:
        raise click.UsageError(
            "give exactly one of --recipe FILE, --mode matrix or --resume RUN_DIR"
        )
    _reject_foreign_options(click.get_current_context(), resume=resume_dir is not None)
    if resume_dir is not None:
        return _resume(
            resume_dir,
            dry_run=dry_run,
            progress=progress,
            trust=trust_environments,
            detach=detach,
            shared=allow_shared_writable,
        )
    if recipe_path is not None:
        recipe = load_recipe(recipe_path)
        if recipe.resolved and not dry_run:
            _say_trusted(check_recipe_file_trust(recipe, recipe_path, trusted=trust_environments))
    else:
        trials = _trial_budget(trials, stop_after_failures, max_trials, until_decided)
        spec = command_mapping(command, **command_flags)
        missing = [
            flag
            for flag, value in (
                ("--workload or -- CMD", workload if spec is None else "command"),
                ("--mitigation-axis", mitigation_axis),
                ("--environment-axis", environment_axis),
                ("--trials", trials),
            )
            if value is None
        ]
        if missing:
            raise click.UsageError(f"--mode matrix needs {', '.join(missing)}")
        assert trials is not None  # for mypy: checked just above
        recipe = recipe_from_flags(
            workload=workload,
            command=spec,
            mitigation_axis=_split(mitigation_axis),
            environment_axis=_split(environment_axis),
            trials=trials,
            steps=steps,
            ticket=ticket,
            baseline_cell=baseline_cell,
            confound_threshold=confound_threshold,
            order=order,
            stop_after_failures=stop_after_failures,
            alpha=alpha,
            locate=locate,
            until_decided=until_decided,
            adaptive_rule=adaptive_rule,
        )
    if executor is not None or slurm_config is not None:
        from aorta.cli.triage_slurm import apply_executor

        recipe = apply_executor(recipe, executor, slurm_config)
    if detach and recipe.executor is None:
        raise click.UsageError("--detach: only with the SLURM executor")
    if dry_run:
        import os

        from aorta.triage.recipe.parameters import check_workload_parameters

        # What the real run would refuse before its first trial, the dry run refuses too.
        check_workload_parameters(recipe, os.environ)
    # From the leaf `names`, not `output`: a dry run must not import the matrix and plot code.
    from aorta.triage.names import runs_parent

    # The run directory's own name is its start time, fixed only when it starts.
    _describe(recipe, runs_parent(output_dir, recipe) / "<timestamp>")
    if dry_run:
        return 0
    return _execute(recipe, output_dir, progress, detach=detach)


@triage_group.command("matrix")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--confound-threshold",
    type=float,
    default=None,
    help="Re-judge with this step-time ratio threshold (default: the run's own).",
)
@click.option(
    "--alpha",
    type=float,
    default=None,
    help="Re-judge with this significance level (default: the run's own).",
)
def matrix_command(run_dir: Path, confound_threshold: float | None, alpha: float | None) -> int:
    """Rebuild RUN_DIR's matrix.md / .json / .png from its trial files; runs nothing.

    The previous matrix files are kept under RUN_DIR/previous/<timestamp>/.
    """
    from aorta.triage.layout import RunDir
    from aorta.triage.lifecycle import reanalyse

    report = reanalyse(run_dir, threshold=confound_threshold, alpha=alpha)
    for warning in report.matrix.warnings:
        click.echo(f"aorta triage: warning: {terminal_text(warning)}", err=True)
    click.echo(f"matrix: {RunDir(run_dir).matrix_md}")
    return 0


triage_group.add_command(nodes_command)


@triage_group.command("status")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
def status_command(run_dir: Path) -> int:
    """Where RUN_DIR stands: per cell, trials pending / running / done, failures, errors.

    For a SLURM run, as the last monitor pass recorded it; runs nothing, asks SLURM nothing.
    """
    from aorta.cli.triage_slurm import print_status

    return print_status(run_dir)


def _trial_budget(
    trials: int | None, stop_after_failures: int | None, max_trials: int | None, until: bool
) -> int | None:
    """Trials per cell: --trials, or the cap --max-trials of a stopping rule
    (--stop-after-failures K or --until-decided, one of the two)."""
    if stop_after_failures is not None and until:
        raise click.UsageError(
            "--until-decided and --stop-after-failures: choose one stopping rule"
        )
    rule = "--stop-after-failures" if stop_after_failures is not None else "--until-decided"
    if max_trials is not None and stop_after_failures is None and not until:
        raise click.UsageError("--max-trials: only with --stop-after-failures K or --until-decided")
    if stop_after_failures is None and not until:
        return trials
    if trials is not None:
        raise click.UsageError(f"--trials: with {rule} give the cap as --max-trials N instead")
    if max_trials is None:
        raise click.UsageError(f"{rule} needs --max-trials N (the most per cell)")
    return max_trials


# Options that only flag mode reads (declared with the recipe's fields and the command
# workload's flags); a recipe or a resumed run carries these settings itself.
_FLAG_MODE_ONLY = (
    *recipe_flag_params(),
    "command",
    *(flag.param for flag in COMMAND_FLAGS),
)


def _reject_foreign_options(ctx: click.Context, *, resume: bool) -> None:
    """An option the chosen mode would ignore is a usage error, never silently dropped."""
    given = {
        name
        for name in ctx.params
        if ctx.get_parameter_source(name) is not click.core.ParameterSource.DEFAULT
    }
    if ctx.params.get("mode") is not None:
        return
    foreign = [name for name in _FLAG_MODE_ONLY if name in given]
    if foreign:
        flags = ", ".join("--" + name.replace("_", "-") for name in foreign)
        used = "--resume (the run directory holds its recipe)" if resume else "--recipe"
        raise click.UsageError(f"{flags}: only for --mode matrix, not used with {used}")
    if resume and "output_dir" in given:
        raise click.UsageError("--output-dir: not used with --resume (results go to RUN_DIR)")
    if resume and ({"executor", "slurm_config"} & given):
        raise click.UsageError("--executor: not used with --resume (the run records its executor)")


def _say_trusted(actions: list[str]) -> None:
    """Say what a trusted read-back recipe runs that the registry does not vouch for."""
    for action in actions:
        click.echo(
            f"aorta triage: trusted (--trust-environments): {terminal_text(action)}", err=True
        )


def _resume(
    run_dir: Path,
    *,
    dry_run: bool,
    progress: ProgressMode,
    trust: bool,
    detach: bool,
    shared: bool = False,
) -> int:
    from aorta.triage.layout import RunDir
    from aorta.triage.recipe.trust import check_run_trust
    from aorta.triage.run.rundir import read_run_recipe

    # Not a triage run, or a hostile one: one line, exit 2.
    recipe, digest = read_run_recipe(run_dir)
    _describe(recipe, run_dir)
    if dry_run:
        return 0
    label = str(RunDir(run_dir).resolved_recipe)
    if shared:
        click.echo(
            f"aorta triage: --allow-shared-writable: not checking who owns or can write {run_dir}",
            err=True,
        )
    trusted = check_run_trust(
        recipe, run_dir, digest, label=label, trusted=trust, allow_shared_writable=shared
    )
    _say_trusted(trusted)
    if detach and recipe.executor is None:
        raise click.UsageError("--detach: only with the SLURM executor")
    return _execute(
        recipe, run_dir, progress, resume=True, trust=trust, detach=detach, shared=shared
    )


def _execute(
    recipe: Recipe,
    target: Path,
    progress: ProgressMode,
    *,
    resume: bool = False,
    trust: bool = False,
    detach: bool = False,
    shared: bool = False,
) -> int:
    """Start (`target` = output root) or resume (`target` = the run directory) the run on the
    recipe's executor, and report."""
    import os
    import sys

    from aorta.cli.progress import choose_reporter
    from aorta.runner.trials import distributed_rank
    from aorta.triage import lifecycle
    from aorta.triage.layout import RunDir

    # Under torchrun every rank runs the cells; only rank 0 writes and talks.
    loud = distributed_rank()[0] == 0
    reporter = choose_reporter(
        progress, echo=loud, stdout_is_tty=sys.stdout.isatty(), environ=os.environ
    )
    queue = None
    if recipe.executor is not None:
        from aorta.cli.triage_slurm import QueueLines

        queue = QueueLines()
    try:
        with reporter:
            outcome = lifecycle.run(
                recipe,
                target,
                resuming=resume,
                reporter=reporter,
                trust_environments=trust,
                progress=queue,
                detach=detach,
                # matplotlib in a child process: the matrix is not kept waiting for it.
                plot_drawer=None if resume else _plot_drawer(recipe),
                allow_shared_writable=shared,
            )
    except lifecycle.TriageInterrupted as exc:
        if loud:
            matrix_md = RunDir(exc.report.run_dir).matrix_md
            click.echo(f"aorta triage: interrupted; partial matrix: {matrix_md}", err=True)
            from aorta.triage.run.rundir import resume_command

            click.echo(
                f"aorta triage: to finish it: {resume_command(exc.report.run_dir)}", err=True
            )
        raise
    if outcome.report is None:
        from aorta.cli.triage_slurm import say_detached

        say_detached(outcome.run_dir, adaptive=recipe.adaptive is not None)
        return 0
    report = outcome.report
    errored_trials = sum(row.stats.error_count for row in report.matrix.rows)
    if loud:
        for warning in report.matrix.warnings:
            click.echo(f"aorta triage: warning: {terminal_text(warning)}", err=True)
        if errored_trials:
            click.echo(
                f"aorta triage: {errored_trials} trial(s) errored (could not measure); "
                "they are left out of every rate: see the warnings above and matrix.md",
                err=True,
            )
        click.echo(f"matrix: {RunDir(report.run_dir).matrix_md}")
    failed_cells = any(row.stats.error for row in report.matrix.rows)
    return 1 if failed_cells or errored_trials else 0


def _plot_drawer(recipe: Recipe) -> PlotDrawer | None:
    """A local run's plot is drawn in a child process (`aorta.cli.plot_job`); SLURM's here."""
    if recipe.executor is not None:
        return None
    from aorta.cli import plot_job

    return plot_job.start
