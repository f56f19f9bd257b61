"""The recipe's `executor:` key: where the trials run (this machine, or SLURM array tasks).

    executor: local                  # the default: trials run here, one after the other
    executor:
      slurm:                         # every trial a SLURM array task (aorta.triage.slurm)
        partition: gpu
        time: "01:00:00"             # per trial
        gpus_per_node: 1
        max_concurrent: 8            # array throttle (%8)
        constraint: mi300x           # every trial on the same node type ...
        same_node: node017           # ... or on this one node

Validated like every recipe value: an unknown key or a wrong type is one line naming the file
and the key. Nothing here talks to SLURM; `aorta.triage.slurm` turns the settings into an
oellm-autoexp config.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any

from aorta.triage.recipe.checks import Where, check_keys
from aorta.triage.recipe.model import (
    MIN_POLL_SECONDS,
    SlurmSettings,
)
from aorta.triage.recipe.text import parse_recipe_text, read_regular_file

__all__ = [
    "SLURM_KEYS",
    "SlurmSettings",
    "describe_settings",
    "executor_dict",
    "executor_from_data",
    "load_slurm_config",
]

# The settings' keys are the dataclass's fields (their one declaration: name, type, default);
# `_checks` holds the check of each.
SLURM_KEYS = tuple(field.name for field in dataclasses.fields(SlurmSettings))
# SLURM's time formats: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS.
_TIME = re.compile(r"^(\d+-)?\d+(:\d{1,2}){0,2}$")
# Partition, account, qos, node names: what SLURM itself accepts in them.
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
# A constraint expression: features joined by & | , and brackets/counts.
_CONSTRAINT = re.compile(r"^[A-Za-z0-9._&|,\[\]*()-]{1,256}$")
_MAX_LINES = 64
_MAX_LINE = 1000


def _name(where: Where, path: str, value: object, *, pattern: re.Pattern[str], what: str) -> str:
    if not isinstance(value, str) or not pattern.match(value):
        where.fail(path, f"expected {what}", value)
    return value


def _count(where: Where, path: str, value: object, *, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= 100_000:
        where.fail(path, f"expected an integer from {minimum} to 100000", value)
    return value


def _one_line(where: Where, path: str, value: object) -> str:
    if not isinstance(value, str) or len(value) > _MAX_LINE or not value.isprintable():
        where.fail(path, f"expected one line of text (at most {_MAX_LINE} characters)", value)
    return value


def _lines(where: Where, path: str, value: object, *, directive: bool) -> tuple[str, ...]:
    if not isinstance(value, list) or len(value) > _MAX_LINES:
        where.fail(path, f"expected a list of at most {_MAX_LINES} strings", value)
    lines = tuple(_one_line(where, f"{path}[{i}]", item) for i, item in enumerate(value))
    for i, line in enumerate(lines):
        if directive and not line.startswith("--"):
            where.fail(f"{path}[{i}]", "expected an sbatch option such as --mem=64G", line)
    return lines


def _poll(where: Where, path: str, value: object) -> float:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if not ok or not MIN_POLL_SECONDS <= float(value) <= 3600:  # type: ignore[arg-type]
        where.fail(path, f"expected a number of seconds from {MIN_POLL_SECONDS} to 3600", value)
    return float(value)  # type: ignore[arg-type]


def _time(where: Where, path: str, value: object) -> str:
    text = str(value) if isinstance(value, int) and not isinstance(value, bool) else value
    what = "a SLURM time limit such as 30, 01:00:00 or 1-12:00"
    return _name(where, path, text, pattern=_TIME, what=what)


def _checks() -> dict[str, Callable[[Where, str, object], Any]]:
    """Each settings key and the check that turns its value into the field."""
    slurm_name = partial(_name, pattern=_NAME, what="a SLURM name")
    constraint = partial(_name, pattern=_CONSTRAINT, what="a SLURM constraint (a&b, a|b)")
    return {
        "partition": slurm_name,
        "account": slurm_name,
        "qos": slurm_name,
        "same_node": slurm_name,
        "constraint": constraint,
        "time": _time,
        "nodes": partial(_count, minimum=1),
        "gpus_per_node": partial(_count, minimum=1),
        "max_concurrent": partial(_count, minimum=1),
        "max_resubmits": partial(_count, minimum=0),
        "poll_seconds": _poll,
        "launcher": _one_line,
        "sbatch_extra": partial(_lines, directive=True),
        "setup": partial(_lines, directive=False),
    }


def _slurm(where: Where, path: str, value: object) -> SlurmSettings:

    if value is None:
        return SlurmSettings()
    if not isinstance(value, Mapping):
        where.fail(path, f"expected a mapping with keys {', '.join(SLURM_KEYS)}", value)
    check_keys(where, path, value, SLURM_KEYS, "executor.slurm")
    checks = _checks()
    fields: dict[str, Any] = {
        key: checks[key](where, f"{path}.{key}", item)
        for key, item in value.items()
        if item is not None
    }
    return SlurmSettings(**fields)


def executor_from_data(where: Where, path: str, value: object) -> SlurmSettings | None:
    """`local` (or absent: None) or `{slurm: {...}}` as `SlurmSettings`; one-line errors."""
    if value is None or value == "local":
        return None
    if not isinstance(value, Mapping) or list(value) != ["slurm"]:
        where.fail(path, "expected local or a mapping {slurm: {...}}", value)
    return _slurm(where, f"{path}.slurm", value["slurm"])


def executor_dict(settings: SlurmSettings | None) -> str | dict[str, Any]:
    """The `executor` value of `recipe.resolved.yaml` (read back by `executor_from_data`)."""
    if settings is None:
        return "local"
    data: dict[str, Any] = {}
    for key in SLURM_KEYS:
        item = getattr(settings, key)
        data[key] = list(item) if isinstance(item, tuple) else item
    return {"slurm": data}


def describe_settings(settings: SlurmSettings) -> str:
    """The settings given (not left empty), as `key=value` words for the dry run."""
    words = []
    for key in SLURM_KEYS:
        value = getattr(settings, key)
        if value not in (None, "", ()):
            words.append(f"{key}={list(value) if isinstance(value, tuple) else value}")
    return " ".join(words)


def load_slurm_config(path: Path) -> SlurmSettings:
    """`--slurm-config FILE`: the `executor.slurm` mapping (or `{slurm: {...}}`) from a file."""
    from aorta.triage.errors import RecipeSchemaError

    label = str(path)
    try:
        text = read_regular_file(label, path, "SLURM config").decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RecipeSchemaError(f"{label}: expected UTF-8 text ({exc.reason})") from None
    data = parse_recipe_text(label, text, json_format=path.suffix.lower() == ".json")
    if isinstance(data, Mapping) and list(data) == ["slurm"]:
        data = data["slurm"]
    return _slurm(Where(label), "slurm", {} if data is None else data)
