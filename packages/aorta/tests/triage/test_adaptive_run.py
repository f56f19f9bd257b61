"""Adaptive trials in a real run: `adaptive: {max_trials: N}` / `--until-decided`.

Every trial is a real Python process (a command workload). Which trials fail is set per
cell by a pattern of 0/1 indexed by the trial's `{seed}` (trial k has seed k), so the
adaptive rule's course is known in advance: a clear-cut matrix (the baseline fails every
trial, the mitigation none) is decided early; a borderline one (a cell whose N-trial verdict
stays open to the last trial) runs to `N`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from aorta_testing import adaptive_recipe, ctrl_c_once

AORTA = str(Path(sys.executable).with_name("aorta"))


def _recipe(
    tmp_path: Path, patterns: dict[str, str], n: int, pause: float = 0.0, rule: str | None = None
) -> Path:
    top = {} if rule is None else {"adaptive": {"max_trials": n, "rule": rule}}
    return adaptive_recipe(tmp_path / "recipe.yaml", patterns, n, pause, **top)


def _aorta(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [AORTA, "triage", "run", *args], capture_output=True, text=True, timeout=300, check=False
    )


def _run_dir(root: Path) -> Path:
    (run_dir,) = [p.parent for p in root.rglob("recipe.resolved.yaml")]
    return run_dir


def _trial_ids(run_dir: Path, cell: str) -> list[int]:
    return sorted(
        int(p.stem.split("_")[1]) for p in (run_dir / "cells" / cell).glob("trial_*.json")
    )


def test_a_clear_cut_matrix_stops_early_and_says_why(tmp_path: Path) -> None:
    n = 12
    path = _recipe(tmp_path, {"baseline": "1" * n, "fix": "0" * n}, n)
    done = _aorta("--recipe", str(path), "--output-dir", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    run_dir = _run_dir(tmp_path / "out")
    # 0 of k against k of k: at k = 5 a cure at 12 trials is 98 % likely (>= 95 %); the
    # baseline stops with it, as no cell needs it any more.
    assert _trial_ids(run_dir, "fix") == list(range(5))
    assert _trial_ids(run_dir, "baseline") == list(range(5))
    matrix = json.loads((run_dir / "matrix.json").read_text())
    assert matrix["adaptive"]["max_trials"] == n
    assert matrix["adaptive"]["cells"]["fix"]["stopped"] == "decided cured"
    assert matrix["adaptive"]["cells"]["fix"]["trials"] == 5
    assert matrix["adaptive"]["rule"] == "predictive curtailment"
    text = (run_dir / "matrix.md").read_text()
    assert "## Adaptive trials" in text
    assert (
        "| fix | 5 | decided cured | cured after 5 trials (a cure at 12 trials 98 % likely) |"
        in text
    )
    assert "measured at or below alpha on simulated matrices, not guaranteed" in text
    assert matrix["adaptive"]["family_wise_bound"] == "measured"
    resolved = yaml.safe_load((run_dir / "recipe.resolved.yaml").read_text())
    assert resolved["adaptive"] == {"max_trials": n, "rule": "curtailment"}


def test_the_dry_run_says_the_run_is_adaptive(tmp_path: Path) -> None:
    path = _recipe(tmp_path, {"baseline": "1111", "fix": "0000"}, 4)
    done = _aorta("--recipe", str(path), "--dry-run")
    assert done.returncode == 0, done.stderr
    assert (
        "adaptive: rounds until every cell is decided, at most 4 trials per cell "
        "(rule: curtailment)" in done.stdout
    )
    assert "fix: mitigations=none environment=local trials<=4 " in done.stdout


def test_a_cell_without_effect_stops_as_not_cured(tmp_path: Path) -> None:
    n = 10
    same = "1101101101"
    path = _recipe(tmp_path, {"baseline": same, "same": same}, n)
    done = _aorta("--recipe", str(path), "--output-dir", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    run_dir = _run_dir(tmp_path / "out")
    stop = json.loads((run_dir / "matrix.json").read_text())["adaptive"]["cells"]["same"]
    assert stop["stopped"] == "decided not cured"
    assert stop["trials"] < n


def test_a_borderline_matrix_runs_to_max_trials(tmp_path: Path) -> None:
    # 1 of 8 against 6 of 8: Fisher p = 0.041, just below alpha; until the last trial the
    # 8-trial verdict could still go either way (neither 95 % likely nor futile).
    n = 8
    path = _recipe(tmp_path, {"baseline": "11011011", "maybe": "00001000"}, n)
    done = _aorta("--recipe", str(path), "--output-dir", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    run_dir = _run_dir(tmp_path / "out")
    assert _trial_ids(run_dir, "maybe") == list(range(n))
    assert _trial_ids(run_dir, "baseline") == list(range(n))
    stop = json.loads((run_dir / "matrix.json").read_text())["adaptive"]["cells"]["maybe"]
    assert (stop["stopped"], stop["trials"]) == ("decided cured", n)
    assert stop["reason"] == "cured after 8 trials (verdict fixed)"


def _interrupt_then_resume(tmp_path: Path, path: Path) -> Path:
    """Start the run of `path`, Ctrl-C it after two trials of `fix`, resume it; its run dir."""
    proc = subprocess.Popen(
        [AORTA, "triage", "run", "--recipe", str(path), "--output-dir", str(tmp_path / "out")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    returncode, err = ctrl_c_once(proc, tmp_path, "out/*/*/*/cells/fix/trial_1.json", timeout_s=120)
    assert returncode == 130, err
    run_dir = _run_dir(tmp_path / "out")
    assert len(_trial_ids(run_dir, "fix")) < 5  # interrupted before the rule decided

    done = subprocess.run(
        [AORTA, "triage", "run", "--resume", str(run_dir)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env=os.environ,
    )
    assert done.returncode == 0, done.stderr
    return run_dir


def test_a_resumed_adaptive_run_continues_the_same_rule(tmp_path: Path) -> None:
    n = 12
    path = _recipe(tmp_path, {"baseline": "1" * n, "fix": "0" * n}, n, pause=0.3)
    run_dir = _interrupt_then_resume(tmp_path, path)
    # Exactly where an uninterrupted run stops: the looks were replayed from the trials on disk.
    assert _trial_ids(run_dir, "fix") == list(range(5))
    assert _trial_ids(run_dir, "baseline") == list(range(5))
    stop = json.loads((run_dir / "matrix.json").read_text())["adaptive"]["cells"]["fix"]
    assert stop["stopped"] == "decided cured"


def test_an_alpha_spending_run_stops_by_its_rule_also_after_a_resume(tmp_path: Path) -> None:
    n = 12
    rule = "alpha-spending"
    path = _recipe(tmp_path, {"baseline": "1" * n, "fix": "0" * n}, n, pause=0.3, rule=rule)
    run_dir = _interrupt_then_resume(tmp_path, path)
    resolved = yaml.safe_load((run_dir / "recipe.resolved.yaml").read_text())
    assert resolved["adaptive"] == {"max_trials": n, "rule": rule}
    # 0 of k against k of k: Fisher p = 0.0079 at k = 5 misses the fifth look's O'Brien-Fleming
    # level (0.0022 of 12 looks), p = 0.0022 at k = 6 meets the sixth's (0.0047); curtailment
    # would have stopped at 5 (the resumed run kept the rule it started with).
    assert _trial_ids(run_dir, "fix") == list(range(6))
    assert _trial_ids(run_dir, "baseline") == list(range(6))
    matrix = json.loads((run_dir / "matrix.json").read_text())
    assert matrix["adaptive"]["rule"] == "alpha spending (O'Brien-Fleming-type)"
    assert matrix["adaptive"]["family_wise_bound"] == "guaranteed"
    assert matrix["adaptive"]["cells"]["fix"]["reason"] == "cured after 6 trials"
    text = (run_dir / "matrix.md").read_text()
    assert "is at most 0.05 by construction, over all the looks" in text
    assert "| fix | 6 | decided cured | cured after 6 trials |" in text


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (("--trials", "4"), "--trials: with --until-decided give the cap as --max-trials N"),
        ((), "--until-decided needs --max-trials N"),
        (
            ("--max-trials", "4", "--stop-after-failures", "2"),
            "--until-decided and --stop-after-failures: choose one stopping rule",
        ),
        (
            ("--max-trials", "4", "--order", "sequential"),
            "--until-decided: adaptive trials need --order interleaved",
        ),
    ],
)
def test_contradictory_flags_are_one_usage_error(extra: tuple[str, ...], message: str) -> None:
    done = _aorta(
        "--mode", "matrix", "--mitigation-axis", "none", "--environment-axis", "local",
        "--until-decided", *extra, "--dry-run", "--", sys.executable, "-c", "pass",
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert message in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"order": "sequential"}, "order: adaptive trials need order: interleaved"),
        ({"stop_after": {"failures": 2}}, "stop_after: choose one stopping rule"),
        ({"trials": 5}, "trials: with adaptive, every cell's trials is adaptive.max_trials (4)"),
        ({"adaptive": {"max_trials": 0}}, "adaptive.max_trials: expected a positive integer"),
        ({"adaptive": {"max": 3}}, "adaptive"),
        (
            {"adaptive": {"max_trials": 4, "rule": "bayes"}},
            "adaptive.rule: expected one of curtailment, alpha-spending, got 'bayes'",
        ),
    ],
)
def test_contradictory_recipes_are_one_line_each(
    tmp_path: Path, extra: dict[str, object], message: str
) -> None:
    path = _recipe(tmp_path, {"baseline": "1111", "fix": "0000"}, 4)
    data = yaml.safe_load(path.read_text())
    path.write_text(yaml.safe_dump({**data, **extra}))
    done = _aorta("--recipe", str(path), "--dry-run")
    assert done.returncode == 2, done.stdout + done.stderr
    assert message in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            ("--until-decided", "--max-trials", "4", "--adaptive-rule", "bayes"),
            "Invalid value for '--adaptive-rule': 'bayes' is not one of 'curtailment', "
            "'alpha-spending'",
        ),
        (
            ("--trials", "4", "--adaptive-rule", "alpha-spending"),
            "--adaptive-rule: only with --until-decided (an adaptive run)",
        ),
    ],
)
def test_a_bad_adaptive_rule_flag_is_one_usage_error(extra: tuple[str, ...], message: str) -> None:
    done = _aorta(
        "--mode", "matrix", "--mitigation-axis", "none", "--environment-axis", "local",
        *extra, "--dry-run", "--", sys.executable, "-c", "pass",
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert message in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_the_adaptive_rule_flag_reaches_the_recipe() -> None:
    done = _aorta(
        "--mode", "matrix", "--mitigation-axis", "none", "--environment-axis", "local",
        "--until-decided", "--max-trials", "4", "--adaptive-rule", "alpha-spending",
        "--dry-run", "--", sys.executable, "-c", "pass",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "at most 4 trials per cell (rule: alpha-spending)" in done.stdout
