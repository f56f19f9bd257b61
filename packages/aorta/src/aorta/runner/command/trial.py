"""Run one command trial end to end and decide its outcome.

The loop waits on two things at once: the output pipe and (via a pidfd) the main process's
exit, with a deadline for the timeout and one for the hang detector, so it wakes up only when
something happens. Every chunk read is written to the log as it is and handed to the scanner.
Whatever way the loop ends (exit, failure seen, hang, timeout, Ctrl-C), every process of the
trial is stopped before the function returns (`TrialProcesses.stop`).
"""

from __future__ import annotations

import contextlib
import os
import selectors
import shutil
import signal
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Literal

from aorta.runner.command.clocks import clocked_parser
from aorta.runner.command.digest import DigestingLog, LogSink
from aorta.runner.command.patterns import (
    DEFAULT_ERROR_PATTERNS,
    DEFAULT_FAILURE_PATTERNS,
    DefaultPattern,
    ScanPattern,
)
from aorta.runner.command.process import TrialProcesses, become_subreaper, start_trial_process
from aorta.runner.command.scanner import Match, OutputScanner, ScanState
from aorta.runner.command.spec import AUTO, CommandSpec, StepRegex, compile_pattern
from aorta.runner.host_load import HostLoad, LoadSampler
from aorta.runner.ownership import TrialOwnership
from aorta.workloads.contract import StepCallback, ignore_step

Outcome = Literal["passed", "failed", "error"]
StopReason = Literal["failure", "hang", "timeout"]

_READ_BYTES: Final = 1 << 16
# Without a pidfd (not Linux >= 5.3) the main process's exit is noticed by polling.
_POLL_NO_PIDFD_S: Final = 0.05
# After the processes are gone, output still in the pipe is read for at most this long
# (a process that escaped the trial could hold the pipe open forever).
_DRAIN_S: Final = 2.0


@dataclass(frozen=True)
class CommandTrialOutcome:
    """How one command trial went (the runner turns it into a `TrialResult`)."""

    outcome: Outcome
    reason: str | None
    argv: list[str]
    returncode: int | None
    stopped: StopReason | None
    signal_needed: str | None
    failure: Match | None
    error: Match | None
    step_times_ms: list[float]
    warmup_steps: int
    losses: list[float | None]
    steps_seen: int
    last_step: int | None
    clock: str
    wall_clock_sec: float
    log_path: Path | None
    host_load: HostLoad | None = None  # the host's load over the trial
    artifacts: list[str] = field(default_factory=list)
    output_bytes: int = 0
    step_format: str | None = None  # the log format the step times were read from
    warnings: list[str] = field(default_factory=list)  # what the read could not vouch for
    # blake2b of the output up to its first failure line (`DigestingLog`); None: no output.
    log_digest: str | None = None


def compiled_patterns(spec: CommandSpec) -> tuple[list[ScanPattern], list[ScanPattern]]:
    """(failure, error) patterns of a spec: the defaults (unless turned off), then its own."""

    def build(
        defaults: tuple[DefaultPattern, ...], own: tuple[str, ...], key: str
    ) -> list[ScanPattern]:
        chosen = defaults if spec.default_patterns else ()
        patterns = [ScanPattern(compile_pattern(p.regex, key), p.needles, p.name) for p in chosen]
        return patterns + [ScanPattern(compile_pattern(p, key)) for p in own]

    return (
        build(DEFAULT_FAILURE_PATTERNS, spec.failure_patterns, "failure_patterns"),
        build(DEFAULT_ERROR_PATTERNS, spec.error_patterns, "error_patterns"),
    )


def describe_exit(returncode: int | None) -> str:
    """`exited with code 3` / `killed by SIGKILL`."""
    if returncode is None:
        return "did not exit"
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exited with code {returncode}"


def classify(  # noqa: PLR0911 - one return per rule, in the documented order
    spec: CommandSpec,
    scan: ScanState,
    *,
    returncode: int | None,
    stopped: StopReason | None,
) -> tuple[Outcome, str | None]:
    """Decide passed / failed / error, with the reason (pure; the order is documented).

    failed: a failure pattern or non-finite parsed loss; an exit code in
    `failure_exit_codes`; a hang when `hang_is_failure`. error: an error pattern; a hang; the
    timeout; any other non-zero exit; a clean exit without a single step line when step
    times were asked for (nothing was measured). Otherwise passed.
    """
    if scan.failure is not None:
        return "failed", f"{scan.failure.pattern!r} matched: {scan.failure.line.strip()}"
    if returncode is not None and returncode in spec.failure_exit_codes and stopped is None:
        return "failed", f"{describe_exit(returncode)} (listed in failure_exit_codes)"
    if scan.error is not None:
        return "error", f"{scan.error.pattern!r} matched: {scan.error.line.strip()}"
    if stopped == "hang":
        after = f" after step {scan.last_step}" if scan.last_step is not None else ""
        reason = f"hang: no output for {spec.hang_after:g} s{after}"
        return ("failed" if spec.hang_is_failure else "error"), reason
    if stopped == "timeout":
        return "error", f"timeout: still running after {spec.timeout:g} s"
    if returncode != 0:
        return "error", f"{describe_exit(returncode)} without a failure match"
    if spec.step_time != AUTO and spec.clock != "none" and scan.steps_seen == 0:
        return (
            "error",
            f"exited 0 but no output line matched {_step_setting(spec)}: no step was measured",
        )
    return "passed", None


def _step_setting(spec: CommandSpec) -> str:
    """The step setting as a user wrote it: `step_time 'megatron'`, `step_time regex '...'`."""
    if isinstance(spec.step_time, StepRegex):
        return f"step_time regex {spec.step_time.regex!r} (unit {spec.step_time.unit})"
    if spec.step_time is not None:
        return f"step_time {spec.step_time!r}"
    return f"step_marker {spec.step_marker!r}"


def read_warnings(spec: CommandSpec, scan: ScanState, outcome: Outcome) -> list[str]:
    """What the read of a trial's output could not vouch for (pure; stated once per trial).

    An unreadable loss or grad norm is unknown, never non-finite; a trial that passed
    without a single loss read could not have shown a non-finite one in a format aorta
    does not know (unless the user's own patterns or exit codes say what failure looks like).
    """
    found = []
    if scan.unreadable:
        first = (scan.first_unreadable or "").strip()
        found.append(
            f"{scan.unreadable} loss/grad-norm value(s) could not be read as numbers and "
            f"count as unknown, not as non-finite (first: {first!r})"
        )
    own_signal = spec.failure_patterns or spec.failure_exit_codes
    if outcome == "passed" and not (scan.values_read or scan.unreadable or own_signal):
        found.append(
            "no loss or grad-norm value was read from the output (no line in a known format): "
            "a non-finite loss printed another way would go unseen; give step_time or "
            "failure_patterns"
        )
    return found


def _monotonic() -> float:
    return time.monotonic()


def _due(
    spec: CommandSpec, now: float, started: float, last_output: float
) -> StopReason | float | None:
    """The stop condition that has fired, else the next deadline (None: no deadline)."""
    deadlines = []
    if spec.timeout is not None:
        if now - started >= spec.timeout:
            return "timeout"
        deadlines.append(started + spec.timeout)
    if spec.hang_after is not None:
        if now - last_output >= spec.hang_after:
            return "hang"
        deadlines.append(last_output + spec.hang_after)
    return min(deadlines) if deadlines else None


def _pump(
    spec: CommandSpec,
    procs: TrialProcesses,
    scanner: OutputScanner,
    log: LogSink,
    started: float,
    load: LoadSampler,
) -> StopReason | None:
    """Read and scan output until the main process exits or a stop condition fires."""
    proc = procs.proc
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    selector = selectors.DefaultSelector()
    selector.register(fd, selectors.EVENT_READ, "out")
    pidfd = -1
    with contextlib.suppress(AttributeError, OSError):
        pidfd = os.pidfd_open(proc.pid)
        selector.register(pidfd, selectors.EVENT_READ, "exit")
    last_output = started
    pipe_open = True
    try:
        while True:
            now = _monotonic()
            due = _due(spec, now, started, last_output)
            if isinstance(due, str):
                return due
            wait = None if due is None else due - now
            if pidfd < 0:
                wait = _POLL_NO_PIDFD_S if wait is None else min(wait, _POLL_NO_PIDFD_S)
            for key, _ in selector.select(wait):
                if key.data == "out":
                    data = os.read(fd, _READ_BYTES)
                    if not data:
                        selector.unregister(fd)
                        pipe_open = False
                        continue
                    last_output = _monotonic()
                    load.sample(last_output)
                    log.write(data)
                    scanner.feed(data, last_output)
            if scanner.state.failure is not None and spec.stop_on_failure:
                return "failure"
            if proc.poll() is not None:
                return None
            if not pipe_open and pidfd < 0:
                time.sleep(_POLL_NO_PIDFD_S)
    finally:
        selector.close()
        if pidfd >= 0:
            os.close(pidfd)


def _drain(fd: int, scanner: OutputScanner, log: LogSink) -> None:
    """Read what is left in the pipe after the processes are gone (bounded in time)."""
    deadline = _monotonic() + _DRAIN_S
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while (left := deadline - _monotonic()) > 0:
            if not selector.select(left):
                return
            data = os.read(fd, _READ_BYTES)
            if not data:
                return
            log.write(data)
            scanner.feed(data, _monotonic())


def keep_artifacts(trial_dir: Path, patterns: Sequence[str]) -> list[str]:
    """With `collect` globs: keep the matching files of the trial directory, delete the rest.

    Without globs nothing is deleted and every file is listed. Returns the kept files,
    relative to `trial_dir`, sorted.
    """
    if not trial_dir.is_dir():
        return []
    files = sorted(p for p in trial_dir.rglob("*") if p.is_file() or p.is_symlink())
    if not patterns:
        return [str(p.relative_to(trial_dir)) for p in files]
    kept = {p for pattern in patterns for p in trial_dir.glob(pattern) if p.is_file()}
    for path in files:
        if path not in kept:
            path.unlink()
    for directory in sorted((p for p in trial_dir.rglob("*") if p.is_dir()), reverse=True):
        with contextlib.suppress(OSError):  # not empty: it holds a kept file
            directory.rmdir()
    return sorted(str(p.relative_to(trial_dir)) for p in kept)


def run_command_trial(
    spec: CommandSpec,
    argv: Sequence[str],
    env: Mapping[str, str],
    *,
    log_path: Path,
    trial_dir: Path,
    steps: int,
    on_step: StepCallback = ignore_step,
    owner: TrialOwnership | None = None,
) -> CommandTrialOutcome:
    """Run `argv` once as a trial of `spec` and return how it went (never raises for a trial).

    `env` is the complete process environment. The output goes to `log_path`; `trial_dir` is
    the command's `{output_dir}` (created here). KeyboardInterrupt propagates after every
    process of the trial has been stopped. `owner` (the trial's owner record) gets the main
    process's PID and marks the environment every process of the trial inherits.
    """
    become_subreaper()
    trial_dir.mkdir(parents=True, exist_ok=True)
    failure_patterns, error_patterns = compiled_patterns(spec)
    started = _monotonic()
    clock = clocked_parser(spec, started)
    scanner = OutputScanner(failure_patterns, error_patterns, clock.parser, on_step=on_step)
    load = LoadSampler()
    load.sample(started, force=True)
    child_env = dict(env)
    # A Python command writing to a pipe buffers its output in 8 KiB blocks: the hang
    # detector and arrival-timed steps would see bursts. Unbuffered unless the user decided.
    child_env.setdefault("PYTHONUNBUFFERED", "1")
    if owner is not None:
        child_env = owner.marked(child_env)
    stopped: StopReason | None = None
    signal_needed: str | None = None
    with log_path.open("wb") as log_file:
        log = DigestingLog(log_file, scanner.state)
        try:
            proc = start_trial_process(argv, child_env, spec.cwd)
        except OSError as exc:
            log.write(f"aorta: cannot start {argv[0]!r}: {exc}\n".encode())
            return _outcome(
                spec, argv, scanner.state, None, None, None, started, steps, log_path, trial_dir,
                reason=f"cannot start {argv[0]!r}: {exc.strerror or exc}",
            )  # fmt: skip
        procs = TrialProcesses(proc)
        clock.attach(procs)
        try:
            if owner is not None:
                owner.started(proc.pid)
            stopped = _pump(spec, procs, scanner, log, started, load)
        finally:
            signal_needed = procs.stop(spec.kill_grace)
            assert proc.stdout is not None
            _drain(proc.stdout.fileno(), scanner, log)
            proc.stdout.close()
            scanner.finish(_monotonic())
            log_digest = log.finish()
    load.sample(_monotonic(), force=True)
    return _outcome(
        spec, argv, scanner.state, proc.returncode, stopped, signal_needed, started, steps,
        log_path, trial_dir, host_load=load.record(), log_digest=log_digest,
    )  # fmt: skip


def _outcome(
    spec: CommandSpec,
    argv: Sequence[str],
    scan: ScanState,
    returncode: int | None,
    stopped: StopReason | None,
    signal_needed: str | None,
    started: float,
    steps: int,
    log_path: Path,
    trial_dir: Path,
    *,
    reason: str | None = None,
    host_load: HostLoad | None = None,
    log_digest: str | None = None,
) -> CommandTrialOutcome:
    if reason is not None:
        outcome: Outcome = "error"
    else:
        outcome, reason = classify(spec, scan, returncode=returncode, stopped=stopped)
    warmup = min(spec.warmup_for(steps), len(scan.step_times_ms))
    keep = spec.keep_logs == "all" or (spec.keep_logs == "failed" and outcome != "passed")
    if not keep:
        log_path.unlink(missing_ok=True)
    artifacts = keep_artifacts(trial_dir, spec.collect)
    if not artifacts and trial_dir.is_dir() and not any(trial_dir.iterdir()):
        shutil.rmtree(trial_dir)
    return CommandTrialOutcome(
        outcome=outcome,
        reason=reason,
        argv=list(argv),
        returncode=returncode,
        stopped=stopped,
        signal_needed=signal_needed,
        failure=scan.failure,
        error=scan.error,
        step_times_ms=scan.step_times_ms[warmup:],
        warmup_steps=warmup,
        losses=list(scan.losses),
        steps_seen=scan.steps_seen,
        last_step=scan.last_step,
        clock=trial_clock(spec, scan),
        wall_clock_sec=_monotonic() - started,
        log_path=log_path if keep else None,
        host_load=host_load,
        artifacts=artifacts,
        output_bytes=scan.bytes_seen,
        step_format=scan.step_format,
        warnings=read_warnings(spec, scan, outcome),
        log_digest=log_digest,
    )


def trial_clock(spec: CommandSpec, scan: ScanState) -> str:
    """Where this trial's step times came from: `log`, `arrival`, or `none` (no step time).

    A fixed setting keeps its own clock; with `auto` it is what the trial's log gave.
    """
    if spec.clock != "auto":
        return spec.clock
    return scan.clock if scan.clock is not None else "none"
