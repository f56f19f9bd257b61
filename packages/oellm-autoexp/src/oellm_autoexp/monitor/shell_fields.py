"""Run a configured shell command with per-event values passed through the environment.

Action commands (MONITOR.yaml ``actions``) and ``monitoring.termination_cmd`` are shell text
written by the config's author; the values they are run for (a job's log line, its name, its
paths) are data that may come from anyone who can write to a job's log. Values are therefore
never pasted into the shell text: each is exported as ``AUTOEXP_<FIELD>`` (``{line}`` ->
``$AUTOEXP_LINE``), and a ``{field}`` placeholder in the command is rewritten into a reference to
that variable — ``"${AUTOEXP_LINE}"`` outside quotes (one word, as the quoted value was before),
``${AUTOEXP_LINE}`` inside double quotes. bash expands a variable's value without parsing it
again, so ``$(...)`` or backticks in a log line stay text. A placeholder inside single quotes
cannot be a reference and is refused when the config is read.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from oellm_autoexp.errors import ConfigError

ENV_PREFIX = "AUTOEXP_"
# The values of a MONITOR.yaml action and of `monitoring.termination_cmd`.
ACTION_FIELDS = ("job", "job_id", "event", "signal", "line", "session")
TERMINATION_FIELDS = ("output_dir", "name", "job_id", "log")


class CommandTemplateError(ValueError):
    """A command whose placeholders cannot be turned into variable references."""


@dataclass(frozen=True)
class FieldCommand:
    """A command with its placeholders replaced by variable references."""

    text: str  # the bash source to run (contains no value)
    fields: tuple[str, ...]  # the placeholders it referenced, in order of first use


def env_name(field: str) -> str:
    """``line`` -> ``AUTOEXP_LINE``: the variable through which an action reads `field`."""
    return ENV_PREFIX + field.upper()


def compile_command(command: str, known: Iterable[str]) -> FieldCommand:
    """Rewrite ``{field}`` placeholders of `command` into references to their variables.

    ``{{`` and ``}}`` are literal braces (as in `str.format`, which these commands used to go
    through). Raises CommandTemplateError for an unknown field, a lone brace or a placeholder
    inside single quotes.
    """
    names = set(known)
    out: list[str] = []
    used: list[str] = []
    quote = ""  # "", "'" or '"': the quoting context at this point of the command
    i = 0
    while i < len(command):
        char = command[i]
        if char == "\\" and quote != "'" and i + 1 < len(command) and command[i + 1] in "\\\"'":
            out.append(command[i : i + 2])  # an escaped quote does not change the context
            i += 2
            continue
        if char in "'\"" and quote in ("", char):
            quote = "" if quote else char
        elif char in "{}" and command[i + 1 : i + 2] == char:
            out.append(char)
            i += 2
            continue
        elif char == "}":
            raise CommandTemplateError("single '}' (write '}}' for a literal brace)")
        elif char == "{":
            end = command.find("}", i)
            field = command[i + 1 : end] if end > 0 else ""
            if field not in names:
                shown = command[i : end + 1] if end > 0 else "{"
                raise CommandTemplateError(
                    f"unknown placeholder {shown!r} (known: {', '.join(sorted(names))})"
                )
            if quote == "'":
                raise CommandTemplateError(
                    f"placeholder {{{field}}} inside single quotes; write it outside quotes or "
                    f'read "${env_name(field)}" instead'
                )
            reference = "${" + env_name(field) + "}"
            out.append(reference if quote == '"' else f'"{reference}"')
            if field not in used:
                used.append(field)
            i = end + 1
            continue
        out.append(char)
        i += 1
    return FieldCommand("".join(out), tuple(used))


def check_command_template(
    command: str, known: Iterable[str], *, key: str, file: Path | None = None
) -> None:
    """A ConfigError naming `key` when `command`'s placeholders are not all known and usable."""
    try:
        compile_command(command, known)
    except CommandTemplateError as exc:
        raise ConfigError(f"bad placeholder in {command!r}: {exc}", key=key, file=file) from None


def field_environment(fields: Mapping[str, object]) -> dict[str, str]:
    """The process environment plus ``AUTOEXP_<FIELD>`` for every field.

    A NUL cannot be carried by an environment variable; it is replaced by U+FFFD (the only
    change ever made to a value).
    """
    env = dict(os.environ)
    for field, value in fields.items():
        env[env_name(field)] = str(value).replace("\0", "\ufffd")
    return env


def run_with_fields(
    command: str, known: Iterable[str], fields: Mapping[str, object], *, timeout: float
) -> subprocess.CompletedProcess[str]:
    """Run `command` under ``bash -c`` with `fields` in the environment (never in the source).

    Raises CommandTemplateError for a bad template (callers check templates when the config is
    read, so this is a second line), and whatever `subprocess.run` raises.
    """
    compiled = compile_command(command, known)
    return subprocess.run(
        ["bash", "-c", compiled.text],
        env=field_environment(fields),
        capture_output=True,
        text=True,
        errors="replace",
        timeout=timeout,
        check=False,
    )
