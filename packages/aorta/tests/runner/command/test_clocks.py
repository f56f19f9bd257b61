"""Step clocks of command trials: `clock: log | arrival | cpu` on real processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from aorta.runner.command.clocks import IntervalSteps
from aorta.runner.command.spec import compile_pattern, parse_command_spec
from aorta.runner.command.steps import RegexSteps
from aorta.runner.command.trial import CommandTrialOutcome, run_command_trial

WORK = Path(__file__).parent / "scripts" / "work.py"
# The step lines of work.py, with the (deliberately wrong) printed time of 1 ms.
STEP_TIME = {"regex": r"^step (?P<step>\d+) printed (?P<time>[0-9.]+) ms", "unit": "ms"}
STEPS = 5
SECONDS = 0.2

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc")


def run(
    tmp_path: Path, mode: str, clock: str, *, prefix: tuple[str, ...] = ()
) -> CommandTrialOutcome:
    argv = [*prefix, sys.executable, str(WORK), mode, str(STEPS), str(SECONDS)]
    # warmup 1: the first step also holds the interpreter's start-up
    spec = parse_command_spec(
        {"command": argv, "step_time": STEP_TIME, "clock": clock, "warmup_steps": 1}
    )
    out = run_command_trial(
        spec,
        argv,
        dict(os.environ),
        log_path=tmp_path / f"{mode}-{clock}.log",
        trial_dir=tmp_path / f"{mode}-{clock}",
        steps=STEPS,
    )
    assert out.outcome == "passed", out.reason
    assert out.clock == clock and len(out.step_times_ms) == STEPS - 1
    assert out.host_load is not None and out.host_load.samples >= 2  # start and end
    return out


def mean(values: list[float]) -> float:
    return sum(values) / len(values)


def test_interval_clock_shares_a_chunk_between_its_step_lines() -> None:
    readings = iter([3.0, 3.5])
    inner = RegexSteps(compile_pattern(STEP_TIME["regex"], "step_time"), "ms")
    steps = IntervalSteps(inner, lambda _arrival: next(readings), 0.0)
    text = "step 1 printed 1.0 ms\nloss line\nstep 2 printed 1.0 ms\nstep 3 printed 1.0 ms\n"
    first = [event.time_ms for _, event in steps.events(text, 0.0)]
    assert first == pytest.approx([1000.0, 1000.0, 1000.0])  # 3 s over three step lines
    assert steps.events("no step here\n", 1.0) == []  # the clock is not read without steps
    ((_, event),) = steps.events("step 4 printed 1.0 ms\n", 2.0)
    assert event.time_ms == pytest.approx(500.0) and event.step == 4


def test_interval_clock_gives_the_time_per_iteration_of_a_line_every_n_steps() -> None:
    readings = iter([1.0, 3.0, 4.0])
    inner = RegexSteps(compile_pattern(STEP_TIME["regex"], "step_time"), "ms")
    steps = IntervalSteps(inner, lambda _arrival: next(readings), 0.0)
    assert [e.time_ms for _, e in steps.events("step 10 printed 1 ms\n", 0.0)] == [1000.0]
    # 2 s over iterations 11..20: 200 ms per iteration, as Megatron's own figure reads
    assert [e.time_ms for _, e in steps.events("step 20 printed 1 ms\n", 0.0)] == [200.0]
    # a chunk of two lines, 20 iterations, 1 s: 50 ms per iteration for each line
    both = steps.events("step 30 printed 1 ms\nstep 40 printed 1 ms\n", 0.0)
    assert [e.time_ms for _, e in both] == pytest.approx([50.0, 50.0])


def test_cpu_clock_counts_busy_steps_and_not_sleeping_ones(tmp_path: Path) -> None:
    busy = run(tmp_path, "busy", "cpu")
    asleep = run(tmp_path, "sleep", "cpu")
    by_arrival = run(tmp_path, "sleep", "arrival")
    by_log = run(tmp_path, "sleep", "log")
    work_ms = SECONDS * 1000
    assert 0.75 * work_ms < mean(busy.step_times_ms) < 1.5 * work_ms
    assert max(asleep.step_times_ms) < 0.25 * work_ms  # sleeping costs no CPU
    assert 0.9 * work_ms < mean(by_arrival.step_times_ms) < 2.0 * work_ms
    assert by_log.step_times_ms == [1.0] * (STEPS - 1)  # the printed numbers


@pytest.mark.parametrize("mode", ["child", "worker"])
def test_cpu_clock_counts_reaped_children_and_workers_in_their_own_session(
    tmp_path: Path, mode: str
) -> None:
    """child: each step's CPU is burnt by a child that exits (the parent's cutime holds it);
    worker: a process in a session of its own (torchrun's workers) does the work."""
    out = run(tmp_path, mode, "cpu")
    work_ms = SECONDS * 1000
    # A child also pays for its interpreter's start-up on top of the step's work.
    assert 0.75 * work_ms < mean(out.step_times_ms) < 2.0 * work_ms


def test_cpu_clock_ignores_a_competitor_that_doubles_the_wall_time(tmp_path: Path) -> None:
    """Trial and a busy competitor share one CPU: arrival time doubles, CPU time does not."""
    cpu = min(os.sched_getaffinity(0))
    pin_code = (
        f"import os, sys; os.sched_setaffinity(0, [{cpu}]); os.execv(sys.argv[1], sys.argv[1:])"
    )
    pin = (sys.executable, "-c", pin_code)
    spinner = f"import os\nos.sched_setaffinity(0, [{cpu}])\nwhile True: pass\n"
    competitor = subprocess.Popen([sys.executable, "-c", spinner])
    try:
        time.sleep(0.2)  # let it take its share of the CPU
        by_cpu = run(tmp_path, "busy", "cpu", prefix=pin)
        by_arrival = run(tmp_path, "busy", "arrival", prefix=pin)
    finally:
        competitor.send_signal(signal.SIGKILL)
        competitor.wait()
    work_ms = SECONDS * 1000
    assert 0.75 * work_ms < mean(by_cpu.step_times_ms) < 1.5 * work_ms
    # The wall clock saw the competitor. Not a full 2x: the scheduler's split of one CPU between
    # a sleeper-woken trial and a spinner is not exactly even (1.55x seen in a loaded CI run).
    arrival = mean(by_arrival.step_times_ms)
    assert arrival > 1.3 * work_ms and arrival > 1.2 * mean(by_cpu.step_times_ms)
