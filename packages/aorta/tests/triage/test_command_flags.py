"""Flag mode's command settings: what a recipe's `workload:` mapping sets, as flags.

`--step-time PRESET|REGEX` (`--step-time-unit`), `--failure-pattern` (repeatable), `--cwd`,
`--keep-logs`, `--hang-after`, `--trial-timeout`: each reaches the trials, is recorded in
`recipe.resolved.yaml`, shows in `--dry-run` and is refused, when bad, in one line naming the
flag (exit 2).
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from aorta.cli.main import main
from aorta.runner.command import spec as command_spec

AORTA = str(Path(sys.executable).with_name("aorta"))
# Prints where it runs, five timed steps in seconds, then (trial 1 only) a line the default
# patterns do not know: only --failure-pattern can make that trial failed.
SCRIPT = (
    "import os, sys\n"
    "print('cwd=' + os.getcwd())\n"
    "for i in range(1, 6):\n"
    "    print('iteration %d took 0.0%d s' % (i, i))\n"
    "if sys.argv[1] == '1':\n"
    "    print('grad overflow detected, giving up')\n"
)
MATRIX = ("triage", "run", "--mode", "matrix", "--mitigation-axis", "none")
AXES = ("--environment-axis", "local", "--trials", "2", "--steps", "5")


def run_aorta(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([AORTA, *args], capture_output=True, text=True, timeout=120, check=False)


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The test (and the aorta it starts) runs in `tmp_path`."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_every_command_flag_reaches_the_trials_and_the_resolved_recipe(in_tmp: Path) -> None:
    (in_tmp / "work").mkdir()
    done = run_aorta(
        *MATRIX, *AXES, "--output-dir", "out", "--progress", "plain",
        "--step-time", r"iteration (?P<step>\d+) took (?P<time>[0-9.]+) s",
        "--step-time-unit", "s", "--failure-pattern", "grad overflow",
        "--failure-pattern", "never printed", "--cwd", "work", "--keep-logs", "all",
        "--hang-after", "30", "--trial-timeout", "60",
        "--", sys.executable, "-c", SCRIPT, "{seed}",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    (run_dir,) = [p.parent for p in (in_tmp / "out").rglob("recipe.resolved.yaml")]
    workload = yaml.safe_load((run_dir / "recipe.resolved.yaml").read_text())["workload"]["command"]
    cells = run_dir / "cells" / "none-local"
    passed = json.loads((cells / "trial_0.json").read_text())
    failed = json.loads((cells / "trial_1.json").read_text())

    assert workload["step_time"] == {
        "regex": r"iteration (?P<step>\d+) took (?P<time>[0-9.]+) s",
        "unit": "s",
    }
    assert workload["failure_patterns"] == ["grad overflow", "never printed"]
    assert workload["default_patterns"] is True  # added to the defaults, not instead
    assert workload["cwd"] == str(in_tmp / "work")  # recorded absolute: a resume runs there
    assert workload["keep_logs"] == "all"
    assert (workload["hang_after"], workload["timeout"]) == (30.0, 60.0)
    # The regex read the times in seconds (warm-up: the first of 5 steps).
    assert passed["outcome"] == "passed" and passed["step_times_ms"] == [20.0, 30.0, 40.0, 50.0]
    assert failed["outcome"] == "failed" and "grad overflow" in failed["failure"]
    assert (cells / "trial_0.log").exists()  # --keep-logs all: the passed trial's log too
    assert f"cwd={in_tmp / 'work'}" in (cells / "trial_0.log").read_text()


def test_dry_run_shows_the_settings_and_each_cells_command_line_for_trial_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [
        "triage", "run", "--mode", "matrix", "--mitigation-axis", "none,tf32_off",
        "--environment-axis", "local", "--trials", "3", "--steps", "7", "--dry-run",
        "--ticket", "T-9", "--output-dir", str(tmp_path / "out"), "--step-time", "jsonl",
        "--keep-logs", "none", "--failure-pattern", "diverged", "--cwd", str(tmp_path),
        "--", sys.executable, "train.py", "--seed", "{seed}", "--steps", "{steps}",
        "--out", "{output_dir}/with space", "--name", "{cell}-{trial_id}",
        "--wandb-key", "hunter2",
    ]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert not (tmp_path / "out").exists()
    settings = next(line for line in out.splitlines() if line.startswith("command workload:"))
    assert "step_time=jsonl" in settings and "keep_logs=none" in settings
    assert "failure_patterns=['diverged']" in settings and f"cwd={tmp_path}" in settings
    shown = [
        line.split("trial 0 runs: ", 1)[1] for line in out.splitlines() if "trial 0 runs" in line
    ]
    assert len(shown) == 2
    parent = tmp_path / "out" / "T-9" / "command" / "<timestamp>" / "cells"
    for line, cell in zip(shown, ("none-local", "tf32_off-local"), strict=True):
        words = shlex.split(line)  # shell-quoted: the space stays inside one argument
        assert words == [
            sys.executable, "train.py", "--seed", "0", "--steps", "7",
            "--out", f"{parent / cell / 'trial_0'}/with space", "--name", f"{cell}-0",
            "--wandb-key", "<redacted>",
        ]  # fmt: skip
    assert "hunter2" not in out


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--keep-logs", "some"], "--keep-logs: expected one of failed, all, none, got 'some'"),
        (["--step-time", "megatrn"], "--step-time: expected a preset ("),
        (["--step-time", r"step (?P<ms>\d+)"], "--step-time: expected a named group (?P<time>"),
        (["--step-time", "x (?P<time>[0-9.]+", "--step-time-unit", "s"], "--step-time: invalid"),
        (["--step-time", "jsonl", "--step-time-unit", "s"], "--step-time-unit: only with a"),
        (["--step-time-unit", "s"], "--step-time-unit: only with a --step-time regex"),
        (
            ["--step-time", r"(?P<time>\d+)", "--step-time-unit", "h"],
            "--step-time-unit: expected one of ms, s, got 'h'",
        ),
        (["--failure-pattern", "ok", "--failure-pattern", "("], "--failure-pattern: invalid regex"),
        (["--cwd", "/no/such/dir"], "--cwd: expected an existing directory"),
        (["--hang-after", "-1"], "'--hang-after'"),
        (["--trial-timeout", "0"], "'--trial-timeout'"),
    ],
)
def test_a_bad_command_flag_is_one_line_naming_it_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    out = tmp_path / "out"
    argv = [*MATRIX, *AXES, "--output-dir", str(out), *flags, "--", sys.executable, "-c", "0"]
    assert main(argv) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert message in line, line
    assert not out.exists()


def test_command_flags_without_a_command_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    for flags in (["--keep-logs", "all"], ["--cwd", "."], ["--failure-pattern", "x"]):
        argv = [*MATRIX, *AXES, "--workload", "toy", "--dry-run", *flags]
        assert main(argv) == 2
        assert f"{flags[0]}: only for a command workload" in capsys.readouterr().err
    assert main(["triage", "run", "--recipe", "r.yaml", "--keep-logs", "all"]) == 2
    assert "--keep-logs: only for --mode matrix" in capsys.readouterr().err


def test_every_known_preset_is_accepted_by_name(capsys: pytest.CaptureFixture[str]) -> None:
    # Read from the module, as the flag reads them: a preset added there is a valid flag value.
    for preset in command_spec.STEP_PRESETS:
        argv = [*MATRIX, *AXES, "--dry-run", "--step-time", preset, "--", sys.executable]
        assert main(argv) == 0, capsys.readouterr().err
        assert f"step_time={preset}" in capsys.readouterr().out


def test_aorta_run_takes_the_same_flags(tmp_path: Path) -> None:
    done = run_aorta(
        "run", "-n", "1", "--steps", "5", "--output-dir", str(tmp_path), "--keep-logs", "none",
        "--step-time", r"took (?P<time>[0-9.]+) s", "--step-time-unit", "s",
        "--", sys.executable, "-c", SCRIPT, "0",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    (trial,) = tmp_path.rglob("trial_0.json")
    assert json.loads(trial.read_text())["step_times_ms"] == [20.0, 30.0, 40.0, 50.0]
    assert not list(tmp_path.rglob("trial_0.log"))  # --keep-logs none
    done = run_aorta("run", "--keep-logs", "x", "--", sys.executable, "-c", "0")
    assert done.returncode == 2 and "--keep-logs: expected one of" in done.stderr
