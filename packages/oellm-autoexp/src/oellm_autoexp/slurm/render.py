"""Render SBATCH scripts with Jinja2 (StrictUndefined); every user value is shell-quoted here.

The template only places pre-built pieces: directive strings (validated), `export` lines and the
task table (values through `shell_word`), the launch prefix (config tokens, quoted). Templates
never format user values into shell code themselves, so a job name or param cannot inject
commands. Cluster specifics (directives, env, launcher, srun args, prologue) are config values.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from oellm_autoexp.config.schema import SlurmConfig
from oellm_autoexp.errors import ConfigError
from oellm_autoexp.slurm.default_script import render_default
from oellm_autoexp.slurm.topology import NODE_COUNT

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
# sbatch reads a directive value up to the next whitespace; quotes and backslashes are parsed
# differently across SLURM versions, and control characters (a newline above all) would end the
# `#SBATCH` comment and make the rest a shell line. None of them may reach a directive.
_DIRECTIVE_VALUE = re.compile(r"[^\s'\"\\\x00-\x1f\x7f]+")
# One sbatch option as a `#SBATCH` line may carry it (shared with the lint in `validate`).
DIRECTIVE_OPTION = r"--[a-z][a-z0-9-]*(=\S+)?|-[A-Za-z](\s+\S+)?"
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Words `shlex.quote` returns unchanged (its own test, negated): no quoting needed.
_PLAIN_WORD = re.compile(r"[\w@%+=:,./-]+", re.ASCII)
# Distinct argv words remembered per script while quoting its tasks.
_QUOTE_CACHE = 4096


class TaskSpec(NamedTuple):  # one per job: a tuple is built ~3x faster than a frozen dataclass
    """One job as it appears in a script (raw values; quoting happens in `render`)."""

    task_index: int  # the array task (0 for a single-job script); a tuple's `index` is a method
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


def shell_word(value: str, *, key: str) -> str:
    """`value` as one bash word that expands to exactly `value`, on one line of the script.

    Printable text is single-quoted (`shlex.quote`). Text with control characters uses bash's
    ``$'...'`` form with every control character escaped, so a newline in a value never starts
    a new line of the script (which the `#SBATCH` lint and sbatch read line by line). NUL
    cannot be carried by any argv or environment entry: it is refused, naming `key`.
    """
    if _PLAIN_WORD.fullmatch(value):  # what shlex.quote leaves as it is (most values)
        return value
    if "\0" in value:
        raise ConfigError(
            f"value {_shown(value)} contains a NUL character, which no command line or "
            "environment variable can carry",
            key=key,
        )
    if not _CONTROL.search(value):
        return shlex.quote(value)
    escaped = value.replace("\\", "\\\\").replace("'", "\\'")
    return "$'" + _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", escaped) + "'"


def check_directive_text(text: str, *, key: str, what: str = "a directive value") -> None:
    """Refuse control characters in text that lands verbatim on a `#SBATCH` line."""
    if _CONTROL.search(text):
        raise ConfigError(
            f"{what} {_shown(text)} contains a control character (newline, NUL, ...); it "
            "would end the #SBATCH comment line, so it cannot be written safely",
            key=key,
        )


def _shown(text: str, limit: int = 80) -> str:
    """`text` as a one-line repr, shortened (error messages stay one readable line)."""
    shown = repr(text)
    return shown if len(shown) <= limit else shown[: limit - 3] + "..."


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
        check_directive_text(text, key=where)
        if name == "nodes" and not NODE_COUNT.fullmatch(text):
            raise ConfigError(
                f"expected a node count of at least 1 (N, MIN-MAX or N,M,...), got {_shown(text)}",
                key=where,
            )
        if not _DIRECTIVE_VALUE.fullmatch(text):
            raise ConfigError(
                f"value {_shown(text)} has whitespace, quotes or backslashes; sbatch reads "
                "directive values verbatim (use slurm.extra_directives for such a directive)",
                key=where,
            )
        lines.append(f"--{name}={text}")
    return lines


def check_extra_directives(extra: Sequence[str]) -> list[str]:
    """`slurm.extra_directives` entries must each be one sbatch option on one line."""
    for i, text in enumerate(extra):
        where = f"slurm.extra_directives[{i}]"
        check_directive_text(text, key=where, what="directive")
        if not re.fullmatch(DIRECTIVE_OPTION, text):
            raise ConfigError(
                "expected one sbatch option like '--exclusive' or '--constraint=a100' (no "
                f"spaces in a long option's value), got {_shown(text)}",
                key=where,
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
        # Most values are plain words: no call, no error key built (as for argv words).
        word = text if _PLAIN_WORD.fullmatch(text) else shell_word(text, key=f"{key}.{name}")
        lines.append(f"export {name}={word}")
    return lines


def quoted_tokens(command: str, *, key: str) -> str:
    """Split a config command string like a shell would and re-join it with every token quoted."""
    try:
        tokens = shlex.split(command)
    except ValueError as exc:
        raise ConfigError(f"cannot split {_shown(command)}: {exc}", key=key) from None
    return " ".join(shell_word(token, key=key) for token in tokens)


def check_log_path(log_path: str) -> None:
    """The `#SBATCH --output` value: one plain word with no SLURM pattern in its directory.

    The path comes from `project.base_output_dir`. sbatch reads the directive up to the first
    whitespace, a control character would end the comment line (the rest would run as shell),
    and a `%` in the directory would be expanded by SLURM as a filename pattern (the monitor
    would look for the log elsewhere). Each is refused with the key that set it.
    """
    directory, _, _ = log_path.rpartition("/")
    check_directive_text(log_path, key="project.base_output_dir", what="log path")
    if not _DIRECTIVE_VALUE.fullmatch(log_path):
        raise ConfigError(
            f"log path {_shown(log_path)} has whitespace, quotes or backslashes, which an "
            "#SBATCH --output directive cannot carry; choose a plain directory",
            key="project.base_output_dir",
        )
    if "%" in directory:
        raise ConfigError(
            f"log directory {_shown(directory)} contains '%', which SLURM expands as a "
            "filename pattern in --output; choose a directory without '%'",
            key="project.base_output_dir",
        )


class Renderer:
    """A loaded, checked template plus the config pieces shared by every script."""

    def __init__(self, slurm: SlurmConfig, *, plan_id: str) -> None:
        from oellm_autoexp.slurm.distributed import with_distributed_launch

        slurm = with_distributed_launch(slurm)  # one world per job (slurm.distributed)
        self.template_path = _template_path(slurm.template)
        # The built-in template is rendered without Jinja2 (see `slurm.default_script`).
        self._render: Callable[..., str] = (
            render_default
            if self.template_path == BUILTIN_TEMPLATES / "default.sbatch.j2"
            else _jinja_renderer(self.template_path)
        )
        self.plan_id = plan_id
        self.env_exports = export_lines(slurm.env, key="slurm.env")
        prefix = []
        if slurm.use_srun:
            prefix.append(" ".join(["srun", quoted_tokens(slurm.srun_args, key="slurm.srun_args")]))
        prefix.append(quoted_tokens(slurm.launcher_cmd, key="slurm.launcher_cmd"))
        self.launch_prefix = "".join(f"{part.strip()} " for part in prefix if part.strip())
        self.prologue = list(slurm.prologue)
        for i, line in enumerate(self.prologue):
            # Verbatim config-author code, but one line each: no newline, NUL or other control
            # character (tab aside) that would make the script differ from what the config shows.
            if _CONTROL.search(line.replace("\t", " ")):
                raise ConfigError(
                    "one shell line per entry, no newlines or other control characters",
                    key=f"slurm.prologue[{i}]",
                )

    def render(self, spec: ScriptSpec) -> str:
        """The script text for `spec`."""
        check_directive_text(spec.job_name, key="job name", what="job name")
        check_log_path(spec.log_path)
        # Directives also come back from plan.json for restart scripts: checked again here.
        for directive in spec.directives:
            check_directive_text(directive, key=f"job {spec.job_name}: directive")
            if not re.fullmatch(DIRECTIVE_OPTION, directive):
                raise ConfigError(
                    f"not one sbatch option: {_shown(directive)}",
                    key=f"job {spec.job_name}: directive",
                )
        quoted: dict[str, str] = {}  # argv words repeat across the tasks of a script
        plain = _PLAIN_WORD.fullmatch  # most values need no quoting: no key string built

        def word(value: str, i: int, name: str) -> str:
            if plain(value):  # its own quoted form: no key string built
                text = value
            else:
                text = shell_word(value, key=f"job {name}: command argument {i}")
            if len(quoted) < _QUOTE_CACHE:
                quoted[value] = text
            return text

        tasks = [
            {
                "index": task.task_index,
                "job_id": task.job_id
                if plain(task.job_id)
                else shell_word(task.job_id, key=f"job {task.name}: job id"),
                "name": task.name
                if plain(task.name)
                else shell_word(task.name, key=f"job {task.name}: name"),
                "output_dir": task.output_dir
                if plain(task.output_dir)
                else shell_word(task.output_dir, key="project.base_output_dir"),
                "env_exports": export_lines(task.env, key=f"job {task.name}: backend env"),
                "command": " ".join(
                    [quoted.get(arg) or word(arg, i, task.name) for i, arg in enumerate(task.argv)]
                ),
            }
            for task in spec.tasks
        ]
        return self._render(
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


def _jinja_renderer(path: Path) -> Callable[..., str]:
    """`path` as a Jinja2 template; an undefined value while rendering is a `ConfigError`."""
    from jinja2 import UndefinedError

    template = _load_template(path)

    def render(**values: Any) -> str:
        try:
            return str(template.render(**values))
        except UndefinedError as exc:
            raise ConfigError(
                f"template uses an undefined value: {exc.message}", file=path
            ) from None

    return render


def _load_template(path: Path) -> Any:
    """Parse the template; check it uses only provided variables and all required ones."""
    from jinja2 import Environment, StrictUndefined, TemplateSyntaxError, meta

    try:
        source = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(
            f"cannot read template: {exc.strerror or exc}", key="slurm.template"
        ) from None
    # autoescape is for HTML; shell safety comes from shell_word on every value (see module doc).
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
    return env.from_string(parsed)  # the tree, not the text: lexed and parsed once
