"""Real PyTorch training as command trials: a standalone script, and fsdp under torchrun."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from aorta.runner.command.process import all_processes
from aorta.runner.command.spec import parse_command_spec, render_argv
from aorta.runner.command.trial import CommandTrialOutcome, run_command_trial

pytest.importorskip("torch")
pytestmark = pytest.mark.slow

DIVERGE = str(Path(__file__).parent / "scripts" / "diverge.py")


def run(
    tmp_path: Path, command: list[str], seed: int, env: dict[str, str], **settings: object
) -> CommandTrialOutcome:
    spec = parse_command_spec({"command": command, **settings})
    values = {"seed": seed, "trial_id": 0, "steps": 40, "cell": "c"}
    values["output_dir"] = str(tmp_path / "trial_0")
    return run_command_trial(
        spec,
        render_argv(command, values),
        {**os.environ, **env},
        log_path=tmp_path / "trial_0.log",
        trial_dir=tmp_path / "trial_0",
        steps=40,
    )


def leftovers(marker: str) -> list[int]:
    """Processes whose command line mentions `marker` (a trial's unique directory)."""
    found = []
    for info in all_processes():
        try:
            cmdline = Path(f"/proc/{info.pid}/cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline:
            found.append(info.pid)
    return found


@pytest.mark.parametrize(("fmt", "preset"), [("jsonl", "jsonl"), ("megatron", "megatron")])
def test_standalone_script_diverges_for_seed_1_and_trains_for_seed_0(
    tmp_path: Path, fmt: str, preset: str
) -> None:
    command = [
        sys.executable,
        DIVERGE,
        "--seed",
        "{seed}",
        "--format",
        fmt,
        "--out",
        "{output_dir}",
    ]
    failed = run(tmp_path / "a", command, 1, {}, step_time=preset)
    assert failed.outcome == "failed"
    assert failed.failure is not None and failed.failure.at_step == 21
    assert len(failed.step_times_ms) == 20 - 3  # steps 1..20 completed, 3 warm-up
    passed = run(tmp_path / "b", command, 0, {}, step_time=preset, collect=["final.txt"])
    assert passed.outcome == "passed" and passed.steps_seen == 40
    assert len(passed.step_times_ms) == 37 and all(ms > 0 for ms in passed.step_times_ms)
    assert passed.artifacts == ["final.txt"]
    cured = run(tmp_path / "c", command, 1, {"DIVERGE_CLIP": "0.5"}, step_time=preset)
    assert cured.outcome == "passed"


def test_fsdp_workload_under_torchrun_is_one_two_rank_trial(tmp_path: Path) -> None:
    command = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
        "-m", "aorta.workloads.fsdp", "--seed", "{seed}", "--steps", "6",
        "--output-dir", "{output_dir}",
    ]  # fmt: skip
    env = {"AORTA_FSDP_DEVICE": "cpu", "OMP_NUM_THREADS": "1"}
    ok = run(tmp_path / "ok", command, 0, env, step_time="jsonl", keep_logs="all")
    assert ok.outcome == "passed", ok.reason
    assert ok.steps_seen == 6  # rank 0 prints; rank 1 trains alongside
    assert len(ok.step_times_ms) == 3  # the trial's warm-up, min(3, 40 // 5) lines, left out
    nan_env = {**env, "AORTA_FSDP_TEST_INJECT_NAN_AT_STEP": "3"}
    bad = run(tmp_path / "bad", command, 0, nan_env, step_time="jsonl", hang_after=120)
    assert bad.outcome == "failed" and bad.failure is not None
    assert bad.failure.at_step == 3
    assert leftovers(str(tmp_path)) == []
