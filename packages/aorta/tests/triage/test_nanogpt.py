"""nanoGPT through flag mode with no log settings: a diverging run reads `failed`.

Two commands: a small real PyTorch training loop of our own that prints nanoGPT's exact line
format (scripts/diverge.py --format nanogpt), and, given a nanoGPT checkout in
`AORTA_NANOGPT_DIR`, nanoGPT's own train.py on CPU with a tiny generated dataset. Neither
names a step-time preset or a failure pattern: `step_time: auto` must recognise the format.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

AORTA = str(Path(sys.executable).with_name("aorta"))
DIVERGE = str(Path(__file__).parents[1] / "runner" / "command" / "scripts" / "diverge.py")
NANOGPT_FILES = ("train.py", "model.py", "configurator.py")

pytestmark = pytest.mark.slow


def flag_mode(
    tmp_path: Path, trials: int, command: list[str], *, cwd: Path | None = None, **env: str
) -> tuple[subprocess.CompletedProcess[str], list[dict[str, object]]]:
    """`aorta triage run --mode matrix ... -- COMMAND` with defaults; its trial records."""
    out_dir = tmp_path / "runs"
    done = subprocess.run(
        [
            AORTA, "triage", "run", "--mode", "matrix", "--mitigation-axis", "none",
            "--environment-axis", "local", "--trials", str(trials), "--progress", "plain",
            "--output-dir", str(out_dir), "--", *command,
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=cwd,
        env={**os.environ, "OMP_NUM_THREADS": "1", **env},
        check=False,
    )  # fmt: skip
    trials_found = sorted(out_dir.rglob("trial_*.json"))
    return done, [json.loads(path.read_text()) for path in trials_found]


def diverge_command(lr: str) -> list[str]:
    return [
        sys.executable, DIVERGE, "--seed", "{seed}", "--format", "nanogpt", "--lr", lr,
        "--rows", "4096", "--steps", "30",
    ]  # fmt: skip


def test_nanogpt_format_of_a_real_training_loop_reads_failed_then_passed(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    # At --lr 0.85 with 4096 rows every seed blows up (to inf, then nan) within 25 steps.
    done, trials = flag_mode(tmp_path / "diverges", 2, diverge_command("0.85"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert [t["outcome"] for t in trials] == ["failed", "failed"]
    # Its seed reaches the loop: two different runs, not copies.
    report = next((tmp_path / "diverges" / "runs").rglob("matrix.md")).read_text()
    assert "trials are copies" not in report
    for trial in trials:
        command = trial["command"]
        assert isinstance(command, dict)
        assert command["failure_match"]["pattern"] == "non-finite loss"
        assert command["failure_match"]["line"].startswith("iter ")
        assert (command["step_format"], command["clock"]) == ("nanogpt", "log")
        assert trial["step_clock"] == "log" and trial["step_times_ms"]
        assert command["log"] is not None  # a failed trial's log is kept
    # The same script with its gradient clipped trains: passed, timed by its printed times.
    done, trials = flag_mode(tmp_path / "clipped", 1, diverge_command("0.85"), DIVERGE_CLIP="0.5")
    assert done.returncode == 0, done.stdout + done.stderr
    (trial,) = trials
    assert trial["outcome"] == "passed", trial["failure"]
    assert trial["command"]["step_format"] == "nanogpt" and trial["command"]["warnings"] == []
    assert len(trial["step_times_ms"]) == 30 - trial["warmup_steps"]


def nanogpt_dir() -> Path:
    raw = os.environ.get("AORTA_NANOGPT_DIR")
    if not raw:
        pytest.skip(
            "AORTA_NANOGPT_DIR is not set (a nanoGPT checkout, github.com/karpathy/nanoGPT)"
        )
    path = Path(raw)
    missing = [name for name in NANOGPT_FILES if not (path / name).is_file()]
    if missing:
        pytest.skip(f"AORTA_NANOGPT_DIR={raw} is not a nanoGPT checkout (no {', '.join(missing)})")
    return path


def tiny_dataset(work: Path, name: str) -> None:
    """nanoGPT's data layout: data/<name>/train.bin and val.bin (uint16 tokens), meta.pkl."""
    import numpy as np

    data = work / "data" / name
    data.mkdir(parents=True)
    tokens = (np.arange(20_000) % 61 + np.random.default_rng(0).integers(0, 3, 20_000)).astype(
        np.uint16
    )
    tokens[:16_000].tofile(data / "train.bin")
    tokens[16_000:].tofile(data / "val.bin")
    (data / "meta.pkl").write_bytes(pickle.dumps({"vocab_size": 64}))


# nanoGPT's train.py on CPU, tiny, at a learning rate that makes the loss NaN at iter 1. It
# takes no seed: it hard-codes torch.manual_seed(1337), so every trial is the same run.
NANOGPT_COMMAND = [
    "train.py", "--device=cpu", "--compile=False", "--dataset=aorta_tiny", "--dtype=float32",
    "--n_layer=1", "--n_head=2", "--n_embd=32", "--block_size=32", "--batch_size=8",
    "--gradient_accumulation_steps=1", "--max_iters=8", "--eval_interval=1000",
    "--eval_iters=2", "--log_interval=1", "--learning_rate=1e35", "--decay_lr=False",
    "--grad_clip=0.0", "--out_dir={output_dir}",
]  # fmt: skip


def test_real_nanogpt_train_py_at_a_diverging_learning_rate_reads_failed(tmp_path: Path) -> None:
    checkout = nanogpt_dir()
    pytest.importorskip("torch")
    pytest.importorskip("numpy")
    # nanoGPT reads configurator.py and data/ relative to its working directory: run a copy of
    # its three files in a directory of our own (nothing is written into the checkout).
    work = tmp_path / "nanogpt"
    work.mkdir()
    for name in NANOGPT_FILES:
        shutil.copy2(checkout / name, work / name)
    tiny_dataset(work, "aorta_tiny")
    done, trials = flag_mode(tmp_path, 2, [sys.executable, *NANOGPT_COMMAND], cwd=work)
    assert done.returncode == 0, done.stdout + done.stderr
    assert [t["outcome"] for t in trials] == ["failed", "failed"]
    for trial in trials:
        command = trial["command"]
        assert isinstance(command, dict)
        assert command["failure_match"]["pattern"] == "non-finite loss"
        assert command["failure_match"]["line"].startswith("iter 1: loss nan, time ")
        assert command["step_format"] == "nanogpt"
    matrix = json.loads(next((tmp_path / "runs").rglob("matrix.json")).read_text())
    (cell,) = matrix["cells"]
    assert (cell["failed_count"], cell["passed_count"]) == (2, 0)
    # nanoGPT ignores aorta's seed: the two trials are one run twice, and the matrix says so.
    report = next((tmp_path / "runs").rglob("matrix.md")).read_text()
    assert "cell none-local: its 2 trials are copies (identical loss traces)" in report
    assert "fails identically in every trial (deterministic)" in report
