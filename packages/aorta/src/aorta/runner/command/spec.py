"""The settings of a command workload, validated once, before any trial runs.

A command workload is a mapping (the recipe's `workload:` or the flag mode's `-- CMD`):

    command: [torchrun, --nproc_per_node=8, pretrain_gpt.py, --seed, "{seed}"]
    step_time: auto              # the default; or megatron|hf|jsonl, {regex: ..., unit: ms|s},
                                 # null (no step lines), or step_marker: REGEX
    hang_after: 300              # seconds without output -> error "hang"
    timeout: 7200                # seconds per trial -> error "timeout"
    clock: auto                  # what times the step lines: auto | log | arrival | cpu

Every bad value raises `CommandSpecError` with one line naming the key (`where` prefixes it,
e.g. the recipe file and `workload`). Nothing here runs a process.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from aorta.errors import AortaUsageError

PLACEHOLDERS: Final = ("cell", "output_dir", "seed", "steps", "trial_id")
# `auto` (the default): every format aorta knows, recognised line by line (see `formats.py`).
AUTO: Final = "auto"
STEP_PRESETS: Final = (AUTO, "hf", "jsonl", "megatron")
TIME_UNITS: Final = ("ms", "s")
KEEP_LOGS: Final = ("failed", "all", "none")
# What times the step lines (see aorta.runner.command.clocks).
CLOCK_CHOICES: Final = ("auto", "log", "arrival", "cpu")
# The named group a `step_time` regex must have; `step` and `loss` are optional.
TIME_GROUP: Final = "time"
DEFAULT_KILL_GRACE_S: Final = 10.0
# Widest width or precision a placeholder's format spec may ask for (`{seed:>08}` is fine;
# `{seed:>2000000000}` would allocate 2 GB per argument). The same bound as oellm-autoexp's
# MAX_FORMAT_WIDTH default.
MAX_FORMAT_WIDTH: Final = 1_000

KeepLogs = Literal["failed", "all", "none"]
ClockChoice = Literal["auto", "log", "arrival", "cpu"]

_KNOWN_KEYS: Final = frozenset(
    {
        "command",
        "step_time",
        "step_marker",
        "clock",
        "warmup_steps",
        "hang_after",
        "hang_is_failure",
        "timeout",
        "kill_grace",
        "failure_patterns",
        "error_patterns",
        "default_patterns",
        "failure_exit_codes",
        "stop_on_failure",
        "collect",
        "keep_logs",
        "cwd",
    }
)


class CommandSpecError(AortaUsageError):
    """A command workload setting is invalid (one line naming the key)."""


@dataclass(frozen=True)
class StepRegex:
    """A user step-time regex: group `time` in `unit`, optional groups `step` and `loss`."""

    regex: str
    unit: Literal["ms", "s"] = "ms"


@dataclass(frozen=True)
class CommandSpec:
    """A validated command workload (see the module docstring for the keys)."""

    command: tuple[str, ...]
    step_time: str | StepRegex | None = AUTO
    step_marker: str | None = None
    clock_choice: ClockChoice = "auto"  # the `clock:` key; `clock` is what it resolves to
    warmup_steps: int | None = None  # None: min(3, steps // 5), as for in-tree workloads
    hang_after: float | None = None
    hang_is_failure: bool = False
    timeout: float | None = None
    kill_grace: float = DEFAULT_KILL_GRACE_S
    failure_patterns: tuple[str, ...] = ()
    error_patterns: tuple[str, ...] = ()
    default_patterns: bool = True
    failure_exit_codes: tuple[int, ...] = ()
    stop_on_failure: bool = True
    collect: tuple[str, ...] = ()
    keep_logs: KeepLogs = "failed"
    cwd: str | None = None

    @property
    def clock(self) -> Literal["log", "arrival", "cpu", "auto", "none"]:
        """Where step times come from: the log's own numbers, arrival of lines, the process
        tree's CPU time, or nowhere (no step lines asked for).

        `auto` (`step_time: auto` on `clock: auto`): decided per trial by what its log prints
        (`log` where it prints step times, else `arrival`); each trial records the one it used.
        """
        has_lines = self.step_time is not None or self.step_marker is not None
        if has_lines and self.clock_choice in ("arrival", "cpu"):
            return self.clock_choice
        if self.step_time == AUTO and self.clock_choice == "auto":
            return "auto"
        if self.step_time is not None:
            return "log"
        return "arrival" if self.step_marker is not None else "none"

    def warmup_for(self, steps: int) -> int:
        """Leading step lines excluded from the step times of a trial of `steps` steps."""
        return min(3, steps // 5) if self.warmup_steps is None else self.warmup_steps

    def to_dict(self) -> dict[str, Any]:
        """The spec as plain data (for recipe.resolved.yaml); `parse_command_spec` reads it."""
        data: dict[str, Any] = {"command": list(self.command)}
        step_time = self.step_time
        if isinstance(step_time, StepRegex):
            data["step_time"] = {"regex": step_time.regex, "unit": step_time.unit}
        else:  # None is written too: it turns off the default `auto`
            data["step_time"] = step_time
        optional = {
            "step_marker": self.step_marker,
            "warmup_steps": self.warmup_steps,
            "hang_after": self.hang_after,
            "timeout": self.timeout,
            "cwd": self.cwd,
        }
        data.update({key: value for key, value in optional.items() if value is not None})
        data.update(
            clock=self.clock_choice,
            hang_is_failure=self.hang_is_failure,
            kill_grace=self.kill_grace,
            failure_patterns=list(self.failure_patterns),
            error_patterns=list(self.error_patterns),
            default_patterns=self.default_patterns,
            failure_exit_codes=list(self.failure_exit_codes),
            stop_on_failure=self.stop_on_failure,
            collect=list(self.collect),
            keep_logs=self.keep_logs,
        )
        return data


def render_argv(argv: Sequence[str], values: Mapping[str, object]) -> list[str]:
    """Substitute the placeholders (`{seed}`, ...) into every argv element."""
    return [element.format_map(values) for element in argv]


def check_placeholders(argv: Sequence[str], where: str) -> None:
    """Raise `CommandSpecError` for an unknown placeholder or a malformed `{...}` element."""
    sample: dict[str, object] = {name: 0 for name in PLACEHOLDERS}
    sample.update(cell="cell", output_dir="/out")
    for index, element in enumerate(argv):
        key = f"{where}[{index}]"
        try:
            parsed = [
                (name, spec)
                for _, name, spec, _ in string.Formatter().parse(element)
                if name is not None
            ]
        except ValueError as exc:
            raise CommandSpecError(
                f"{key}: {element!r} is not a valid argument template ({exc}; "
                "write a literal brace as {{ or }})"
            ) from None
        for name, spec in parsed:
            if not name:
                raise CommandSpecError(
                    f"{key}: '{{}}' in {element!r} names no placeholder "
                    "(write a literal brace as {{ or }})"
                )
            if name not in PLACEHOLDERS:
                known = ", ".join("{" + p + "}" for p in PLACEHOLDERS)
                raise CommandSpecError(
                    f"{key}: unknown placeholder {{{name}}} in {element!r} (known: {known})"
                )
            if spec:
                _check_format_spec(name, spec, element, key)
        try:
            element.format_map(sample)
        except (ValueError, KeyError, IndexError) as exc:
            raise CommandSpecError(f"{key}: {element!r} cannot be rendered: {exc}") from None


def _check_format_spec(name: str, spec: str, element: str, key: str) -> None:
    """Refuse a nested field or a width/precision above MAX_FORMAT_WIDTH in `{name:spec}`.

    Digit runs are compared by length before conversion, so a 5,000-digit width is refused
    without tripping Python's int-conversion limit.
    """
    if "{" in spec:
        raise CommandSpecError(
            f"{key}: nested field in the format spec of {{{name}:{spec}}} in {element!r} "
            "(write a literal width, e.g. {{seed:>4}})"
        )
    widest = len(str(MAX_FORMAT_WIDTH))
    for digits in re.findall(r"\d+", spec):
        if len(digits.lstrip("0")) > widest or int(digits) > MAX_FORMAT_WIDTH:
            shown = spec if len(spec) <= 40 else spec[:40] + "..."
            raise CommandSpecError(
                f"{key}: width or precision in {{{name}:{shown}}} is above the limit of "
                f"{MAX_FORMAT_WIDTH}"
            )


def check_executable(program: str, where: str, *, cwd: str | None = None) -> None:
    """Raise `CommandSpecError` when `program` is neither an executable path nor on PATH."""
    if "{" in program:  # rendered per trial; checked when it runs
        return
    if os.sep in program:
        path = Path(cwd or ".") / program  # an absolute `program` stays as it is
        if path.is_file() and os.access(path, os.X_OK):
            return
        raise CommandSpecError(f"{where}: {program!r} is not an executable file")
    if shutil.which(program) is None:
        raise CommandSpecError(f"{where}: executable {program!r} not found on PATH")


def compile_pattern(pattern: str, where: str) -> re.Pattern[str]:
    """Compile a user regex (line-anchored: `^` and `$` match at line ends)."""
    try:
        return re.compile(pattern, re.MULTILINE)
    except re.error as exc:
        raise CommandSpecError(f"{where}: invalid regex {pattern!r}: {exc}") from None


def _str_list(value: object, where: str, *, allow_empty: bool = True) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise CommandSpecError(f"{where}: expected a list of strings, got {value!r}")
    if not allow_empty and not value:
        raise CommandSpecError(f"{where}: expected a non-empty list of strings")
    return tuple(value)


def _seconds(value: object, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise CommandSpecError(f"{where}: expected a number of seconds > 0, got {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise CommandSpecError(f"{where}: expected a number of seconds > 0, got {value!r}")
    return float(value)


def _flag(value: object, where: str) -> bool:
    if not isinstance(value, bool):
        raise CommandSpecError(f"{where}: expected true or false, got {value!r}")
    return value


def _clock_choice(
    value: object, step_time: str | StepRegex | None, step_marker: str | None, where: str
) -> ClockChoice:
    if value not in CLOCK_CHOICES:
        raise CommandSpecError(
            f"{where}: expected one of {', '.join(CLOCK_CHOICES)}, got {value!r}"
        )
    if value == "log" and step_time is None:
        raise CommandSpecError(
            f"{where}: 'log' reads the step times the command prints: it needs step_time "
            "(with step_marker use arrival or cpu)"
        )
    if value in ("arrival", "cpu") and step_time is None and step_marker is None:
        raise CommandSpecError(
            f"{where}: {value!r} times step lines: it needs step_time or step_marker"
        )
    if value == "cpu":
        from aorta.runner.command.cpu_clock import cpu_clock_available

        if not cpu_clock_available():
            raise CommandSpecError(
                f"{where}: 'cpu' reads the CPU time of the trial's processes from /proc, "
                "which this system does not have"
            )
    return value


def _step_regex(value: Mapping[str, Any], where: str) -> StepRegex:
    unknown = sorted(set(value) - {"regex", "unit"})
    if unknown:
        raise CommandSpecError(f"{where}.{unknown[0]}: unknown key (known: regex, unit)")
    regex = value.get("regex")
    if not isinstance(regex, str):
        raise CommandSpecError(f"{where}.regex: expected a regex string, got {regex!r}")
    compiled = compile_pattern(regex, f"{where}.regex")
    if TIME_GROUP not in compiled.groupindex:
        raise CommandSpecError(
            f"{where}.regex: expected a named group (?P<{TIME_GROUP}>...) holding the step time"
        )
    unit = value.get("unit", "ms")
    if unit not in TIME_UNITS:
        raise CommandSpecError(f"{where}.unit: expected one of ms, s, got {unit!r}")
    return StepRegex(regex, unit)


def _step_time(value: object, where: str) -> str | StepRegex | None:
    if value is None:
        return None
    if isinstance(value, str):
        if value not in STEP_PRESETS:
            raise CommandSpecError(
                f"{where}: unknown preset {value!r} (known: {', '.join(STEP_PRESETS)}; "
                "or a mapping {regex: ..., unit: ms|s})"
            )
        return value
    if isinstance(value, Mapping):
        return _step_regex(value, where)
    raise CommandSpecError(f"{where}: expected a preset name or a mapping, got {value!r}")


def _step_settings(
    data: Mapping[str, Any], where: str
) -> tuple[str | StepRegex | None, str | None]:
    """(step_time, step_marker): `auto` when neither is given, None for `step_time: null`."""
    step_time = _step_time(data.get("step_time"), f"{where}.step_time")
    step_marker = data.get("step_marker")
    if step_marker is not None:
        if not isinstance(step_marker, str):
            raise CommandSpecError(f"{where}.step_marker: expected a regex string")
        compile_pattern(step_marker, f"{where}.step_marker")
        if step_time is not None:
            raise CommandSpecError(
                f"{where}.step_marker: give either step_time or step_marker, not both"
            )
    elif "step_time" not in data:
        step_time = AUTO  # no settings: read every format aorta knows
    return step_time, step_marker


def parse_command_spec(data: Mapping[str, Any], where: str = "workload") -> CommandSpec:
    """Validate a command workload mapping; raises `CommandSpecError` naming the bad key."""
    unknown = sorted(set(data) - _KNOWN_KEYS)
    if unknown:
        raise CommandSpecError(
            f"{where}.{unknown[0]}: unknown key (known: {', '.join(sorted(_KNOWN_KEYS))})"
        )
    if "command" not in data:
        raise CommandSpecError(f"{where}.command: missing (expected a list of strings: the argv)")
    command = _str_list(data["command"], f"{where}.command", allow_empty=False)
    cwd = data.get("cwd")
    if cwd is not None and not (isinstance(cwd, str) and Path(cwd).is_dir()):
        raise CommandSpecError(f"{where}.cwd: expected an existing directory, got {cwd!r}")
    check_placeholders(command, f"{where}.command")
    check_executable(command[0], f"{where}.command[0]", cwd=cwd)
    step_time, step_marker = _step_settings(data, where)
    warmup = data.get("warmup_steps", "auto")
    if warmup != "auto" and (isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0):
        raise CommandSpecError(f"{where}.warmup_steps: expected 'auto' or an integer >= 0")
    patterns: dict[str, tuple[str, ...]] = {}
    for key in ("failure_patterns", "error_patterns"):
        patterns[key] = _str_list(data.get(key, []), f"{where}.{key}")
        for index, pattern in enumerate(patterns[key]):
            compile_pattern(pattern, f"{where}.{key}[{index}]")
    codes = data.get("failure_exit_codes", [])
    if not isinstance(codes, list) or not all(
        isinstance(c, int) and not isinstance(c, bool) and 0 < c < 256 for c in codes
    ):
        raise CommandSpecError(
            f"{where}.failure_exit_codes: expected a list of exit codes 1..255, got {codes!r}"
        )
    keep_logs = data.get("keep_logs", "failed")
    if keep_logs not in KEEP_LOGS:
        raise CommandSpecError(
            f"{where}.keep_logs: expected one of {', '.join(KEEP_LOGS)}, got {keep_logs!r}"
        )
    kill_grace = _seconds(data.get("kill_grace", DEFAULT_KILL_GRACE_S), f"{where}.kill_grace")
    if kill_grace is None:
        raise CommandSpecError(f"{where}.kill_grace: expected a number of seconds > 0, got None")
    clock = _clock_choice(data.get("clock", "auto"), step_time, step_marker, f"{where}.clock")
    return CommandSpec(
        command=command,
        step_time=step_time,
        step_marker=step_marker,
        clock_choice=clock,
        warmup_steps=None if warmup == "auto" else warmup,
        hang_after=_seconds(data.get("hang_after"), f"{where}.hang_after"),
        hang_is_failure=_flag(data.get("hang_is_failure", False), f"{where}.hang_is_failure"),
        timeout=_seconds(data.get("timeout"), f"{where}.timeout"),
        kill_grace=kill_grace,
        failure_patterns=patterns["failure_patterns"],
        error_patterns=patterns["error_patterns"],
        default_patterns=_flag(data.get("default_patterns", True), f"{where}.default_patterns"),
        failure_exit_codes=tuple(codes),
        stop_on_failure=_flag(data.get("stop_on_failure", True), f"{where}.stop_on_failure"),
        collect=_str_list(data.get("collect", []), f"{where}.collect"),
        keep_logs=keep_logs,
        cwd=cwd,
    )
