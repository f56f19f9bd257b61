"""Scanning output: presets, failure/error precedence, chunk boundaries, bounded memory."""

from __future__ import annotations

import json
import math
import sys

import pytest

from aorta.runner.command.scanner import OutputScanner
from aorta.runner.command.spec import parse_command_spec
from aorta.runner.command.steps import step_parser
from aorta.runner.command.trial import compiled_patterns
from aorta.runner.command.values import parse_number

MEGATRON = (
    " [2026-05-01 10:00:00] iteration       10/     100 | consumed samples:         5120 |"
    " elapsed time per iteration (ms): 412.3 | learning rate: 3.000000E-04 |"
    " global batch size:   512 | lm loss: 2.345000E+00 | loss scale: 1.0 | grad norm: 0.812 |"
    " number of skipped iterations:   0 | number of nan iterations:   0 |\n"
)


def scanner_for(**settings: object) -> OutputScanner:
    spec = parse_command_spec({"command": [sys.executable], **settings})
    failure, error = compiled_patterns(spec)
    return OutputScanner(failure, error, step_parser(spec, 0.0))


def test_megatron_preset_parses_time_step_and_loss() -> None:
    scanner = scanner_for(step_time="megatron")
    scanner.feed(MEGATRON.encode(), 1.0)
    scanner.feed(MEGATRON.replace("10/", "20/").replace("412.3", "398.0").encode(), 2.0)
    state = scanner.state
    assert state.step_times_ms == [412.3, 398.0]
    assert state.losses == [2.345, 2.345]
    assert state.last_step == 20
    assert state.failure is None and state.error is None


def test_megatron_nan_iteration_is_a_failure_at_that_iteration() -> None:
    # Megatron leaves a NaN loss out of the line and counts a nan iteration instead.
    nan_line = MEGATRON.replace("10/", "30/").replace(" lm loss: 2.345000E+00 |", "")
    nan_line = nan_line.replace("nan iterations:   0", "nan iterations:   1")
    scanner = scanner_for(step_time="megatron")
    scanner.feed((MEGATRON + nan_line).encode(), 1.0)
    failure = scanner.state.failure
    assert failure is not None
    assert failure.at_step == 30
    assert "number of nan iterations" in failure.pattern
    assert "iteration       30/" in failure.line


@pytest.mark.parametrize(
    "line",
    [
        '{"step": 3, "step_time_ms": 40.0, "loss": NaN}',
        "step 3 | lm loss: nan |",
        "{'loss': inf, 'grad_norm': 1.0, 'learning_rate': 5e-05, 'epoch': 0.1}",
        "Epoch 0:  30%|###  | 3/10 [00:01<00:02, 2.9it/s, v_num=0, train_loss=nan]",
        "step=3 loss = -inf",
        "iter 3: grad_norm: nan",
        '{"step": 3, "loss": null, "failure": "non-finite grad norm at step 3"}',
        "iter 8: loss nan, time 16.67ms, mfu -100.00%",  # nanoGPT
        "loss: nan",
        "loss=nan",
        "train loss inf",
        " iteration 3/ 10 | lm loss: NAN | loss scale: 1.0 |",  # '{:.6E}' of a NaN
        "number of nan iterations:   1",
        "step 3: loss = tensor(nan, device='cuda:0', grad_fn=<AddBackward0>)",
        "| epoch 001 | loss nan | nll_loss nan | ppl nan | wps 1234",  # fairseq
        "epoch 001:     10 / 100 loss=12.3, gnorm=inf, num_updates=10",
        "ValueError: The loss returned in `training_step` is nan.",  # Lightning
        "FloatingPointError: gradients are Nan/Inf",  # fairseq
    ],
)
def test_default_failure_patterns_catch_nonfinite_losses(line: str) -> None:
    scanner = scanner_for()
    scanner.feed(f"starting\n{line}\n".encode(), 1.0)
    assert scanner.state.failure is not None
    assert scanner.state.failure.line == line


@pytest.mark.parametrize(
    "line",
    [
        "loss: 2.31",
        "lr: inf_schedule",
        "nanoseconds: 12",
        "'loss': 0.5, 'info': 'nan'",
        "saving loss info to disk",
        "loss inference took 12 nanoseconds",
        "loss_scale: inf",
        "number of nan iterations:   0",
        "iter 8: loss 4.4512, time 16.67ms, mfu -100.00%",
        "step 3: loss = tensor(2.3012, grad_fn=<AddBackward0>)",
    ],
)
def test_default_failure_patterns_leave_finite_lines_alone(line: str) -> None:
    scanner = scanner_for()
    scanner.feed(f"{line}\n".encode(), 1.0)
    assert scanner.state.failure is None


def test_nan_inside_ansi_colours_and_tqdm_redraws_is_seen() -> None:
    scanner = scanner_for()
    bar = "\r 30%|###   | 3/10 [00:01<00:02,  2.90it/s, loss=\x1b[31m{}\x1b[0m]"
    scanner.feed((bar.format("2.3") + bar.replace("3/10", "4/10").format("nan")).encode(), 1.0)
    scanner.feed(b"\r", 2.0)
    failure = scanner.state.failure
    assert failure is not None and failure.pattern == "non-finite loss"
    assert failure.line == " 30%|###   | 4/10 [00:01<00:02,  2.90it/s, loss=nan]"  # colours gone
    assert failure.at_step == 4
    assert scanner.state.step_format == "hf" and scanner.state.clock == "log"


def test_an_evaluation_bar_between_training_bars_is_not_a_step() -> None:
    scanner = scanner_for()
    train = "\r  {s}%|#   | {s}/100 [00:0{s}<00:20,  4.00it/s]"
    evaluation = "\r 50%|#####     | 5/10 [00:00<00:00, 40.00it/s]"
    out = train.format(s=1) + train.format(s=2) + evaluation + train.format(s=3) + "\n"
    scanner.feed(out.encode(), 1.0)
    assert scanner.state.step_times_ms == [250.0, 250.0, 250.0]
    assert scanner.state.last_step == 3


def test_printed_step_times_replace_arrival_times_once_seen() -> None:
    # DeepSpeed: `step=N` (no time) comes before the `steps: N ... iter time (s)` line.
    scanner = scanner_for()
    scanner.feed(b"[Rank 0] step=1, skipped=0, lr=[0.0001], mom=[(0.9, 0.999)]\n", 1.0)
    assert scanner.state.clock == "arrival" and scanner.state.steps_seen == 1
    scanner.feed(b"steps: 1 loss: 2.5000 iter time (s): 0.250 samples/sec: 128.0\n", 1.1)
    scanner.feed(b"[Rank 0] step=2, skipped=0, lr=[0.0001], mom=[(0.9, 0.999)]\n", 1.3)
    scanner.feed(b"steps: 2 loss: 2.4000 iter time (s): 0.200 samples/sec: 160.0\n", 1.35)
    state = scanner.state
    assert (state.clock, state.step_format) == ("log", "deepspeed")
    assert state.step_times_ms == [250.0, 200.0] and state.losses == [2.5, 2.4]


def test_arrival_time_is_divided_by_the_steps_between_lines() -> None:
    scanner = scanner_for()
    scanner.feed(b"step 10 loss: 2.0\n", 1.0)
    scanner.feed(b"step 20 loss: 1.9\n", 3.0)  # 10 steps in 2 s
    assert scanner.state.step_times_ms[1] == pytest.approx(200.0)


@pytest.mark.parametrize(
    "line",
    ["step 1 of 3: loss function ready", "step 2 loss info: 3", "iteration 4 | loss scale: inf"],
)
def test_words_after_loss_are_no_value(line: str) -> None:
    scanner = scanner_for()
    scanner.feed(f"{line}\n".encode(), 1.0)
    state = scanner.state
    assert (state.failure, state.unreadable, state.values_read) == (None, 0, 0)


def test_unreadable_loss_is_unknown_not_a_failure() -> None:
    scanner = scanner_for()
    scanner.feed(b"step 1 loss: 4.45.12\nstep 2 loss: 2.0\n", 1.0)
    state = scanner.state
    assert state.failure is None
    assert (state.unreadable, state.values_read, state.losses) == (1, 1, [2.0])
    assert state.first_unreadable == "step 1 loss: 4.45.12"


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        ("4.4512,", 4.4512),
        ("1.2e+00 |", 1.2),
        ("tensor(2.3012, grad_fn=<AddBackward0>)", 2.3012),
        ("tensor([0.5000], device='cuda:0')", 0.5),
        ("'2.25'", 2.25),
        ("NAN", math.nan),
        ("-inf", -math.inf),
        ("tensor(nan, device='cuda:0')", math.nan),
        ("4.45.12", None),
        ("1_000", None),
        ("n/a", None),
    ],
)
def test_parse_number_reads_what_logs_print(raw: str, value: float | None) -> None:
    got = parse_number(raw)
    if value is None:
        assert got is None
    elif math.isnan(value):
        assert got is not None and math.isnan(got)
    else:
        assert got == value


@pytest.mark.parametrize(
    "line",
    [
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
        "RuntimeError: HIP out of memory. Tried to allocate 1.00 GiB",
        "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5)",
        "ModuleNotFoundError: No module named 'megatron'",
    ],
)
def test_default_error_patterns(line: str) -> None:
    scanner = scanner_for()
    scanner.feed(f"{line}\n".encode(), 1.0)
    assert scanner.state.error is not None and scanner.state.error.line == line


def test_user_patterns_add_to_defaults_or_replace_them() -> None:
    both = scanner_for(failure_patterns=["DIVERGED"])
    both.feed(b"loss: nan\n", 1.0)
    assert both.state.failure is not None
    only = scanner_for(failure_patterns=["DIVERGED"], default_patterns=False)
    only.feed(b"loss: nan\nCUDA out of memory\n", 1.0)
    assert only.state.failure is None and only.state.error is None
    only.feed(b"run DIVERGED here\n", 1.0)
    assert only.state.failure is not None and only.state.failure.line == "run DIVERGED here"


def test_jsonl_preset_and_lines_split_across_chunks() -> None:
    scanner = scanner_for(step_time="jsonl")
    lines = "".join(
        json.dumps({"step": i, "step_time_ms": 10.0 + i, "loss": 1.0 / (i + 1)}) + "\n"
        for i in range(5)
    ).encode()
    for offset in range(0, len(lines), 7):  # chunks that cut lines anywhere
        scanner.feed(lines[offset : offset + 7], 1.0)
    assert scanner.state.step_times_ms == [10.0, 11.0, 12.0, 13.0, 14.0]
    assert scanner.state.last_step == 4
    assert scanner.state.losses[-1] == pytest.approx(0.2)


def test_jsonl_null_loss_is_a_failure_and_its_time_is_not_a_step_time() -> None:
    scanner = scanner_for(step_time="jsonl")
    scanner.feed(b'{"step": 0, "step_time_ms": 5, "loss": 1.0}\n', 1.0)
    scanner.feed(b'{"step": 1, "step_time_ms": 6, "loss": null}\n', 1.0)
    assert scanner.state.failure is not None and scanner.state.failure.at_step == 1
    assert scanner.state.step_times_ms == [5.0]
    assert scanner.state.losses == [1.0, None]


def test_hf_preset_tqdm_rates_and_loss_lines() -> None:
    scanner = scanner_for(step_time="hf")
    bar = " {p}%|#| {s}/100 [00:0{s}<00:20, {r}]"
    out = "\r".join(
        [
            bar.format(p=1, s=1, r="2.00it/s"),
            bar.format(p=1, s=1, r="2.00it/s"),  # a redraw of the same step
            bar.format(p=2, s=2, r="4.00it/s"),
            bar.format(p=3, s=3, r="1.50s/it"),
        ]
    )
    scanner.feed((out + "\n{'loss': 2.25, 'grad_norm': 1.0, 'epoch': 0.03}\n").encode(), 1.0)
    assert scanner.state.step_times_ms == [500.0, 250.0, 1500.0]
    assert scanner.state.losses == [2.25]


def test_user_regex_in_seconds() -> None:
    scanner = scanner_for(
        step_time={"regex": r"step (?P<step>\d+) (?P<time>[0-9.]+)s", "unit": "s"}
    )
    scanner.feed(b"step 1 0.25s\nstep 2 0.5s\n", 1.0)
    assert scanner.state.step_times_ms == [250.0, 500.0]
    assert scanner.state.last_step == 2


def test_step_marker_is_timed_by_arrival() -> None:
    spec = parse_command_spec({"command": [sys.executable], "step_marker": r"^STEP"})
    scanner = OutputScanner([], [], step_parser(spec, 10.0))
    scanner.feed(b"STEP\n", 10.5)
    scanner.feed(b"noise\nSTEP\n", 11.25)
    assert scanner.state.step_times_ms == [500.0, 750.0]


@pytest.mark.parametrize("at", [100, 1020, 1024 - 4, 3000, 9000])
def test_nan_anywhere_in_an_over_long_line_is_seen_even_across_a_window_edge(at: int) -> None:
    spec = parse_command_spec({"command": [sys.executable]})
    failure, error = compiled_patterns(spec)
    scanner = OutputScanner(failure, error, step_parser(spec, 0.0), max_line=1024)
    data = b"x" * at + b" loss: nan " + b"y" * 10_000 + b"\n"
    for offset in range(0, len(data), 7):  # chunks that cut the match anywhere
        scanner.feed(data[offset : offset + 7], 1.0)
        assert len(scanner._carry) <= 1024 + 7
    assert scanner.state.failure is not None
    assert "loss: nan" in scanner.state.failure.line


def test_over_long_line_is_read_in_windows_and_memory_stays_bounded() -> None:
    spec = parse_command_spec({"command": [sys.executable], "step_time": "jsonl"})
    failure, error = compiled_patterns(spec)
    scanner = OutputScanner(failure, error, step_parser(spec, 0.0), max_line=1024)
    scanner.feed(b"ModuleNotFoundError: No module named 'x' " + b"z" * 4000, 1.0)  # no newline
    assert scanner.state.error is not None
    for _ in range(100):  # 6.4 MB more of the same line: nothing of it is kept
        scanner.feed(b"z" * 65536, 1.0)
        assert len(scanner._carry) <= 1024
    scanner.feed(b'zz\n{"step": 1, "step_time_ms": 3.0, "loss": 1.0}\n', 1.0)
    assert scanner.state.step_times_ms == [3.0]


def test_last_line_without_newline_is_scanned_at_the_end() -> None:
    scanner = scanner_for()
    scanner.feed(b"ok\nloss: inf", 1.0)
    assert scanner.state.failure is None
    scanner.finish(2.0)
    assert scanner.state.failure is not None


def test_live_step_callback_gets_the_last_step_of_each_chunk() -> None:
    seen: list[tuple[int, float | None, float]] = []
    spec = parse_command_spec({"command": [sys.executable], "step_time": "jsonl"})
    scanner = OutputScanner(
        [], [], step_parser(spec, 0.0), on_step=lambda s, loss, ms: seen.append((s, loss, ms))
    )
    scanner.feed(
        b'{"step": 1, "step_time_ms": 3.0, "loss": 2.0}\n{"step": 2, "step_time_ms": 4.0, '
        b'"loss": 1.5}\n',
        1.0,
    )
    assert seen == [(1, 1.5, 4.0)]  # the second step line (counted from 0)
    assert math.isclose(scanner.state.losses[0], 2.0)  # type: ignore[arg-type]
