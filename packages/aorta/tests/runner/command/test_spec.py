"""Validation of command workload settings: every bad value is one line naming the key."""

from __future__ import annotations

import sys

import pytest

from aorta.runner.command.spec import (
    CommandSpecError,
    StepRegex,
    parse_command_spec,
    render_argv,
)

PY = sys.executable


def test_full_spec_round_trips_through_to_dict() -> None:
    data = {
        "command": [PY, "train.py", "--seed", "{seed}", "--out", "{output_dir}/ckpt"],
        "step_time": {"regex": r"step (?P<step>\d+) took (?P<time>[0-9.]+)s", "unit": "s"},
        "hang_after": 60,
        "timeout": 3600,
        "hang_is_failure": True,
        "failure_patterns": ["DIVERGED"],
        "error_patterns": ["disk full"],
        "failure_exit_codes": [3],
        "collect": ["*.json"],
        "keep_logs": "all",
        "warmup_steps": 2,
    }
    spec = parse_command_spec(data)
    assert spec.step_time == StepRegex(data["step_time"]["regex"], "s")  # type: ignore[index]
    assert spec.clock == "log"
    assert spec.warmup_for(100) == 2
    assert parse_command_spec(spec.to_dict()) == spec


def test_defaults() -> None:
    spec = parse_command_spec({"command": [PY, "-c", "pass"]})
    assert (spec.hang_after, spec.timeout, spec.keep_logs, spec.step_time, spec.clock) == (
        None,
        None,
        "failed",
        "auto",  # no settings: every known log format, decided per trial
        "auto",
    )
    assert spec.warmup_for(40) == 3 and spec.warmup_for(10) == 2
    assert parse_command_spec(spec.to_dict()) == spec
    marker = parse_command_spec({"command": [PY], "step_marker": "^step"})
    assert (marker.step_time, marker.clock) == (None, "arrival")
    assert parse_command_spec(marker.to_dict()) == marker
    # `step_time: null` turns the default off, and stays off through recipe.resolved.yaml.
    off = parse_command_spec({"command": [PY], "step_time": None})
    assert (off.step_time, off.clock) == (None, "none")
    assert parse_command_spec(off.to_dict()) == off


@pytest.mark.parametrize(
    ("settings", "clock"),
    [
        ({"step_time": "jsonl"}, "log"),
        ({"step_time": "jsonl", "clock": "log"}, "log"),
        ({"step_time": "jsonl", "clock": "arrival"}, "arrival"),
        ({"step_time": "megatron", "clock": "cpu"}, "cpu"),
        ({"step_marker": "^step", "clock": "cpu"}, "cpu"),
        ({"step_marker": "^step", "clock": "auto"}, "arrival"),
    ],
)
def test_clock_key_picks_the_clock_and_round_trips(settings: dict[str, str], clock: str) -> None:
    spec = parse_command_spec({"command": [PY], **settings})
    assert spec.clock == clock
    assert spec.to_dict()["clock"] == settings.get("clock", "auto")  # recipe.resolved.yaml
    assert parse_command_spec(spec.to_dict()) == spec


def test_render_argv_substitutes_placeholders() -> None:
    argv = ["t", "--seed={seed}", "{output_dir}/x", "{cell}-{trial_id}", "{steps}", "{{lit}}"]
    values = {"seed": 7, "output_dir": "/o", "cell": "c", "trial_id": 2, "steps": 10}
    assert render_argv(argv, values) == ["t", "--seed=7", "/o/x", "c-2", "10", "{lit}"]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"command": "python train.py"}, "workload.command: expected a list of strings"),
        ({"command": []}, "workload.command: expected a non-empty list"),
        ({}, "workload.command: missing"),
        ({"command": [PY, "--seed={sed}"]}, "workload.command[1]: unknown placeholder {sed}"),
        ({"command": [PY, "{seed"]}, "workload.command[1]: '{seed' is not a valid argument"),
        ({"command": [PY, "-c", "d = {}"]}, "workload.command[2]: '{}' in 'd = {}' names no"),
        ({"command": ["no-such-program-aorta"]}, "command[0]: executable 'no-such-program-aorta'"),
        ({"command": ["./missing.sh"]}, "workload.command[0]: './missing.sh' is not an executable"),
        (
            {"command": [PY], "failure_patterns": ["(unclosed"]},
            "failure_patterns[0]: invalid regex",
        ),
        ({"command": [PY], "error_patterns": "oom"}, "error_patterns: expected a list of strings"),
        (
            {"command": [PY], "step_time": {"regex": r"took (?P<ms>\d+)"}},
            "workload.step_time.regex: expected a named group (?P<time>...)",
        ),
        ({"command": [PY], "step_time": {"regex": "("}}, "step_time.regex: invalid regex"),
        ({"command": [PY], "step_time": "deepspeed"}, "step_time: unknown preset 'deepspeed'"),
        ({"command": [PY], "step_time": {"regex": "(?P<time>x)", "unit": "us"}}, "unit: expected"),
        ({"command": [PY], "step_marker": "["}, "workload.step_marker: invalid regex"),
        (
            {"command": [PY], "step_marker": "x", "step_time": "jsonl"},
            "give either step_time or step_marker",
        ),
        ({"command": [PY], "hang_after": 0}, "workload.hang_after: expected a number of seconds"),
        ({"command": [PY], "timeout": "1h"}, "workload.timeout: expected a number of seconds"),
        ({"command": [PY], "kill_grace": None}, "workload.kill_grace: expected"),
        ({"command": [PY], "hang_is_failure": "yes"}, "hang_is_failure: expected true or false"),
        ({"command": [PY], "keep_logs": "some"}, "keep_logs: expected one of failed, all, none"),
        ({"command": [PY], "failure_exit_codes": [0]}, "failure_exit_codes: expected a list"),
        ({"command": [PY], "warmup_steps": -1}, "warmup_steps: expected 'auto' or an integer"),
        ({"command": [PY], "cwd": "/no/such/dir"}, "workload.cwd: expected an existing directory"),
        ({"command": [PY], "hang": 5}, "workload.hang: unknown key"),
        (
            {"command": [PY], "step_time": "jsonl", "clock": "wall"},
            "workload.clock: expected one of auto, log, arrival, cpu, got 'wall'",
        ),
        (
            {"command": [PY], "step_marker": "^step", "clock": "log"},
            "workload.clock: 'log' reads the step times the command prints: it needs step_time",
        ),
        # `step_time: null` turns the default `auto` step lines off: nothing to time.
        (
            {"command": [PY], "step_time": None, "clock": "cpu"},
            "workload.clock: 'cpu' times step lines: it needs",
        ),
    ],
)
def test_bad_input_is_one_line_naming_the_key(data: dict[str, object], message: str) -> None:
    with pytest.raises(CommandSpecError) as info:
        parse_command_spec(data)
    text = str(info.value)
    assert message in text
    assert "\n" not in text
