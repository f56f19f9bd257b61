"""Render SBATCH scripts with Jinja2 (StrictUndefined); every user value is shell-quoted here.

The template only places pre-built pieces: directive strings (validated), `export` lines and the
task table (values through `shlex.quote`), the launch prefix (config tokens, quoted). Templates
never format user values into shell code themselves, so a job name or param cannot inject
commands. Cluster specifics (directives, env, launcher, srun args, prologue) are config values.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from oellm_autoexp.config.schema import SlurmConfig
from oellm_autoexp.errors import ConfigError

BUILTIN_TEMPLATES = Path(__file__).parent / "templates"
# What the renderer hands every template. A template may use only these ...
PROVIDED_VARIABLES = frozenset(
    {
        "job_name",
        "log_path",
        "array_spec",
        "directives",
        "env_exports",
        "tasks",
        "prologue",
        "launch_prefix",
        "plan_id",
    }
)
# ... and must use these, or the script would silently drop config (placeholder check).
REQUIRED_VARIABLES = (
    "job_name",
    "log_path",
    "array_spec",
    "directives",
    "env_exports",
    "tasks",
    "prologue",
    "launch_prefix",
)
# Set by the planner itself; a config directive of that name would contradict the plan.
RESERVED_DIRECTIVES = frozenset(
    {"job-name", "output", "error", "array", "parsable", "wrap", "test-only"}
)
_DIRECTIVE_NAME = re.compile(r"[a-z][a-z0-9-]*")
_DIRECTIVE_VALUE = re.compile(r"[^\s'\"\\]+")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class TaskSpec:
    """One job as it appears in a script (raw values; quoting happens in `render`)."""

    index: int
    job_id: str
    name: str
    output_dir: str
    env: Mapping[str, str]
    argv: Sequence[str]


@dataclass(frozen=True)
class ScriptSpec:
    """One script: its SLURM job name, log pattern, directives and tasks."""

    job_name: str
    log_path: str
    array_spec: str | None
    directives: Sequence[str]
    tasks: Sequence[TaskSpec]


def directive_lines(sbatch: Mapping[str, Any], *, key: str = "slurm.sbatch") -> list[str]:
    """``{"ntasks_per_node": 4, "exclusive": True}`` -> ``["--ntasks-per-node=4", "--exclusive"]``.

    Keys: lower case, underscores become dashes. A `true` value is a bare flag, `false`/`null`
    omits the directive. Values may not contain whitespace, quotes or backslashes (sbatch does
    not parse them the way a shell would); put such directives in `slurm.extra_directives`.
    """
    lines = []
    for raw_name, value in sbatch.items():
        name = str(raw_name).replace("_", "-")
        where = f"{key}.{raw_name}"
        if not _DIRECTIVE_NAME.fullmatch(name):
            raise ConfigError(
                "not an sbatch option name (lower case letters, digits, -)", key=where
            )
        if name in RESERVED_DIRECTIVES:
            raise ConfigError(
                f"--{name} is set by oellm-autoexp itself (job name, logs and arrays come from "
                "the plan); remove it",
                key=where,
            )
        if value is None or value is False:
            continue
        if value is True:
            lines.append(f"--{name}")
            continue
        text = str(value)
        if not _DIRECTIVE_VALUE.fullmatch(text):
            raise ConfigError(
                f"value {text!r} has whitespace, quotes or backslashes; sbatch reads directive "
                "values verbatim (use slurm.extra_directives for such a directive)",
                key=where,
            )
        lines.append(f"--{name}={text}")
    return lines


def check_extra_directives(extra: Sequence[str]) -> list[str]:
    """`slurm.extra_directives` entries must each be one sbatch option on one line."""
    for i, text in enumerate(extra):
        where = f"slurm.extra_directives[{i}]"
        if "\n" in text or "\r" in text or not text.startswith("-"):
            raise ConfigError(
                f"expected one sbatch option like '--exclusive', got {text!r}", key=where
            )
        name = text.lstrip("-").split("=", 1)[0].split(" ", 1)[0]
        if name in RESERVED_DIRECTIVES:
            raise ConfigError(f"--{name} is set by oellm-autoexp itself; remove it", key=where)
    return list(extra)


def export_lines(env: Mapping[str, Any], *, key: str) -> list[str]:
    """``export NAME='value'`` lines; names are checked, values quoted."""
    lines = []
    for name, value in env.items():
        if not _ENV_NAME.fullmatch(str(name)):
            raise ConfigError("not a valid environment variable name", key=f"{key}.{name}")
        text = (
            "" if value is None else (str(value).lower() if isinstance(value, bool) else str(value))
        )
        lines.append(f"export {name}={shlex.quote(text)}")
    return lines


def quoted_tokens(command: str, *, key: str) -> str:
    """Split a config command string like a shell would and re-join it with every token quoted."""
    try:
        tokens = shlex.split(command)
    except ValueError as exc:
        raise ConfigError(f"cannot split {command!r}: {exc}", key=key) from None
    return " ".join(shlex.quote(token) for token in tokens)


class Renderer:
    """A loaded, checked template plus the config pieces shared by every script."""

    def __init__(self, slurm: SlurmConfig, *, plan_id: str) -> None:
        from oellm_autoexp.slurm.distributed import with_distributed_launch

        slurm = with_distributed_launch(slurm)  # one world per job (slurm.distributed)
        self.template_path = _template_path(slurm.template)
        self._template = _load_template(self.template_path)
        self.plan_id = plan_id
        self.env_exports = export_lines(slurm.env, key="slurm.env")
        prefix = []
        if slurm.use_srun:
            prefix.append(" ".join(["srun", quoted_tokens(slurm.srun_args, key="slurm.srun_args")]))
        prefix.append(quoted_tokens(slurm.launcher_cmd, key="slurm.launcher_cmd"))
        self.launch_prefix = "".join(f"{part.strip()} " for part in prefix if part.strip())
        self.prologue = list(slurm.prologue)
        for i, line in enumerate(self.prologue):
            if "\n" in line:
                raise ConfigError(
                    "one shell line per entry, no newlines", key=f"slurm.prologue[{i}]"
                )

    def render(self, spec: ScriptSpec) -> str:
        """The script text for `spec`."""
        from jinja2 import UndefinedError

        tasks = [
            {
                "index": task.index,
                "job_id": shlex.quote(task.job_id),
                "name": shlex.quote(task.name),
                "output_dir": shlex.quote(task.output_dir),
                "env_exports": export_lines(task.env, key="backend.env"),
                "command": " ".join(shlex.quote(arg) for arg in task.argv),
            }
            for task in spec.tasks
        ]
        try:
            return str(
                self._template.render(
                    job_name=spec.job_name,
                    log_path=spec.log_path,
                    array_spec=spec.array_spec,
                    directives=list(spec.directives),
                    env_exports=self.env_exports,
                    tasks=tasks,
                    prologue=self.prologue,
                    launch_prefix=self.launch_prefix,
                    plan_id=self.plan_id,
                )
            )
        except UndefinedError as exc:
            raise ConfigError(
                f"template uses an undefined value: {exc.message}", file=self.template_path
            ) from None


def _template_path(template: str) -> Path:
    if "/" not in template and not template.endswith(".j2"):
        builtin = BUILTIN_TEMPLATES / f"{template}.sbatch.j2"
        if not builtin.is_file():
            known = sorted(
                p.name.removesuffix(".sbatch.j2") for p in BUILTIN_TEMPLATES.glob("*.j2")
            )
            raise ConfigError(
                f"no built-in template {template!r} (built-in: {', '.join(known)}; or give a path)",
                key="slurm.template",
            )
        return builtin
    path = Path(template).expanduser()
    if not path.is_file():
        raise ConfigError(f"template file not found: {path}", key="slurm.template")
    return path


def _load_template(path: Path) -> Any:
    """Parse the template; check it uses only provided variables and all required ones."""
    from jinja2 import Environment, StrictUndefined, TemplateSyntaxError, meta

    try:
        source = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(
            f"cannot read template: {exc.strerror or exc}", key="slurm.template"
        ) from None
    # autoescape is for HTML; shell safety comes from shlex.quote on every value (see module doc).
    env = Environment(undefined=StrictUndefined, keep_trailing_newline=True, autoescape=False)
    try:
        parsed = env.parse(source)
    except TemplateSyntaxError as exc:
        raise ConfigError(
            f"template syntax error: {exc.message}", file=f"{path}:{exc.lineno}"
        ) from None
    used = meta.find_undeclared_variables(parsed)
    unknown = sorted(used - PROVIDED_VARIABLES)
    if unknown:
        raise ConfigError(
            f"template uses undefined variable {unknown[0]!r} (provided: "
            f"{', '.join(sorted(PROVIDED_VARIABLES))})",
            file=path,
        )
    missing = [name for name in REQUIRED_VARIABLES if name not in used]
    if missing:
        raise ConfigError(
            f"template never uses required placeholder {{{{ {missing[0]} }}}}; without it the "
            "script would drop part of the plan",
            file=path,
        )
    return env.from_string(source)
