"""Mainstream training logs read right with no log settings (`step_time: auto`).

Each sample is what a framework's own logging code prints (format strings read from
Megatron-LM's training_log, the Hugging Face Trainer's ProgressCallback and tqdm, Lightning's
and NeMo's progress bars, nanoGPT's train.py, torchtitan's MetricsProcessor, DeepSpeed's
engine and pipeline engine, fairseq's progress bars), printed by a real process
(scripts/print_log.py) and read through the real command runner with a spec that holds
nothing but the command. Every non-finite trial must read `failed`, every finite one `passed`,
and where the framework prints its step time, the trial's step times must be within 10 % of
the printed ones.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from aorta.runner.command.spec import parse_command_spec
from aorta.runner.command.trial import CommandTrialOutcome, run_command_trial

PRINT_LOG = str(Path(__file__).parent / "scripts" / "print_log.py")
STEPS = 8
BAD_STEP = 6  # the step whose loss (or grad norm) is not finite in the failing variant
ARRIVAL_GAP_S = 0.04  # between the lines of a format that prints no step time

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc")


@dataclass(frozen=True)
class Sample:
    """A log as a framework prints it, and what reading it must give."""

    chunks: list[tuple[str, float]]  # (text, seconds to sleep after it)
    step_format: str
    printed_ms: list[float] | None  # the per-step times the log prints; None: it prints none


def step_ms(step: int) -> float:
    """A per-step time that varies from step to step (a constant would hide mix-ups)."""
    return 400.0 + 7.0 * step


def loss_at(step: int, bad: bool, nonfinite: str = "nan") -> float | str:
    return nonfinite if bad and step == BAD_STEP else round(10.0 / step, 4)


def megatron(bad: bool) -> Sample:
    chunks = []
    for step in range(1, STEPS + 1):
        nan = bad and step == BAD_STEP
        # Megatron leaves a NaN iteration's loss out of the average and counts it instead.
        lm_loss = f"{10.0 / step:.6E}"
        grad = "nan" if nan else f"{1.0 / step:.3f}"
        chunks.append(
            (
                f" [2025-06-01 10:00:{step:02d}] iteration {step:8d}/{STEPS:8d} |"
                f" consumed samples: {step * 512:12d} | elapsed time per iteration (ms):"
                f" {step_ms(step):.1f} | throughput per GPU (TFLOP/s/GPU): 123.4 | learning rate:"
                f" {3e-4:.6E} | global batch size:   512 | lm loss: {lm_loss} |"
                f" loss scale: 1.0 | grad norm: {grad} | number of skipped iterations:   0 |"
                f" number of nan iterations: {int(nan):3d} |\n",
                0.0,
            )
        )
    return Sample(chunks, "megatron", [step_ms(s) for s in range(1, STEPS + 1)])


def hf_trainer(bad: bool) -> Sample:
    # tqdm redraws the bar with `\r` (several times per step); the Trainer's ProgressCallback
    # writes each log dict on its own line. With logging_nan_inf_filter (the default) a NaN
    # loss is logged as 0.0: only the grad norm shows it.
    chunks: list[tuple[str, float]] = [("\r  0%|          | 0/100 [00:00<?, ?it/s]", 0.0)]
    rates = []
    for step in range(1, STEPS + 1):
        rate = 1000.0 / step_ms(step)
        rates.append(rate)
        bar = f"\r  {step}%|{'▌' * step:<10}| {step}/100 [00:0{step}<00:19, {rate:5.2f}it/s]"
        chunks += [(bar, 0.0), (bar, 0.0)]  # a redraw of the same step
        nan = bad and step == BAD_STEP
        loss = 0.0 if nan else round(10.0 / step, 4)
        grad = "nan" if nan else round(1.0 / step, 4)
        chunks.append(
            (
                f"\n{{'loss': {loss}, 'grad_norm': {grad}, 'learning_rate': 4.9e-05, "
                f"'epoch': {step / 100}}}\n",
                0.0,
            )
        )
    # The rate is printed with 2 decimals: the time it gives is 1000 / that.
    return Sample(chunks, "hf", [1000.0 / float(f"{r:5.2f}") for r in rates])


def lightning(bad: bool) -> Sample:
    chunks = []
    for step in range(1, STEPS + 1):
        rate = 1000.0 / step_ms(step)
        loss = loss_at(step, bad)
        shown = loss if isinstance(loss, str) else f"{loss:.3f}"
        chunks.append(
            (
                f"\rEpoch 0:  {step * 10}%|{'█' * step:<10}| {step}/10 [00:0{step}<00:01,"
                f" {rate:.2f}it/s, v_num=0, train_loss={shown}]",
                0.0,
            )
        )
    chunks.append(("\n", 0.0))
    printed = [1000.0 / float(f"{1000.0 / step_ms(s):.2f}") for s in range(1, STEPS + 1)]
    return Sample(chunks, "lightning", printed)


def nemo(bad: bool) -> Sample:
    chunks = []
    for step in range(1, STEPS + 1):
        loss = loss_at(step, bad)
        shown = loss if isinstance(loss, str) else f"{loss:.3f}"
        chunks.append(
            (
                f"\rEpoch 0: :  {step * 10}%|{'█' * step:<10}| {step}/10 [00:0{step}<00:04,"
                f" reduced_train_loss={shown}, global_step={step - 1:.3f},"
                f" consumed_samples={step * 32:.1f},"
                f" train_step_timing in s={step_ms(step) / 1000:.3f}]",
                0.0,
            )
        )
    chunks.append(("\n", 0.0))
    return Sample(chunks, "nemo", [step_ms(s) for s in range(1, STEPS + 1)])


def nanogpt(bad: bool) -> Sample:
    chunks = [("step 0: train loss 10.8234, val loss 10.8253\n", 0.0)]
    for step in range(1, STEPS + 1):
        loss = loss_at(step, bad)
        shown = loss if isinstance(loss, str) else f"{loss:.4f}"
        chunks.append(
            (f"iter {step}: loss {shown}, time {step_ms(step):.2f}ms, mfu -100.00%\n", 0.0)
        )
    return Sample(chunks, "nanogpt", [step_ms(s) for s in range(1, STEPS + 1)])


def torchtitan(bad: bool) -> Sample:
    # MetricsProcessor.log: coloured fields, no step time (timed by arrival).
    chunks = []
    for step in range(1, STEPS + 1):
        loss = loss_at(step, bad)
        shown = f"{loss:>8}" if isinstance(loss, str) else f"{loss:8.5f}"
        chunks.append(
            (
                f"[rank0]:[titan] 2025-06-01 10:00:0{step},000 - root - INFO - "
                f"\x1b[31mstep: {step:2}  \x1b[32mloss: {shown}  "
                f"\x1b[38;2;255;167;0mgrad_norm: {1.0 / step:7.4f}  "
                f"\x1b[38;2;54;234;195mmemory:  1.23GiB(3.45%)  \x1b[34mtps: 1,234  "
                f"\x1b[36mtflops: 12.34  \x1b[35mmfu: 1.23%\x1b[39m\n",
                ARRIVAL_GAP_S,
            )
        )
    return Sample(chunks, "torchtitan", None)


def deepspeed(bad: bool) -> Sample:
    chunks = []
    for step in range(1, STEPS + 1):
        loss = loss_at(step, bad)
        shown = loss if isinstance(loss, str) else f"{loss:0.4f}"
        chunks += [
            (f"[Rank 0] step={step}, skipped=0, lr=[0.0001], mom=[(0.9, 0.999)]\n", 0.0),
            (
                f"steps: {step} loss: {shown} iter time (s): {step_ms(step) / 1000:0.3f}"
                f" samples/sec: {32 / (step_ms(step) / 1000):0.3f}\n",
                ARRIVAL_GAP_S,
            ),
        ]
    return Sample(chunks, "deepspeed", [step_ms(s) for s in range(1, STEPS + 1)])


def _ups(step: int) -> str:
    return f"{1000.0 / step_ms(step):.2f}"


def fairseq_simple(bad: bool) -> Sample:
    chunks = []
    for step in range(1, STEPS + 1):
        loss = loss_at(step, bad)
        shown = loss if isinstance(loss, str) else f"{loss:.3f}"
        chunks.append(
            (
                f"2025-06-01 10:00:0{step} | INFO | train_inner | epoch 001:     {step * 10} / 100"
                f" loss={shown}, nll_loss={shown}, ppl=4321.5, wps=12345.6, ups={_ups(step)},"
                f" wpb=3578.2, bsz=128, num_updates={step * 10}, lr=1.25e-06, gnorm=2.345,"
                f" loss_scale=128, train_wall=3, gb_free=10.2, wall=5\n",
                0.0,
            )
        )
    return Sample(chunks, "fairseq", [1000.0 / float(_ups(s)) for s in range(1, STEPS + 1)])


def fairseq_pipes(bad: bool) -> Sample:
    chunks = []
    for step in range(1, STEPS + 1):
        loss = loss_at(step, bad)
        shown = loss if isinstance(loss, str) else f"{loss:.3f}"
        chunks.append(
            (
                f"| epoch 00{step} | loss {shown} | nll_loss {shown} | ppl 12.34 | wps 12345"
                f" | ups {_ups(step)} | wpb 3578 | bsz 128 | num_updates {step * 100}"
                f" | lr 0.0005 | gnorm 1.234 | clip 0 | train_wall 12 | wall {step * 12}\n",
                0.0,
            )
        )
        chunks.append(
            (f"| epoch 00{step} | valid on 'valid' subset | loss 4.1 | num_updates {step}\n", 0.0)
        )
    return Sample(chunks, "fairseq", [1000.0 / float(_ups(s)) for s in range(1, STEPS + 1)])


def fairseq_json(bad: bool) -> Sample:
    chunks = []
    for step in range(1, STEPS + 1):
        loss = loss_at(step, bad)
        shown = loss if isinstance(loss, str) else f"{loss:.3f}"
        record = {
            "epoch": 1, "update": step / 100, "loss": shown, "nll_loss": shown, "ppl": "12.3",
            "wps": "12345", "ups": _ups(step), "wpb": "3578", "bsz": "128",
            "num_updates": str(step * 10), "lr": "0.0005", "gnorm": "1.234", "wall": "34",
        }  # fmt: skip
        chunks.append((json.dumps(record) + "\n", 0.0))
    return Sample(chunks, "fairseq", [1000.0 / float(_ups(s)) for s in range(1, STEPS + 1)])


def jsonl(bad: bool) -> Sample:
    chunks = []
    for step in range(1, STEPS + 1):
        loss = loss_at(step, bad)
        value = math.nan if isinstance(loss, str) else loss
        chunks.append(
            (json.dumps({"step": step, "step_time_ms": step_ms(step), "loss": value}) + "\n", 0)
        )
    return Sample(chunks, "jsonl", [step_ms(s) for s in range(1, STEPS + 1)])


def plain(bad: bool) -> Sample:
    chunks = [
        (f"step {step} loss: {loss_at(step, bad)}\n", ARRIVAL_GAP_S) for step in range(1, STEPS + 1)
    ]
    return Sample(chunks, "plain", None)


def plain_timed(bad: bool) -> Sample:
    chunks = [
        (
            f"Step {step}/100 | loss={loss_at(step, bad, '-inf')} | time {step_ms(step):.1f} ms\n",
            0.0,
        )
        for step in range(1, STEPS + 1)
    ]
    return Sample(chunks, "plain", [step_ms(s) for s in range(1, STEPS + 1)])


def tensor_reprs(bad: bool) -> Sample:
    # A loss printed as its tensor: `tensor(2.3012, grad_fn=<AddBackward0>)` is finite.
    chunks = []
    for step in range(1, STEPS + 1):
        loss = loss_at(step, bad)
        chunks.append(
            (
                f"step {step}: loss = tensor({loss}, device='cuda:0', grad_fn=<AddBackward0>),"
                f" time {step_ms(step):.1f}ms\n",
                0.0,
            )
        )
    return Sample(chunks, "plain", [step_ms(s) for s in range(1, STEPS + 1)])


FORMATS: dict[str, Callable[[bool], Sample]] = {
    "megatron": megatron,
    "hf_trainer": hf_trainer,
    "lightning": lightning,
    "nemo": nemo,
    "nanogpt": nanogpt,
    "torchtitan": torchtitan,
    "deepspeed": deepspeed,
    "fairseq_simple": fairseq_simple,
    "fairseq_pipes": fairseq_pipes,
    "fairseq_json": fairseq_json,
    "jsonl": jsonl,
    "plain": plain,
    "plain_timed": plain_timed,
    "tensor_reprs": tensor_reprs,
}


def run_log(tmp_path: Path, chunks: list[tuple[str, float]]) -> CommandTrialOutcome:
    """Print `chunks` from a real process; read it with a spec that has only the command."""
    log = tmp_path / "log.json"
    log.write_text(json.dumps(chunks))
    argv = [sys.executable, PRINT_LOG, str(log)]
    spec = parse_command_spec({"command": argv})
    return run_command_trial(
        spec,
        argv,
        dict(os.environ),
        log_path=tmp_path / "trial_0.log",
        trial_dir=tmp_path / "trial_0",
        steps=STEPS,
    )


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_finite_log_passes_with_the_printed_step_times(tmp_path: Path, name: str) -> None:
    sample = FORMATS[name](False)
    out = run_log(tmp_path, sample.chunks)
    assert out.outcome == "passed", out.reason
    assert out.step_format == sample.step_format
    assert out.warnings == []
    if sample.printed_ms is None:
        assert out.clock == "arrival"
        # Lines that arrive ARRIVAL_GAP_S apart: a step time is about that gap. Not every one:
        # a reader descheduled on a loaded machine reads two lines at once (one ~0 ms step,
        # the next ~twice the gap), so the median is judged.
        assert len(out.step_times_ms) == STEPS - out.warmup_steps
        assert statistics.median(out.step_times_ms) >= ARRIVAL_GAP_S * 1000 * 0.5
    else:
        assert out.clock == "log"
        expected = sample.printed_ms[out.warmup_steps :]
        assert len(out.step_times_ms) == len(expected)
        for got, printed in zip(out.step_times_ms, expected, strict=True):
            assert got == pytest.approx(printed, rel=0.10)


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_nonfinite_log_fails_at_its_step(tmp_path: Path, name: str) -> None:
    sample = FORMATS[name](True)
    out = run_log(tmp_path, sample.chunks)
    assert out.outcome == "failed", out.reason
    assert out.failure is not None
    assert out.failure.pattern in ("non-finite loss", "non-finite grad norm")
    assert out.reason is not None and out.reason.startswith(f"{out.failure.pattern!r} matched")
    assert out.log_path is not None  # a failed trial keeps its log


def test_hf_nan_inf_filter_failure_reads_as_a_grad_norm_failure(tmp_path: Path) -> None:
    out = run_log(tmp_path, hf_trainer(True).chunks)
    assert out.failure is not None and out.failure.pattern == "non-finite grad norm"
    assert "'loss': 0.0, 'grad_norm': nan" in out.failure.line


@pytest.mark.parametrize(
    ("line", "unreadable"),
    [
        ("step {s} loss: 4.4512, lr: 3e-4", False),  # trailing comma
        ("step {s} | loss 1.2e+00 | lr 3e-4", False),
        ("step {s}: loss tensor(2.3012, grad_fn=<AddBackward0>)", False),
        ("step {s} loss: 4.45.12 (ema)", True),  # not a number: unknown, said once
    ],
)
def test_unparsable_loss_is_never_a_failure(tmp_path: Path, line: str, unreadable: bool) -> None:
    chunks = [(line.format(s=s) + "\n", ARRIVAL_GAP_S / 4) for s in range(1, STEPS + 1)]
    out = run_log(tmp_path, chunks)
    assert out.outcome == "passed", out.reason
    if unreadable:
        (warning,) = out.warnings
        assert warning.startswith(f"{STEPS} loss/grad-norm value(s) could not be read")
        assert "step 1 loss: 4.45.12 (ema)" in warning
    else:
        assert out.warnings == []
        assert len(out.losses) == STEPS and all(math.isfinite(v or math.nan) for v in out.losses)


def test_a_log_with_no_loss_at_all_passes_with_a_warning(tmp_path: Path) -> None:
    chunks = [("epoch done in 12 nanoseconds; info: loading\n", 0.0)] * 3
    out = run_log(tmp_path, chunks)
    assert out.outcome == "passed" and out.clock == "none" and out.step_format is None
    (warning,) = out.warnings
    assert warning.startswith("no loss or grad-norm value was read from the output")


@pytest.mark.parametrize("nan_at_mib", [0.5, 2.5])
def test_nan_deep_inside_a_very_long_line_is_seen(tmp_path: Path, nan_at_mib: float) -> None:
    # One line of 3 MiB (a progress dump without line ends), a NaN somewhere in it.
    head = "x" * int(nan_at_mib * (1 << 20))
    tail = "y" * (3 * (1 << 20) - len(head))
    chunks = [(head, 0.0), (" loss: nan ", 0.0), (tail + "\n", 0.0)]
    out = run_log(tmp_path, chunks)
    assert out.outcome == "failed", out.reason
    assert out.failure is not None and "loss: nan" in out.failure.line
    assert out.output_bytes > nan_at_mib * (1 << 20)


def test_finite_very_long_line_passes(tmp_path: Path) -> None:
    chunks = [("z" * (3 << 20) + " loss: 2.5 info\n", 0.0), *nanogpt(False).chunks]
    out = run_log(tmp_path, chunks)
    assert out.outcome == "passed", out.reason
    assert out.step_format == "nanogpt"
