"""Plan inside a container, submit on the host (library of `scripts/run_autoexp_container.py`).

The training image has the backend's dependencies (Megatron-LM, torch) but no SLURM commands; the
login node has SLURM but not necessarily Megatron. So the plan step runs inside the image through
``apptainer exec`` / ``singularity exec`` (the planning CLI's ``submit CONFIG --dry-run``, which
writes the scripts and `plan.json` and prints the exact sbatch commands). On the host the runner
reads that plan back (checking it names the same commands), creates the monitoring session and
submits the scripts through the monitor's controller (submission intent recorded before each
sbatch), then monitors. Without a container, both steps run on the host.

Every command is an argv list handed to `subprocess` (never a shell string); what is shown to the
user is `shlex.join`-ed, so it can be pasted into a shell as it is.

Importing this module imports neither Hydra nor OmegaConf: they are needed only when the
container settings are read from the config (no ``--image`` given).
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from oellm_autoexp.errors import (
    EXIT_OK,
    EXIT_RUN_FAILED,
    AutoexpRunError,
    AutoexpUsageError,
    ConfigError,
)

if TYPE_CHECKING:
    from oellm_autoexp.plan import Plan
    from oellm_autoexp.slurm.client import SlurmClient

RUNTIMES = ("apptainer", "singularity")
# The line `oellm-autoexp submit --dry-run` prints before the exact sbatch commands.
DRY_RUN_MARKER = "# ---- sbatch commands"


@dataclass(frozen=True)
class ContainerSpec:
    """How to run a command inside the image."""

    image: str
    runtime: str = "apptainer"
    binds: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    extra_args: tuple[str, ...] = ()


def exec_argv(spec: ContainerSpec, command: Sequence[str], *, workdir: Path) -> list[str]:
    """``<runtime> exec --bind ... --env K=V ... --pwd <workdir> <extra> <image> <command...>``.

    `workdir` (the current directory, where relative config and output paths point) is bound at
    the same path, so paths the plan writes inside the image are the same on the host.
    """
    if spec.runtime not in RUNTIMES:
        raise ConfigError(
            f"expected apptainer or singularity, got {spec.runtime!r}", key="container.runtime"
        )
    if any(ch in str(workdir) for ch in ",:"):
        # --bind splits on ',' (several binds) and ':' (SRC:DST:OPTS)
        raise AutoexpUsageError(
            f"the working directory {workdir} contains ',' or ':', which {spec.runtime} --bind "
            "cannot express; run from a directory without them"
        )
    argv = [spec.runtime, "exec"]
    for bind in (str(workdir), *spec.binds):
        argv += ["--bind", bind]
    for name, value in spec.env.items():
        argv += ["--env", f"{name}={value}"]
    argv += ["--pwd", str(workdir), *spec.extra_args, spec.image, *command]
    return argv


def check_binds(binds: Sequence[str], *, key: str) -> tuple[str, ...]:
    """Check ``SRC[:DST[:OPTS]]`` bind specs; a source that does not exist is a usage error.

    Sources are made absolute so the container sees the same directory whatever its cwd.
    """
    checked = []
    for i, bind in enumerate(binds):
        src, sep, rest = bind.partition(":")
        if not src:
            raise ConfigError(
                f"bind {bind!r} has no source path (expected SRC[:DST[:OPTS]])", key=f"{key}[{i}]"
            )
        source = Path(src).expanduser().resolve()
        if "," in bind or ":" in str(source):
            raise ConfigError(
                f"bind {bind!r}: a ',' or a ':' inside a path cannot be passed to --bind",
                key=f"{key}[{i}]",
            )
        if not source.exists():
            raise ConfigError(f"bind source {src!r} does not exist on this host", key=f"{key}[{i}]")
        checked.append(f"{source}{sep}{rest}")
    return tuple(checked)


def parse_env(items: Sequence[str]) -> dict[str, str]:
    """``NAME=VALUE`` strings (from ``--env``) as a mapping; a malformed one is a usage error."""
    env: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name or not name.replace("_", "a").isalnum() or name[0].isdigit():
            raise AutoexpUsageError(
                f"--env {item!r}: expected NAME=VALUE with a shell variable name"
            )
        env[name] = value
    return env


def find_runtime(preferred: str | None) -> str:
    """The runtime to use: `preferred`, else the first of apptainer / singularity on PATH."""
    if preferred is not None:
        if preferred not in RUNTIMES:
            raise AutoexpUsageError(
                f"--runtime: expected apptainer or singularity, got {preferred!r}"
            )
        return preferred
    for runtime in RUNTIMES:
        if shutil.which(runtime):
            return runtime
    raise AutoexpUsageError(
        "neither apptainer nor singularity is on PATH; pass --runtime or install one"
    )


def container_from_config(
    config: str, overrides: Sequence[str], config_dir: Path | None
) -> ContainerSpec | None:
    """The `container:` section of the config, or None when it is null / has no image.

    This is the only place that loads the config on the host (and so imports Hydra/OmegaConf).
    """
    from oellm_autoexp.config.loader import load_config

    root = load_config(config, overrides, config_dir=config_dir).root
    section = root.container
    if section is None or not section.image:
        return None
    return ContainerSpec(
        image=section.image,
        runtime=section.runtime,
        binds=check_binds(section.bind, key="container.bind"),
        extra_args=tuple(section.extra_args),
    )


def plan_command(
    config: str, overrides: Sequence[str], *, config_dir: Path | None, python: str
) -> list[str]:
    """The planning CLI call: write the scripts and print the exact sbatch commands."""
    argv = [python, "-m", "oellm_autoexp.cli", "submit", config, *overrides, "--dry-run"]
    if config_dir is not None:
        argv += ["--config-dir", str(config_dir)]
    return argv


def parse_dry_run(stdout: str) -> list[list[str]]:
    """The sbatch argv lists after the last dry-run marker line of `stdout`."""
    lines = stdout.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith(DRY_RUN_MARKER)]
    if not starts:
        raise AutoexpRunError(
            "the plan step printed no sbatch commands (no dry-run marker in its output)"
        )
    commands = []
    for line in lines[starts[-1] + 1 :]:
        if line.strip():
            try:
                commands.append(shlex.split(line))
            except ValueError as exc:
                raise AutoexpRunError(
                    f"unreadable sbatch command from the plan step: {line!r} ({exc})"
                ) from None
    if not commands:
        raise AutoexpRunError("the plan step printed no sbatch commands")
    return commands


def run_plan_step(argv: Sequence[str]) -> tuple[list[list[str]], str]:
    """Run the plan step (in the container or not): the sbatch commands it printed, and its stderr.

    A config error inside is the user's (exit 2); any other failure is a failed run (exit 1);
    both keep the plan step's own last line.
    """
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, check=False)
    except FileNotFoundError:
        raise AutoexpUsageError(f"cannot run {argv[0]!r}: not found on PATH") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
        cls = AutoexpUsageError if done.returncode == 2 else AutoexpRunError
        raise cls(f"the plan step failed ({shlex.join(argv[:2])} ...): {last}")
    return parse_dry_run(done.stdout), done.stderr


def check_visible_on_host(commands: Sequence[Sequence[str]]) -> None:
    """Every script an sbatch command names must exist here (the image wrote it to a bound path)."""
    for argv in commands:
        script = Path(argv[-1])
        if not script.is_file():
            raise AutoexpUsageError(
                f"{script} was written by the plan step but is not visible on this host; bind the "
                "output directory into the container at the same path (--bind or container.bind)"
            )


def load_written_plan(commands: Sequence[Sequence[str]]) -> tuple[Plan, dict[str, Any]]:
    """The plan and resolved config the plan step wrote next to the scripts it printed.

    The plan directory is the parent of the scripts' directory; its `plan.json` must name the
    very commands the plan step printed (a mismatch means a stale or foreign plan directory).
    """
    import yaml

    from oellm_autoexp.plan import Plan

    plan_dir = Path(commands[0][-1]).parent.parent
    try:
        plan = Plan.from_dict(json.loads((plan_dir / "plan.json").read_text(encoding="utf-8")))
        config = yaml.safe_load((plan_dir / "config.yaml").read_text(encoding="utf-8"))
    except (OSError, ValueError, KeyError, TypeError, yaml.YAMLError) as exc:
        raise AutoexpRunError(f"cannot read the plan written in {plan_dir}: {exc}") from None
    if plan.sbatch_commands() != [list(c) for c in commands]:
        raise AutoexpRunError(f"{plan_dir / 'plan.json'} does not list the sbatch commands printed")
    if not isinstance(config, dict):
        raise AutoexpRunError(f"{plan_dir / 'config.yaml'} is not a mapping")
    return plan, config


def monitor_command(
    config: str, overrides: Sequence[str], *, config_dir: Path | None, python: str
) -> list[str]:
    """The host-side monitoring call (`oellm-autoexp monitor CONFIG ...`)."""
    argv = [python, "-m", "oellm_autoexp.cli", "monitor", config, *overrides]
    if config_dir is not None:
        argv += ["--config-dir", str(config_dir)]
    return argv


def describe(argv: Sequence[str]) -> str:
    """How a command is shown to the user: shell-quoted, ready to paste."""
    return shlex.join(argv)


@dataclass(frozen=True)
class RunnerOptions:
    """What `scripts/run_autoexp_container.py` was asked to do."""

    config: str
    overrides: tuple[str, ...] = ()
    config_dir: Path | None = None
    image: str | None = None
    runtime: str | None = None
    binds: tuple[str, ...] = ()
    env: tuple[str, ...] = ()
    container_python: str = "python3"
    no_run: bool = False
    no_monitor: bool = False
    monitor_only: bool = False


def resolve_container(opts: RunnerOptions) -> ContainerSpec | None:
    """`--image` wins; otherwise the config's `container:` section (None: run on the host).

    Only the second case reads the config (and so imports Hydra/OmegaConf) on the host.
    """
    binds = check_binds(opts.binds, key="--bind")
    env = parse_env(opts.env)
    if opts.image is not None:
        return ContainerSpec(
            image=opts.image, runtime=find_runtime(opts.runtime), binds=binds, env=env
        )
    spec = container_from_config(opts.config, opts.overrides, opts.config_dir)
    if spec is None:
        return None
    runtime = spec.runtime if opts.runtime is None else find_runtime(opts.runtime)
    return ContainerSpec(spec.image, runtime, (*spec.binds, *binds), env, spec.extra_args)


class _SayReporter:
    """The library's reporter over the runner's `say` (one callable for every line)."""

    def __init__(self, say: Callable[[str], None]) -> None:
        self.say = say

    def info(self, message: str) -> None:
        self.say(message)

    def warning(self, message: str) -> None:
        self.say(message)

    def action(self, action: Any) -> None:
        self.say(action.describe())


def run_workflow(
    opts: RunnerOptions,
    say: Callable[[str], None],
    *,
    workdir: Path | None = None,
    client: SlurmClient | None = None,
) -> int:
    """Plan (inside the container when one is configured), submit on the host, then monitor.

    `say` receives every line meant for the user; `client` is the SLURM client of the host
    (default: the real commands). Returns the exit code; user mistakes and failed runs are
    raised as `AutoexpUsageError` / `AutoexpRunError`.
    """
    if opts.no_run and opts.monitor_only:
        raise AutoexpUsageError("--no-run and --monitor-only exclude each other")
    monitor = monitor_command(
        opts.config, opts.overrides, config_dir=opts.config_dir, python=sys.executable
    )
    if opts.monitor_only:
        say(f"monitoring on the host: {describe(monitor)}")
        return subprocess.call(monitor)
    container = resolve_container(opts)
    where = Path.cwd() if workdir is None else workdir
    if container is None:
        argv = plan_command(
            opts.config, opts.overrides, config_dir=opts.config_dir, python=sys.executable
        )
        say(f"plan on the host: {describe(argv)}")
    else:
        inner = plan_command(
            opts.config, opts.overrides, config_dir=opts.config_dir, python=opts.container_python
        )
        argv = exec_argv(_with_input_binds(container, opts, where), inner, workdir=where)
        say(f"plan in {container.runtime} image {container.image}: {describe(argv)}")
    commands, notes = run_plan_step(argv)
    for line in notes.splitlines():
        say(line)
    check_visible_on_host(commands)
    if opts.no_run:
        say("sbatch commands (--no-run: nothing submitted):")
        for command in commands:
            say(describe(command))
        return 0
    plan, config = load_written_plan(commands)
    say(f"submitting {len(plan.scripts)} script(s) on the host")
    from oellm_autoexp import api

    if client is None:
        from oellm_autoexp.slurm.real import RealSlurmClient

        client = RealSlurmClient()
    # Session file first, then sbatch per script with the intent recorded before each call
    # (the monitor's controller); monitors until every job finished unless --no-monitor.
    submitted = api.submit(
        plan, client, config=config, reporter=_SayReporter(say), monitor=not opts.no_monitor
    )
    if not submitted.complete:
        return EXIT_RUN_FAILED
    if opts.no_monitor:
        say(f"monitor with: oellm-autoexp monitor --monitor-session {submitted.session.session_id}")
        return EXIT_OK
    return api.exit_code([submitted.session])


def _with_input_binds(spec: ContainerSpec, opts: RunnerOptions, workdir: Path) -> ContainerSpec:
    """Also bind the config file's directory and --config-dir when they lie outside `workdir`."""
    extra = []
    candidates = [
        Path(opts.config).parent if Path(opts.config).is_file() else None,
        opts.config_dir,
    ]
    for candidate in candidates:
        if candidate is None:
            continue
        resolved = candidate.resolve()
        if not resolved.is_relative_to(workdir.resolve()) and str(resolved) not in spec.binds:
            extra.append(str(resolved))
    if not extra:
        return spec
    return ContainerSpec(spec.image, spec.runtime, (*spec.binds, *extra), spec.env, spec.extra_args)
