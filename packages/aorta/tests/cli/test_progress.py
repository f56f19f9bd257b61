"""Progress of `aorta triage run`: which reporter is chosen, and what the live display shows."""

from __future__ import annotations

import io
import re
import subprocess
import sys
from pathlib import Path

import pytest
from aorta_testing import make_trial
from rich.console import Console

from aorta.cli.main import main
from aorta.cli.progress import LiveReporter, TriageLineReporter, choose_reporter, under_ci
from aorta.runner.models import RunRequest, TrialResult
from aorta.triage.analysis.cells import aggregate_cell, error_cell
from aorta.triage.report.reporting import CellPlan


@pytest.mark.parametrize(
    ("mode", "tty", "environ", "live"),
    [
        ("auto", True, {}, True),
        ("auto", False, {}, False),  # a pipe or a log file
        ("auto", True, {"CI": "true"}, False),
        ("auto", True, {"CI": "1"}, False),
        ("auto", True, {"CI": "false"}, True),  # explicitly off
        ("auto", True, {"CI": ""}, True),
        ("auto", True, {"TERM": "dumb"}, False),
        ("live", False, {"CI": "true"}, True),  # forced
        ("plain", True, {}, False),  # forced
    ],
)
def test_reporter_selection(mode: str, tty: bool, environ: dict[str, str], live: bool) -> None:
    reporter = choose_reporter(mode, echo=True, stdout_is_tty=tty, environ=environ)  # type: ignore[arg-type]
    assert isinstance(reporter, LiveReporter if live else TriageLineReporter)


def test_muted_ranks_never_get_a_live_display(capsys: pytest.CaptureFixture[str]) -> None:
    reporter = choose_reporter("live", echo=False, stdout_is_tty=True, environ={})
    assert isinstance(reporter, TriageLineReporter)
    reporter.matrix_started([CellPlan("a", 1, 1, (0,))])
    assert capsys.readouterr().out == ""


def test_under_ci_reads_the_usual_values() -> None:
    assert under_ci({"CI": "true"}) and under_ci({"CI": "yes"})
    assert not under_ci({}) and not under_ci({"CI": "0"}) and not under_ci({"CI": "off"})


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _request(tmp_path: Path, trials: int, steps: int) -> RunRequest:
    return RunRequest(workload="toy", output_dir=tmp_path, trials=trials, steps=steps)


def _result(trial_id: int, *, passed: bool, ms: float) -> TrialResult:
    return make_trial(
        trial_id,
        passed=passed,
        step_times_ms=[ms] * 3,
        failure="non-finite loss at step 4",
        workload="toy",
        steps=10,
        wall_clock_sec=0.5,
    )


def _frame(reporter: LiveReporter) -> str:
    console = Console(file=io.StringIO(), width=160, color_system=None)
    console.print(reporter.render())
    assert isinstance(console.file, io.StringIO)
    return console.file.getvalue()


def test_live_frames_show_cell_trial_step_eta_and_last_results(tmp_path: Path) -> None:
    clock = FakeClock()
    reporter = LiveReporter(clock=clock)
    request = _request(tmp_path, trials=4, steps=10)
    all_four = (0, 1, 2, 3)
    reporter.matrix_started(
        [CellPlan("baseline-local", 4, 10, all_four), CellPlan("fix-local", 4, 10, all_four)]
    )
    first = _frame(reporter)
    assert "ETA ?" in first  # nothing done yet: no pace to extrapolate from
    assert re.search(r"baseline-local\s+0/4\s+0", first)

    reporter.cell_started(0)
    reporter.trial_started(request, 0, 0)
    for step in range(10):
        reporter.step(0, step, 1.0, 2.0)
    reporter.trial_finished(_result(0, passed=False, ms=2.0))
    reporter.trial_started(request, 1, 1)
    for step in range(5):
        reporter.step(1, step, 2.5 - step * 0.25, 2.0)
    clock.now += 30.0  # 15 of the 80 steps took 30 s: 65 steps to go take 130 s
    frame = _frame(reporter)
    assert "cell 1/2 baseline-local" in frame
    assert "trial 2/4" in frame
    assert "step 5/10  loss 1.5" in frame  # the running trial's last step and loss
    assert "elapsed 0:00:30" in frame
    assert "ETA 0:02:10" in frame
    assert re.search(r"baseline-local\s+1/4\s+1\s+trial 1: FAILED: non-finite loss", frame)

    reporter.trial_finished(_result(1, passed=True, ms=3.0))
    results = [_result(0, passed=False, ms=2.0), _result(1, passed=True, ms=3.0)]
    reporter.cell_finished(0, aggregate_cell("baseline-local", results, trials_requested=4))
    reporter.cell_started(1)
    reporter.cell_finished(1, error_cell("fix-local", "no docker engine answered"))
    done = _frame(reporter)
    assert re.search(r"baseline-local\s+2/4\s+1\s+2\.5 ms\s+trial 2: passed, 3\.0 ms/step", done)
    assert re.search(r"fix-local\s+0/4\s+0\s+error: no docker engine answered", done)


def test_live_counts_trials_a_resumed_run_already_has(tmp_path: Path) -> None:
    clock = FakeClock()
    reporter = LiveReporter(clock=clock)
    reporter.matrix_started([CellPlan("a", 8, 10, (6, 7))])
    reporter.cell_started(0)
    reporter.trial_started(_request(tmp_path, trials=8, steps=10), 6, 6)
    reporter.step(6, 9, 1.0, 1.0)  # step 10 of 10: half the work of this invocation
    clock.now += 10.0
    frame = _frame(reporter)
    assert re.search(r"\ba\s+6/8\s+0", frame)
    assert "trial 7/8" in frame and "ETA 0:00:10" in frame


def test_live_display_draws_on_a_terminal_and_leaves_the_last_frame(tmp_path: Path) -> None:
    out = io.StringIO()
    console = Console(file=out, width=120, force_terminal=True, color_system=None)
    clock = FakeClock()
    with LiveReporter(console, clock=clock) as reporter:
        reporter.matrix_started([CellPlan("only-cell", 1, 2, (0,))])
        reporter.cell_started(0)
        reporter.trial_started(_request(tmp_path, trials=1, steps=2), 0, 0)
        reporter.trial_finished(_result(0, passed=True, ms=4.0))
        stats = aggregate_cell("only-cell", [_result(0, passed=True, ms=4.0)], trials_requested=1)
        reporter.cell_finished(0, stats)
    text = out.getvalue()
    assert "\x1b[" in text  # redrawn in place with cursor movement
    last = text.rsplit("aorta triage", 1)[-1]
    assert "only-cell" in last and "1/1" in last and "4.0 ms" in last


@pytest.mark.usefixtures("plugin")
def test_plain_lines_when_stdout_is_not_a_terminal(tmp_path: Path) -> None:
    done = subprocess.run(
        [str(Path(sys.executable).with_name("aorta")), "triage", "run", "--mode", "matrix",
         "--workload", "toy", "--mitigation-axis", "none,plugin_fix",
         "--environment-axis", "local", "--trials", "2", "--steps", "3",
         "--output-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "aorta triage: 2 cell(s), 4 trial(s) to run" in lines
    trial_lines = [line for line in lines if " trial " in line and "seed=" in line]
    assert len(trial_lines) == 4  # one line per trial
    # Interleaved (the default): round 1 of both cells, in a shuffled order, then round 2.
    prefixes = [line.split(": ")[0] for line in trial_lines]
    for round_no, pair in ((1, prefixes[:2]), (2, prefixes[2:])):
        assert sorted(pair) == [
            f"[cell 1/2 none-local] trial {round_no}/2 seed={round_no - 1}",
            f"[cell 2/2 plugin_fix-local] trial {round_no}/2 seed={round_no - 1}",
        ]
    assert all(": passed" in line for line in trial_lines)
    assert "[cell 1/2 none-local] done: 0/2 failed" in done.stdout
    assert "[cell 2/2 plugin_fix-local] done: 0/2 failed" in done.stdout
    assert "\x1b[" not in done.stdout  # no terminal control codes in a log


def test_help_and_listing_import_neither_rich_nor_matplotlib() -> None:
    probe = (
        "import sys, contextlib, io\n"
        "from aorta.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    main(['--help']); main(['triage', '--list-mitigations'])\n"
        "print(sorted(m for m in ('rich', 'matplotlib', 'torch') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_cli_progress_option_rejects_unknown_modes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["triage", "run", "--mode", "matrix", "--progress", "fancy"]) == 2
    assert "--progress" in capsys.readouterr().err
