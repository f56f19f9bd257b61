"""Progress of `aorta triage run`: a live display on a terminal, plain log lines elsewhere.

Both are `MatrixReporter`s fed by `run_recipe` (the library never prints). `choose_reporter`
picks the live display only when stdout is a terminal, CI is not set and the terminal is not
`dumb`: logs, pipes and CI get one line per trial, which greps and diffs well.

`rich` draws the live display and is imported only when one is made: `aorta --help` and the
listing commands never pay for it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Literal

from aorta.cli.run import LineReporter, trial_verdict
from aorta.text_safety import terminal_text

if TYPE_CHECKING:
    from rich.console import Console, RenderableType
    from rich.live import Live

    from aorta.runner.models import RunRequest, TrialResult
    from aorta.triage.analysis.cells import CellStats
    from aorta.triage.report.reporting import CellPlan

ProgressMode = Literal["auto", "live", "plain"]

_CI_OFF = ("", "0", "false", "no", "off")
_REFRESH_EVERY_S = 0.1  # step events can come every few ms; redraw at most this often


def under_ci(environ: Mapping[str, str]) -> bool:
    """Whether `CI` is set to something other than an explicit "off" value."""
    return environ.get("CI", "").strip().lower() not in _CI_OFF


def wants_live(mode: ProgressMode, *, stdout_is_tty: bool, environ: Mapping[str, str]) -> bool:
    """Live display or plain lines: `live`/`plain` force it, `auto` asks the terminal and CI."""
    if mode != "auto":
        return mode == "live"
    return stdout_is_tty and not under_ci(environ) and environ.get("TERM") != "dumb"


def _cell_summary(stats: CellStats) -> str:
    if stats.error is not None:
        return f"error: {' '.join(stats.error.split())}"
    mean = stats.mean_step_time_ms
    timing = f", mean {mean:.1f} ms/step" if mean is not None else ""
    errors = f" (+{stats.error_count} errored)" if stats.error_count else ""
    return f"{stats.failed_count}/{stats.measured_count} failed{errors}{timing}"


class TriageLineReporter(LineReporter):
    """Plain progress: one line per trial, prefixed with the cell and its place in the matrix."""

    def __init__(self, *, echo: bool = True) -> None:
        super().__init__(echo=echo)
        self.plan: Sequence[CellPlan] = ()
        self.index = 0

    def __enter__(self) -> TriageLineReporter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        return None

    def _cell_label(self) -> str:
        return f"[cell {self.index + 1}/{len(self.plan)} {self.plan[self.index].name}] "

    def matrix_started(self, plan: Sequence[CellPlan]) -> None:
        """Say how much there is to do (and what an earlier attempt already did)."""
        self.plan = plan
        to_run = sum(len(p.to_run) for p in plan)
        done = sum(p.already_done for p in plan)
        earlier = f" ({done} already on disk)" if done else ""
        self.say(f"aorta triage: {len(plan)} cell(s), {to_run} trial(s) to run{earlier}")

    def cell_started(self, index: int) -> None:
        """Label the following trial lines with this cell."""
        self.index = index
        self.prefix = self._cell_label()
        if not self.plan[index].to_run:
            self.say(f"{self.prefix}all {self.plan[index].trials} trial(s) already on disk")

    def cell_finished(self, index: int, stats: CellStats) -> None:
        """One summary line per cell."""
        self.say(f"{self._cell_label()}done: {_cell_summary(stats)}")


@dataclass
class _CellState:
    status: str = "pending"  # pending, running, done, error
    finished: int = 0  # trials with a result (earlier ones included)
    failed: int = 0
    mean: str = ""  # mean step time, once the cell is done
    last: str = ""


class LiveReporter:
    """A live display on a terminal: cell i/N, trial j/M, step, elapsed time and ETA above a
    table with, per cell, its trials done, failures, mean step time and last result.

    The ETA extrapolates the time per step seen so far over the steps still to run (a trial
    that fails early counts as its full budget, so the ETA errs on the long side).
    """

    def __init__(
        self,
        console: Console | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        title: str = "aorta triage",
    ) -> None:
        self.console = console
        self.clock = clock
        self.title = title
        self.plan: Sequence[CellPlan] = ()
        self.cells: list[_CellState] = []
        self.index: int | None = None
        self.trial: tuple[int, int] | None = None  # (trial id, trials in the cell)
        self.step_no: int | None = None
        self.loss: float | None = None  # of the running trial's last step
        self.started = clock()
        self.units_done = 0  # steps of this invocation's finished trials, at full budget each
        self.live: Live | None = None
        self._last_refresh = -math.inf

    # --- display lifetime -------------------------------------------------------------------

    def __enter__(self) -> LiveReporter:
        from rich.live import Live

        self.started = self.clock()
        self.live = Live(self.render(), console=self.console, auto_refresh=False)
        self.live.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.live is not None:
            self._refresh(force=True)
            self.live.stop()
            self.live = None

    def _refresh(self, *, force: bool = False) -> None:
        now = self.clock()
        if self.live is None or (not force and now - self._last_refresh < _REFRESH_EVERY_S):
            return
        self._last_refresh = now
        self.live.update(self.render(), refresh=True)

    # --- events -----------------------------------------------------------------------------

    def matrix_started(self, plan: Sequence[CellPlan]) -> None:
        """Lay out one row per cell; trials already on disk count as finished."""
        self.plan = plan
        self.cells = [_CellState(finished=p.already_done) for p in plan]
        self._refresh(force=True)

    def cell_started(self, index: int) -> None:
        """Mark the cell as running."""
        self.index = index
        self.cells[index].status = "running"
        self._refresh(force=True)

    def trial_started(self, request: RunRequest, trial_id: int, seed: int) -> None:
        """Show the trial now running."""
        self.trial = (trial_id, request.trials)
        self.step_no = None
        self.loss = None
        self._refresh(force=True)

    def step(self, trial_id: int, step: int, loss: float | None, step_time_ms: float) -> None:
        """Advance the step counter and show the loss (redrawn at most every 0.1 s)."""
        self.step_no = step
        self.loss = loss
        self._refresh()

    def trial_finished(self, result: TrialResult) -> None:
        """Count the trial and show its verdict as the cell's last result."""
        if self.index is not None:
            cell = self.cells[self.index]
            cell.finished += 1
            cell.failed += 1 if result.outcome == "failed" else 0
            cell.last = terminal_text(f"trial {result.trial_id + 1}: {trial_verdict(result)}")
            self.units_done += self.plan[self.index].steps
        self.step_no = None
        self._refresh(force=True)

    def cell_finished(self, index: int, stats: CellStats) -> None:
        """Show the cell's totals and mean step time (or its error)."""
        cell = self.cells[index]
        if stats.error is not None:
            cell.status, cell.last = "error", _cell_summary(stats)
        else:
            cell.status, cell.finished, cell.failed = "done", stats.trials_run, stats.failed_count
            mean = stats.mean_step_time_ms
            cell.mean = f"{mean:.1f} ms" if mean is not None else "n/a"
        self.trial = None
        self._refresh(force=True)

    # --- drawing ----------------------------------------------------------------------------

    def _units_total(self) -> int:
        return sum(len(p.to_run) * p.steps for p in self.plan)

    def _units_now(self) -> int:
        current = 0 if self.step_no is None else self.step_no + 1
        return self.units_done + current

    def eta_seconds(self) -> float | None:
        """Seconds left at the pace so far; None before the first step or trial finished."""
        done = self._units_now()
        if done <= 0:
            return None
        elapsed = self.clock() - self.started
        return max(0.0, elapsed / done * (self._units_total() - done))

    def status_line(self) -> str:
        """`cell i/N name  trial j/M  step s/S  elapsed  ETA` (the display's first line)."""
        parts = [self.title]
        if self.index is not None and self.plan:
            plan = self.plan[self.index]
            parts.append(f"cell {self.index + 1}/{len(self.plan)} {plan.name}")
            if self.trial is not None:
                parts.append(f"trial {self.trial[0] + 1}/{self.trial[1]}")
                if self.step_no is not None:
                    parts.append(f"step {self.step_no + 1}/{plan.steps}")
                    if self.loss is not None:
                        parts.append(f"loss {self.loss:.4g}")
        parts.append(f"elapsed {_clock_text(self.clock() - self.started)}")
        eta = self.eta_seconds()
        parts.append(f"ETA {_clock_text(eta) if eta is not None else '?'}")
        return "  ".join(parts)

    def render(self) -> RenderableType:
        """The whole display: the status line above a table of the cells."""
        from rich.console import Group
        from rich.table import Table
        from rich.text import Text

        table = Table(box=None, pad_edge=False, header_style="bold")
        for header in ("", "cell", "trials", "failed", "mean step", "last result"):
            # One line per cell, however narrow the terminal: long results are cut short.
            table.add_column(header, no_wrap=True, overflow="ellipsis")
        marks = {"pending": " ", "running": ">", "done": "\u2713", "error": "!"}
        for plan, cell in zip(self.plan, self.cells, strict=True):
            style = {"running": "bold", "error": "red"}.get(cell.status, "")
            table.add_row(
                marks[cell.status],
                plan.name,
                f"{cell.finished}/{plan.trials}",
                str(cell.failed),
                cell.mean,
                cell.last,
                style=style,
            )
        return Group(Text(self.status_line()), table)


def _clock_text(seconds: float) -> str:
    whole = int(seconds + 0.5)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}"


def choose_reporter(
    mode: ProgressMode, *, echo: bool, stdout_is_tty: bool, environ: Mapping[str, str]
) -> TriageLineReporter | LiveReporter:
    """The reporter for this run: live on an interactive terminal, plain lines otherwise.

    `echo=False` (torchrun ranks other than 0) always gives a muted line reporter.
    """
    if echo and wants_live(mode, stdout_is_tty=stdout_is_tty, environ=environ):
        return LiveReporter()
    return TriageLineReporter(echo=echo)
