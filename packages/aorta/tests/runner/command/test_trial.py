"""Command trials as real processes: outcomes, hangs, timeouts, orphans, logs, artifacts."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from aorta.runner.command.process import read_proc
from aorta.runner.command.spec import parse_command_spec, render_argv
from aorta.runner.command.trial import CommandTrialOutcome, run_command_trial

SCRIPTS = Path(__file__).parent / "scripts"
BEHAVE = [sys.executable, str(SCRIPTS / "behave.py")]
REPLAY = [sys.executable, str(SCRIPTS / "megatron_replay.py")]

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc")


def run(
    tmp_path: Path, argv: list[str], env: dict[str, str] | None = None, **settings: object
) -> CommandTrialOutcome:
    spec = parse_command_spec({"command": argv, **settings})
    values = {
        "seed": 0,
        "trial_id": 0,
        "steps": 10,
        "cell": "c",
        "output_dir": tmp_path / "trial_0",
    }
    return run_command_trial(
        spec,
        render_argv(argv, values),
        {**os.environ, **(env or {})},
        log_path=tmp_path / "trial_0.log",
        trial_dir=tmp_path / "trial_0",
        steps=10,
    )


def alive(pid: int) -> bool:
    info = read_proc(pid)
    return info is not None and info.state not in ("Z", "X")


def pids(path: Path) -> list[int]:
    return [int(p) for p in path.read_text().split()]


def test_hang_after_five_steps_is_an_error_and_ends_soon_after(tmp_path: Path) -> None:
    start = time.monotonic()
    out = run(tmp_path, [*BEHAVE, "steps", "5", "--then", "hang"], step_time="jsonl", hang_after=1)
    took = time.monotonic() - start
    assert (out.outcome, out.stopped, out.signal_needed) == ("error", "hang", "SIGTERM")
    assert out.reason == "hang: no output for 1 s after step 5"
    assert out.steps_seen == 5 and out.last_step == 5
    assert 1.0 <= took < 3.0
    assert out.log_path is not None and out.log_path.read_text().count("step_time_ms") == 5


def test_hang_is_failure(tmp_path: Path) -> None:
    out = run(
        tmp_path,
        [*BEHAVE, "steps", "2", "--then", "hang"],
        hang_after=0.5,
        hang_is_failure=True,
    )
    assert (out.outcome, out.stopped) == ("failed", "hang")


def test_timeout_kills_a_command_that_ignores_sigterm(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    out = run(tmp_path, [*BEHAVE, "ignore-term", str(pidfile)], timeout=1, kill_grace=0.5)
    assert (out.outcome, out.stopped, out.signal_needed) == ("error", "timeout", "SIGKILL")
    assert out.reason == "timeout: still running after 1 s"
    assert out.returncode == -9
    assert not alive(pids(pidfile)[0])


def test_child_that_outlives_its_parent_in_a_new_session_is_killed(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    out = run(tmp_path, [*BEHAVE, "fork-orphan", str(pidfile)], kill_grace=0.5)
    parent, child = pids(pidfile)
    # The command itself exited 0: the trial passed, and its left-over child (setsid, SIGTERM
    # ignored: out of the process group and the session) was still killed.
    assert (out.outcome, out.returncode, out.signal_needed) == ("passed", 0, "SIGKILL")
    assert not alive(parent) and not alive(child)
    assert read_proc(child) is None  # reaped, not a zombie


def test_nan_stops_the_trial_early_as_failed(tmp_path: Path) -> None:
    out = run(tmp_path, [*BEHAVE, "steps", "4", "--then", "nan"], step_time="jsonl")
    assert (out.outcome, out.stopped) == ("failed", "failure")
    assert out.failure is not None and out.failure.at_step == 5
    assert out.step_times_ms == [13.0, 14.0]  # warm-up 2 of 10 steps; the NaN step has no time


@pytest.mark.parametrize(
    ("then", "settings", "expected"),
    [
        ("exit:3", {"failure_exit_codes": [3]}, ("failed", "exited with code 3 (listed in")),
        ("exit:2", {}, ("error", "exited with code 2 without a failure match")),
        ("exit:0", {}, ("passed", None)),
    ],
)
def test_exit_status(
    tmp_path: Path, then: str, settings: dict[str, object], expected: tuple[str, str | None]
) -> None:
    out = run(tmp_path, [*BEHAVE, "steps", "1", "--then", then], **settings)
    assert out.outcome == expected[0]
    assert (out.reason or "").startswith(expected[1] or "")


def test_clean_exit_without_any_step_line_measured_nothing(tmp_path: Path) -> None:
    out = run(tmp_path, [sys.executable, "-c", "print('hello')"], step_time="megatron")
    assert out.outcome == "error"
    assert (
        out.reason
        == "exited 0 but no output line matched step_time 'megatron': no step was measured"
    )


def test_command_that_cannot_start_is_an_error(tmp_path: Path) -> None:
    spec = parse_command_spec({"command": [sys.executable]})
    out = run_command_trial(
        spec,
        [str(tmp_path / "gone")],
        dict(os.environ),
        log_path=tmp_path / "t.log",
        trial_dir=tmp_path / "t",
        steps=1,
    )
    assert out.outcome == "error" and (out.reason or "").startswith("cannot start")


def test_environment_reaches_the_command(tmp_path: Path) -> None:
    code = (
        "import os; e = os.environ; print(e['AORTA_X'], e['PYTHONUNBUFFERED']); print('loss: nan')"
    )
    out = run(tmp_path, [sys.executable, "-c", code], env={"AORTA_X": "on"}, keep_logs="all")
    assert out.outcome == "failed"
    assert out.log_path is not None and out.log_path.read_text().startswith("on 1\n")


def test_logs_and_artifacts_retention(tmp_path: Path) -> None:
    code = (
        "import pathlib, sys; d = pathlib.Path(sys.argv[1]); (d / 'sub').mkdir();"
        "(d / 'metrics.json').write_text('{{}}'); (d / 'ckpt.pt').write_text('x' * 100);"
        "(d / 'sub' / 'm.json').write_text('{{}}'); print('done')"
    )
    argv = [sys.executable, "-c", code, "{output_dir}"]
    out = run(tmp_path, argv, collect=["*.json", "sub/*.json"])
    assert out.outcome == "passed"
    assert out.log_path is None and not (tmp_path / "trial_0.log").exists()  # keep_logs: failed
    assert out.artifacts == ["metrics.json", "sub/m.json"]
    assert not (tmp_path / "trial_0" / "ckpt.pt").exists()
    (tmp_path / "b").mkdir()
    kept = run(tmp_path / "b", argv, keep_logs="all")
    assert kept.log_path is not None and kept.log_path.read_text() == "done\n"
    assert kept.artifacts == ["ckpt.pt", "metrics.json", "sub/m.json"]  # no collect: all kept


def test_output_is_logged_whole_and_scanned(tmp_path: Path) -> None:
    size = 8 << 20
    out = run(tmp_path, [*BEHAVE, "spew", str(size)], step_time="jsonl", keep_logs="all")
    assert out.outcome == "passed" and out.steps_seen == 1
    assert out.log_path is not None and out.log_path.stat().st_size == out.output_bytes
    assert out.output_bytes > size - (1 << 20)  # whole 1 MiB blocks, then the step line


def test_megatron_replay_nan_at_iteration(tmp_path: Path) -> None:
    out = run(tmp_path, [*REPLAY, "12", "--nan-at", "9"], step_time="megatron")
    assert out.outcome == "failed" and out.failure is not None
    assert out.failure.at_step == 9
    assert "number of nan iterations" in (out.reason or "")
    # Iterations 1..9 printed a time (Megatron completes a NaN iteration and skips its
    # update), the first 2 are warm-up.
    assert out.warmup_steps == 2 and len(out.step_times_ms) == 7
    assert all(17.0 <= ms <= 23.0 for ms in out.step_times_ms)  # printed by the log, not timed
    assert out.losses[:2] == [8.0, 4.0]
    assert out.clock == "log"


def test_megatron_replay_oom_is_an_error(tmp_path: Path) -> None:
    out = run(tmp_path, [*REPLAY, "12", "--oom-at", "4"], step_time="megatron")
    assert out.outcome == "error"
    assert "CUDA out of memory" in (out.reason or "") and out.returncode == 1
    assert out.steps_seen == 3


def test_megatron_replay_hang(tmp_path: Path) -> None:
    # 2 s, not less: under load the replay's start-up alone can outlast a shorter silence.
    out = run(tmp_path, [*REPLAY, "12", "--hang-at", "6"], step_time="megatron", hang_after=2)
    assert (out.outcome, out.stopped, out.last_step) == ("error", "hang", 5)


def test_a_step_regex_that_never_matched_is_named_as_written_not_as_a_repr(
    tmp_path: Path,
) -> None:
    regex = r"took (?P<time>[0-9.]+) ms"
    out = run(tmp_path, [*BEHAVE, "steps", "2"], step_time={"regex": regex, "unit": "ms"})
    assert out.outcome == "error"
    assert out.reason == (
        f"exited 0 but no output line matched step_time regex {regex!r} (unit ms): "
        "no step was measured"
    )


def test_with_no_settings_a_clean_exit_without_step_lines_passes_and_says_so(
    tmp_path: Path,
) -> None:
    out = run(tmp_path, [sys.executable, "-c", "print('training done')"])
    assert (out.outcome, out.clock, out.step_format) == ("passed", "none", None)
    assert len(out.warnings) == 1 and "no loss or grad-norm value was read" in out.warnings[0]
    # The user's own failure pattern says what a failure looks like: no such warning.
    mine = run(tmp_path / "mine", [sys.executable, "-c", "print('ok')"], failure_patterns=["BAD"])
    assert mine.outcome == "passed" and mine.warnings == []
