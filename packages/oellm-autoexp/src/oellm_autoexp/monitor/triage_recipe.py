"""The `triage:` log-signal action, pure part: template checks, the job's command, the recipe.

A log signal with ``triage: path/to/template.yaml`` starts an aorta triage of the job whose log
matched it (see `triage_launch` for the process). The template is an aorta recipe without the
command: it supplies the cells (mitigations, environments, trials, steps, ``executor:``, ...);
the generated recipe adds ``workload.command`` = the job's own argv, read from the plan as data.

oellm-autoexp never imports aorta (DESIGN.md: the dependency runs the other way), and it keeps
no copy of aorta's recipe schema either: the shape the action relies on is checked here, and
aorta itself validates everything else (`triage_launch.check_with_aorta`, at plan time).
"""

from __future__ import annotations

import copy
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from oellm_autoexp.errors import ConfigError

if TYPE_CHECKING:
    from oellm_autoexp.plan import Plan

# The placeholder aorta fills with each trial's own directory (cells/<cell>/trial_<id>/).
TRIAL_OUTPUT_DIR = "{output_dir}"


@dataclass(frozen=True)
class JobCommand:
    """What a planned job runs: argv (launcher prefix included), its environment, its dir."""

    argv: tuple[str, ...]
    env: Mapping[str, str]
    output_dir: str


def check_template(data: Any, *, where: str, key: str) -> dict[str, Any]:
    """`data` (a parsed template) as a recipe mapping, or a `ConfigError` naming `key`.

    `where` names the template file in the message. Checked: a mapping, and ``workload`` (if
    given) a mapping without ``command`` (the job's own command is what the triage runs); keys,
    cells and executor are aorta's to judge (`triage_launch.check_with_aorta`).
    """
    if not isinstance(data, Mapping):
        raise ConfigError(
            f"{where}: expected a mapping (an aorta recipe without workload.command), got "
            f"{type(data).__name__}",
            key=key,
        )
    workload = data.get("workload")
    if workload is not None:
        if not isinstance(workload, Mapping):
            raise ConfigError(
                f"{where}: workload: expected a mapping of command-workload settings (the "
                f"command is the job's own), got {workload!r:.80}",
                key=key,
            )
        if "command" in workload:
            raise ConfigError(
                f"{where}: workload.command: leave it out; the triage runs the failing job's "
                "own command",
                key=key,
            )
    return dict(data)


def escape_placeholders(text: str) -> str:
    """`text` as a literal aorta command argument: ``{`` -> ``{{``, ``}`` -> ``}}``."""
    return text.replace("{", "{{").replace("}", "}}")


def command_argument(arg: str, output_dir: str) -> str:
    """One argv element for the recipe: braces escaped, the job's output dir made per trial.

    A trial must never write into the run it triages (its checkpoints, logs), so every
    occurrence of the job's output directory becomes ``{output_dir}``, the trial's own.
    """
    escaped = escape_placeholders(arg)
    if not output_dir:
        return escaped
    return escaped.replace(escape_placeholders(output_dir), TRIAL_OUTPUT_DIR)


def triage_recipe(template: Mapping[str, Any], command: JobCommand) -> dict[str, Any]:
    """The recipe that triages `command`: `template` plus ``workload.command``.

    Pure: the template's keys (cells, trials, steps, executor, ...) pass through unchanged;
    the argv is data (one recipe list element per argument, never a shell string).
    """
    recipe = copy.deepcopy(dict(template))
    workload = dict(recipe.get("workload") or {})
    workload["command"] = [command_argument(arg, command.output_dir) for arg in command.argv]
    recipe["workload"] = workload
    return recipe


def _env_text(value: Any) -> str:
    # As the SBATCH renderer exports it (slurm.render.export_lines).
    if value is None:
        return ""
    return str(value).lower() if isinstance(value, bool) else str(value)


def job_command(
    plan: Plan | None, config: Mapping[str, Any], key: str, restart_env: Mapping[str, str]
) -> JobCommand | None:
    """The command and environment of planned job `key`, read from a session's plan/config.

    argv = ``slurm.launcher_cmd`` (e.g. a container exec) + the job's command; srun and the
    distributed wrapper are left out (a trial is one process that aorta, or its executor,
    launches). env = ``slurm.env`` + the job's backend env + the restart policies' variables
    + ``AUTOEXP_JOB_ID``/``AUTOEXP_JOB_NAME``, as the job's script exports them. None when the
    job is not in the plan (a log watched by a MONITOR.yaml has no command) or its plan entry
    cannot be read.
    """
    planned = next((j for j in plan.jobs if j.job_id == key), None) if plan else None
    slurm = config.get("slurm")
    if not isinstance(slurm, Mapping):
        slurm = {}
    cluster_env = slurm.get("env")
    try:  # the session's config is read as untrusted: unsplittable means "no command known"
        launcher = shlex.split(str(slurm.get("launcher_cmd") or ""))
    except ValueError:
        return None
    if planned is None or not planned.command:
        return None
    env = {}
    if isinstance(cluster_env, Mapping):
        env.update({str(k): _env_text(v) for k, v in cluster_env.items()})
    env.update(planned.env)
    env.update(restart_env)
    env.update(AUTOEXP_JOB_ID=planned.job_id, AUTOEXP_JOB_NAME=planned.name)
    return JobCommand((*launcher, *planned.command), env, str(planned.output_dir))


def resolve_template_path(value: str, cwd: Path) -> Path:
    """The template path as an absolute path (relative ones against `cwd`, the plan's)."""
    path = Path(value).expanduser()
    return path if path.is_absolute() else cwd / path
