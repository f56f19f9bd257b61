"""The command-line spelling of a command workload's settings (`aorta run`, flag mode).

The flags build the same mapping as a recipe's `workload:` and go through the same validation
(`spec.parse_command_spec`); only the names in its one-line errors change, from the recipe
key (`command.keep_logs`) to the flag the user typed (`--keep-logs`).

`--step-time VALUE` is a preset name when VALUE is a plain word (letters, digits, `-`, `_`),
and otherwise a regex with a `(?P<time>...)` group, in milliseconds unless
`--step-time-unit s`. The preset names are read from `spec.STEP_PRESETS` when a value is
checked, never copied here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from aorta.runner.command import spec as command_spec
from aorta.runner.command.spec import CommandSpec, CommandSpecError, parse_command_spec

__all__ = [
    "COMMAND_FLAGS",
    "FLAG_OF_KEY",
    "CommandFlag",
    "command_mapping",
    "flag_message",
    "spec_from_flags",
]

# Where the flag-built mapping is validated: the prefix of every key path in its errors.
WHERE: Final = "command"


@dataclass(frozen=True)
class CommandFlag:
    """A command workload option: its flag, the recipe key (below `workload`) it sets, its help.

    `kind`: `seconds` (a number > 0), `text` (one string), `repeat` (a string, repeatable).
    """

    name: str
    key: str
    help: str
    kind: Literal["seconds", "text", "repeat"] = "text"
    metavar: str | None = None

    @property
    def param(self) -> str:
        """The option's parameter name (`--trial-timeout` -> `trial_timeout`)."""
        return self.name.removeprefix("--").replace("-", "_")


# The command workload options, declared once (`aorta.cli.command_options` builds them), in
# the order `--help` lists them.
COMMAND_FLAGS: Final = (
    CommandFlag(
        "--step-time",
        "step_time",
        "Command workloads: how to read step times and losses: a preset name "
        f"({', '.join(command_spec.STEP_PRESETS)}), or a regex with a (?P<time>...) group "
        "(and optional step, loss groups).",
        metavar="PRESET|REGEX",
    ),
    CommandFlag(
        "--step-time-unit",
        "step_time.unit",
        "Command workloads, with a --step-time regex: the unit of its time group (default ms).",
        metavar="|".join(command_spec.TIME_UNITS),
    ),
    CommandFlag(
        "--failure-pattern",
        "failure_patterns",
        "Command workloads: an output line matching REGEX makes the trial failed; added to the "
        "default patterns. Repeatable.",
        kind="repeat",
        metavar="REGEX",
    ),
    CommandFlag(
        "--cwd",
        "cwd",
        "Command workloads: the directory the command runs in (recorded absolute).",
        metavar="DIR",
    ),
    CommandFlag(
        "--keep-logs",
        "keep_logs",
        "Command workloads: which trials keep trial_<id>.log (default: failed, every trial "
        "that did not pass).",
        metavar="|".join(command_spec.KEEP_LOGS),
    ),
    CommandFlag(
        "--hang-after",
        "hang_after",
        "Command workloads: seconds without output that make a trial an error 'hang'.",
        kind="seconds",
    ),
    CommandFlag(
        "--trial-timeout",
        "timeout",
        "Command workloads: seconds per trial before SIGTERM/SIGKILL (error 'timeout').",
        kind="seconds",
    ),
)
# Recipe key (below `workload`) -> the flag that sets it.
FLAG_OF_KEY: Final = {flag.key: flag.name for flag in COMMAND_FLAGS}
_PRESET_WORD: Final = re.compile(r"[A-Za-z0-9_-]+")
_KEY_PATH: Final = re.compile(rf"^{WHERE}\.(?P<path>[A-Za-z_.]+)(?:\[\d+\])?(?P<rest>:.*)$", re.S)


class FlagError(CommandSpecError):
    """A flag-mode setting is invalid, or given without a command (one line naming the flag)."""


def _step_time(value: str, unit: str | None) -> str | dict[str, str]:
    """`--step-time`: a preset name, or a regex mapping in `unit` (default ms)."""
    if _PRESET_WORD.fullmatch(value):
        if unit is not None:
            raise FlagError("--step-time-unit: only with a --step-time regex, not a preset name")
        presets = command_spec.STEP_PRESETS  # read now: the list grows with the presets
        if value not in presets:
            raise FlagError(
                f"--step-time: expected a preset ({', '.join(presets)}) or a regex with a "
                f"(?P<time>...) group, got {value!r}"
            )
        return value
    return {"regex": value, "unit": unit or "ms"}


def command_mapping(command: tuple[str, ...], **flags: Any) -> dict[str, Any] | None:
    """The command workload mapping the flags describe; None when no command was given.

    `flags` are the click parameters of `aorta.cli.command_options`: `step_time`,
    `step_time_unit`, `failure_pattern` (a tuple), `cwd`, `keep_logs`, `hang_after`,
    `trial_timeout`. A setting without a command is an error naming its flag (it would be
    silently ignored). `--cwd` is recorded as an absolute path, so a resume from another
    directory runs where the first attempt ran.
    """
    given = {name: value for name, value in flags.items() if value not in (None, ())}
    if not command:
        if given:
            flag = "--" + next(iter(given)).replace("_", "-")
            raise FlagError(f"{flag}: only for a command workload (-- CMD ...)")
        return None
    mapping: dict[str, Any] = {"command": list(command)}
    if "step_time" in given:
        mapping["step_time"] = _step_time(given["step_time"], given.get("step_time_unit"))
    elif "step_time_unit" in given:
        raise FlagError("--step-time-unit: only with a --step-time regex")
    if "failure_pattern" in given:
        mapping["failure_patterns"] = list(given["failure_pattern"])
    if "cwd" in given:
        mapping["cwd"] = str(Path(given["cwd"]).absolute())
    for flag, key in (("keep_logs", "keep_logs"), ("hang_after", "hang_after")):
        if flag in given:
            mapping[key] = given[flag]
    if "trial_timeout" in given:
        mapping["timeout"] = given["trial_timeout"]
    return mapping


def flag_message(message: str) -> str:
    """A validation message of the flag-built mapping, with the recipe key replaced by its flag.

    `command.keep_logs: expected one of ...` -> `--keep-logs: expected one of ...`; keys no
    flag sets (`command[0]`, the argv) are left as they are.
    """
    match = _KEY_PATH.match(message)
    if match is None:
        return message
    path = match.group("path")
    # The longest key first: `step_time.unit` is --step-time-unit, not --step-time.
    for key, flag in sorted(FLAG_OF_KEY.items(), key=lambda item: -len(item[0])):
        if path == key or path.startswith(key + "."):
            return flag + match.group("rest")
    return message


def spec_from_flags(mapping: Mapping[str, Any]) -> CommandSpec:
    """Validate a `command_mapping` like a recipe's workload; errors name the flags."""
    try:
        return parse_command_spec(mapping, where=WHERE)
    except CommandSpecError as exc:
        raise FlagError(flag_message(str(exc))) from None
