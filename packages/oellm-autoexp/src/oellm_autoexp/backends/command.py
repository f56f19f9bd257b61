"""The generic `command` backend: run any program, with per-job values formatted into argv.

Config::

    backend:
      class_name: CommandBackend
      argv: [python, train.py, --lr, "{lr}", --out, "{output_dir}"]
      env: {WANDB_MODE: offline, RUN_NAME: "{name}"}

Each argv element and env value is a `str.format` template over the job's fields (`name`,
`job_id`, `index`, `output_dir`, `project`) and its sweep params (dots also as underscores:
``{backend.lr}`` is spelled ``{backend_lr}``). The result is an argv list; the SBATCH renderer
shell-quotes every element, so values never reach a shell unquoted.
"""

from __future__ import annotations

import functools
import re
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from compoconf import register

from oellm_autoexp.backends.base import (
    JOB_FIELDS,
    BackendConfig,
    BackendInterface,
    JobContext,
    LaunchCommand,
)
from oellm_autoexp.errors import ConfigError, closest


@dataclass
class CommandBackendConfig(BackendConfig):
    """argv and env templates of the command every job runs."""

    argv: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)


def template_fields(template: str) -> list[str]:
    """The field names a `str.format` template references (``"{lr}-{name}"`` -> lr, name).

    Raises ValueError for a malformed template (unbalanced braces), a positional field, an
    attribute or index access (``{name.__class__}`` reaches Python objects; fields are plain
    names), a nested ``{...}`` inside a format spec, and a width or precision above
    MAX_FORMAT_WIDTH (``{lr:>1500000000}`` would allocate gigabytes).
    """
    from oellm_autoexp.limits import limit, limit_hint

    names = []
    widest = limit("MAX_FORMAT_WIDTH")
    for _, name, spec, _ in string.Formatter().parse(template):
        if name is None:
            continue
        if name == "" or name.isdigit():
            raise ValueError("positional fields ({} or {0}) are not allowed; name the field")
        if "." in name or "[" in name:
            raise ValueError(
                f"{{{name}}}: attribute and index access are not allowed; use a plain field name"
            )
        if spec and "{" in spec:
            raise ValueError(f"{{{name}:{spec}}}: nested fields in a format spec are not allowed")
        if spec and any(int(n) > widest for n in re.findall(r"\d+", spec)):
            raise ValueError(
                f"{{{name}:{spec}}}: width or precision above the {limit_hint('MAX_FORMAT_WIDTH')}"
            )
        names.append(name)
    return names


def check_template(template: str, known: Sequence[str], *, key: str) -> None:
    """Raise ConfigError (naming `key`) if `template` references a field not in `known`."""
    try:
        names = template_fields(template)
    except ValueError as exc:
        raise ConfigError(f"bad template {template!r}: {exc}", key=key) from None
    for name in names:
        if name not in known:
            hint = closest(name, known)
            extra = f"; did you mean {{{hint}}}?" if hint else ""
            raise ConfigError(
                f"template {template!r} uses undefined placeholder {{{name}}}{extra} "
                f"(known: {', '.join(sorted(set(known)))})",
                key=key,
            )


@register
class CommandBackend(BackendInterface):
    """Runs `argv` with `env`, both formatted per job."""

    config_class = CommandBackendConfig
    config: CommandBackendConfig

    def validate(self, jobs: Sequence[JobContext]) -> None:
        """Every template must be well-formed and reference only fields every job has."""
        if not self.config.argv:
            raise ConfigError("argv is empty: give the command to run", key="backend.argv")
        if not jobs:
            return
        # A placeholder must exist in *every* job: sweep branches may set different params.
        key_sets = {frozenset(job.params) for job in jobs}
        common = frozenset.intersection(*key_sets)
        known = [*JOB_FIELDS, *common, *(name.replace(".", "_") for name in common)]
        for i, item in enumerate(self.config.argv):
            check_template(item, known, key=f"backend.argv[{i}]")
        for name, value in self.config.env.items():
            check_template(value, known, key=f"backend.env.{name}")

    def build_launch(self, job: JobContext) -> LaunchCommand:
        """argv/env templates formatted with this job's fields."""
        fields = job.format_fields()
        argv, env = self._compiled
        return LaunchCommand(
            argv=tuple([_format(part, fields) for part in argv]),
            env={name: _format(part, fields) for name, part in env},
        )

    @functools.cached_property
    def _compiled(self) -> tuple[list[_Part], list[tuple[str, _Part]]]:
        """The argv and env templates, each parsed once for every job of the plan."""
        return (
            [_compile(item) for item in self.config.argv],
            [(name, _compile(value)) for name, value in self.config.env.items()],
        )


# A template as the planner formats it a million times: (_LITERAL, text), (_FIELD, name) for a
# template that is one plain field (``"{lr}"``, most argv items), else (_TEMPLATE, template).
_LITERAL, _FIELD, _TEMPLATE = 0, 1, 2
_Part = tuple[int, str]


def _compile(template: str) -> _Part:
    if "{" not in template:  # taken as is, "}}" included (never formatted)
        return _LITERAL, template
    try:
        parts = list(string.Formatter().parse(template))
    except ValueError:  # malformed: `format_map` raises it again, as without this step
        return _TEMPLATE, template
    if len(parts) == 1:
        literal, name, spec, conversion = parts[0]
        if not literal and name and name.isidentifier() and not spec and conversion is None:
            return _FIELD, name
    return _TEMPLATE, template


def _format(part: _Part, fields: Mapping[str, Any]) -> str:
    kind, text = part
    if kind == _LITERAL:
        return text
    # `"{lr}".format_map(fields)` is `format(fields["lr"])`, without parsing the template
    return format(fields[text]) if kind == _FIELD else text.format_map(fields)
