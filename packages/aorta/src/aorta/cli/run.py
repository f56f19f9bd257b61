"""`aorta run`: run trials of one workload under mitigations (B1 on the command line)."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from aorta.cli.command_options import command_options
from aorta.registry.models import check_env_var_name
from aorta.runner.command.flags import command_mapping
from aorta.text_safety import terminal_text

if TYPE_CHECKING:
    from aorta.runner.command.spec import CommandSpec
    from aorta.runner.models import RunRequest, TrialResult


def _split_names(ctx: click.Context, param: click.Parameter, value: str) -> tuple[str, ...]:
    names = tuple(part.strip() for part in value.split(","))
    if not all(names):
        raise click.BadParameter(f"expected comma-separated names, got {value!r}")
    return names


def _parse_assignments(
    ctx: click.Context, param: click.Parameter, values: tuple[str, ...]
) -> dict[str, str]:
    env: dict[str, str] = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep:
            raise click.BadParameter(f"expected KEY=VALUE, got {item!r}")
        try:
            check_env_var_name(key)
        except ValueError as exc:
            raise click.BadParameter(str(exc)) from None
        env[key] = value
    return env


class LineReporter:
    """One plain line per finished trial: readable in a terminal, a log file or CI."""

    def __init__(self, *, echo: bool = True) -> None:
        self.echo = echo  # False on torchrun ranks other than 0: one log, not N copies
        self.prefix = ""  # triage labels each line with its cell
        self.trials = 0
        self.finished: list[TrialResult] = []

    def say(self, line: str) -> None:
        """Print a line unless this reporter is muted."""
        if self.echo:
            # A failure reason quotes the job's log: no newline or escape of it reaches the
            # terminal raw (`text_safety`).
            click.echo(terminal_text(line))

    def trial_started(self, request: RunRequest, trial_id: int, seed: int) -> None:
        """Remember the request's size for the trial's result line."""
        self.trials = request.trials

    def step(self, trial_id: int, step: int, loss: float | None, step_time_ms: float) -> None:
        """Per-step progress is too chatty for a line log."""

    def trial_finished(self, result: TrialResult) -> None:
        """Print the trial's verdict, its step-time summary and where it ran."""
        self.finished.append(result)
        self.say(
            f"{self.prefix}trial {result.trial_id + 1}/{self.trials} seed={result.seed}: "
            f"{trial_verdict(result)} ({result.wall_clock_sec:.1f} s, "
            f"{result.execution.replace('_', ' ')})"
        )


def trial_verdict(result: TrialResult) -> str:
    """`passed, 12.3 ms/step`, `FAILED: <reason>, ...` or `ERROR: <reason>, ...`: a trial's
    outcome in a few words."""
    times = [t for t in result.step_times_ms if math.isfinite(t)]
    # fsum/len is statistics.fmean, without importing statistics (and decimal, fractions) on
    # every CLI start.
    mean = f"{math.fsum(times) / len(times):.1f} ms/step" if times else "no timed steps"
    verdict = "passed" if result.passed else f"{result.outcome.upper()}: {result.failure}"
    return f"{verdict}, {mean}"


def _command_spec(workload: str | None, mapping: dict[str, Any] | None) -> CommandSpec | None:
    """The command workload of `-- CMD`, or None for --workload; exactly one is given."""
    if (workload is None) == (mapping is None):
        raise click.UsageError("give either --workload NAME or a command after --")
    if mapping is None:
        return None
    from aorta.runner.command.flags import spec_from_flags

    return spec_from_flags(mapping)


@click.command("run")
@click.option("--workload", "-w", help="Workload name (see the registry); or -- CMD ...")
@click.option(
    "--mitigations",
    "-m",
    default="none",
    show_default=True,
    callback=_split_names,
    help="Comma-separated mitigation names; their env vars are unioned in order.",
)
@click.option("--environment", "-e", default="local", show_default=True, help="Environment name.")
@click.option("--trials", "-n", type=click.IntRange(min=1), default=1, show_default=True)
@click.option(
    "--steps",
    "-s",
    type=click.IntRange(min=1),
    default=20,
    show_default=True,
    help="Training steps per trial (warm-up steps included, excluded from step times).",
)
@click.option(
    "--seed", type=int, default=0, show_default=True, help="Seed of trial 0; trial i uses seed+i."
)
@click.option(
    "--set",
    "extra_env",
    multiple=True,
    metavar="KEY=VALUE",
    callback=_parse_assignments,
    help="Extra environment variable for every trial, applied after the mitigations. Repeatable.",
)
@click.option(
    "--output-dir",
    "-o",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("aorta_runs"),
    show_default=True,
    help="Parent directory; each run gets a fresh <workload>/<timestamp>/ inside it.",
)
@command_options
def run_command(
    workload: str | None,
    mitigations: tuple[str, ...],
    environment: str,
    trials: int,
    steps: int,
    seed: int,
    extra_env: dict[str, str],
    output_dir: Path,
    command: tuple[str, ...],
    **command_flags: Any,
) -> int:
    """Run TRIALS trials of a workload and write one trial_<id>.json per trial.

    Everything after `--` is a training command to run instead of a registered workload
    (a command workload): `aorta run -n 4 --step-time jsonl -- python train.py --seed {seed}`.

    Exit code 0 when every trial passed, 1 when any trial failed or errored (could not
    measure; stderr says so), 2 for bad input.
    """
    from aorta.atomic import create_run_dir
    from aorta.registry.loader import get_workload
    from aorta.runner import RunRequest, run_trials
    from aorta.runner.trials import distributed_rank
    from toolkit_core.timestamps import dir_stamp

    spec = _command_spec(workload, command_mapping(command, **command_flags))
    if spec is not None:
        workload = "command"
    else:
        assert workload is not None  # _command_spec refuses neither
        get_workload(workload)  # fail on a bad name before creating any directory
    rank, _ = distributed_rank()
    stamp = dir_stamp(datetime.now(UTC))
    if rank == 0:
        run_dir = create_run_dir(output_dir / workload, stamp)
    else:
        # Under torchrun only rank 0 writes; the other ranks never create this path.
        run_dir = output_dir / workload / f"{stamp}.rank{rank}-writes-nothing"
    request = RunRequest(
        workload=workload,
        output_dir=run_dir,
        mitigations=mitigations,
        environment=environment,
        extra_env=extra_env,
        trials=trials,
        steps=steps,
        seed=seed,
        command=spec,
    )
    reporter = LineReporter(echo=rank == 0)
    reporter.say(f"aorta run: {workload} x {trials} trial(s), {steps} steps -> {run_dir}")
    try:
        results = run_trials(request, reporter)
    except KeyboardInterrupt:
        # Counted on disk: a trial's file can be in place (linked, its directory being
        # fsynced) when Ctrl-C lands, before the reporter heard that the trial finished.
        kept = len(list(run_dir.glob("trial_*.json")))
        click.echo(
            f"aorta run: interrupted after {kept} of {trials} trial(s); "
            f"their files are kept in {run_dir}",
            err=True,
        )
        raise
    failed = sum(r.outcome == "failed" for r in results)
    errored = [r for r in results if r.errored]
    passed = len(results) - failed - len(errored)
    reporter.say(f"{passed}/{trials} trial(s) passed; trial files in {run_dir}")
    if errored and rank == 0:
        first = errored[0]
        click.echo(
            f"aorta run: {len(errored)} trial(s) errored (could not measure); first: "
            f"trial {first.trial_id}: {first.failure}",
            err=True,
        )
    return 1 if failed or errored else 0
