"""`matrix.png`: the matrix as a picture, drawn with matplotlib when the `[plot]` extra is there.

Two panels share the cell axis (one row per cell, in matrix order):

- left, step time: a box of every post-warm-up step time of the cell (whiskers at 1.5 IQR,
  outliers left out so one slow step cannot squash the scale) with each trial's mean step time
  as a dot on top; a solid line at the baseline's mean step time and a dashed line at
  `threshold x` that mean, past which the Confound column reads `speed (+N%)`.
- right, failures: each cell's failure rate with its Wilson interval as an error bar, the
  baseline's rate as a dotted line, and `failed/run` written beside it.
- below, when the baseline's trials recorded losses: their loss traces, failing and passing
  trials apart (`aorta.triage.report.loss_plot`).

matplotlib is imported lazily (it is an optional extra and costs ~0.5 s) and only through
its object-oriented API with the Agg canvas: no pyplot, no global backend switch, no display
needed. Without matplotlib nothing is drawn and the caller says how to get the plot.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aorta.atomic import write_bytes_atomic
from aorta.triage.analysis.matrix import Matrix, MatrixRow
from aorta.triage.layout import RunDir
from aorta.triage.report.loss_plot import baseline_with_losses, draw_baseline_losses

INSTALL_HINT = "pip install 'aorta[plot]'"

# One colour per Confound label, so the picture and the table tell the same story.
_COLOURS = {
    "(baseline)": "#4c72b0",
    "\u2014": "#55a868",  # works without a speed cost
    "no effect": "#8c8c8c",
    "n/a": "#8c8c8c",
}
_SPEED_COLOUR = "#dd8452"
_ERROR_COLOUR = "#c44e52"
_DPI = 110
_LOSS_PANEL_HEIGHT = 3.0


@dataclass(frozen=True)
class PlotOutcome:
    """Whether `matrix.png` was drawn (`path`) and, if not, why (`reason`) or that it will be."""

    path: Path | None
    reason: str | None = None
    pending: bool = False  # not drawn yet: the table is written before the picture
    # A command that gets the plot (aorta's own text, shown verbatim: the reason is escaped
    # for Markdown, which would garble a code span such as `pip install 'aorta[plot]'`).
    hint: str | None = None


def _import_matplotlib() -> Any:
    """matplotlib's `Figure` class; `ImportError` without the `[plot]` extra (tests patch this)."""
    from matplotlib.figure import Figure

    return Figure


def _colour(row: MatrixRow) -> str:
    if row.stats.error is not None:
        return _ERROR_COLOUR
    if row.confound.startswith("speed"):
        return _SPEED_COLOUR
    return _COLOURS.get(row.confound, "#8c8c8c")


def _finite(values: tuple[float, ...]) -> list[float]:
    return [v for v in values if math.isfinite(v)]


def _label(row: MatrixRow) -> str:
    # A two-part label (speed; failures) gets a line per part: one line would crowd the axis.
    return "\n".join([row.name, *row.confound.split("; ")])


def _legend_below(ax: Any) -> None:
    # Below the axis, not inside it: inside, it would cover some cell's dots.
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, fontsize=8, frameon=False)


def _draw_step_times(ax: Any, rows: tuple[MatrixRow, ...], matrix: Matrix) -> None:
    positions = list(range(len(rows)))
    for pos, row in zip(positions, rows, strict=True):
        times = _finite(row.stats.step_times_ms)
        if row.stats.error is not None or not times:
            ax.text(
                0.01,
                pos,
                "error" if row.stats.error else "no step times",
                transform=ax.get_yaxis_transform(),
                va="center",
                color=_ERROR_COLOUR,
            )
            continue
        colour = _colour(row)
        box = ax.boxplot(
            [times],
            positions=[pos],
            orientation="horizontal",
            widths=0.5,
            showfliers=False,
            patch_artist=True,
            medianprops={"color": "black"},
        )
        for patch in box["boxes"]:
            patch.set(facecolor=colour, alpha=0.35, edgecolor=colour)
        means = row.stats.per_trial_mean_step_time_ms
        # Spread the trial dots vertically (deterministically) so equal means stay visible.
        offsets = [((i % 5) - 2) * 0.06 for i in range(len(means))]
        ax.scatter(
            means,
            [pos + o for o in offsets],
            s=14,
            color=colour,
            zorder=3,
            edgecolors="black",
            linewidths=0.4,
        )
    base = matrix.baseline_row.stats.mean_step_time_ms
    if base is not None and math.isfinite(base) and matrix.baseline_row.stats.error is None:
        ax.axvline(
            base, color=_COLOURS["(baseline)"], linewidth=1.2, label=f"baseline mean {base:.3g} ms"
        )
        ax.axvline(
            base * matrix.threshold,
            color=_SPEED_COLOUR,
            linestyle="--",
            linewidth=1.2,
            label=f"confound threshold {matrix.threshold:g}\u00d7 baseline",
        )
        _legend_below(ax)
    ax.set_xlabel("step time (ms): box = all steps, dots = trial means")
    ax.set_title("Step time per cell", fontsize=10)
    ax.grid(axis="x", alpha=0.3)


def _draw_failures(ax: Any, rows: tuple[MatrixRow, ...], matrix: Matrix) -> None:
    for pos, row in enumerate(rows):
        stats = row.stats
        if stats.error is not None or stats.nan_rate is None:
            ax.text(
                0.02,
                pos,
                "error",
                va="center",
                color=_ERROR_COLOUR,
                transform=ax.get_yaxis_transform(),
            )
            continue
        rate = stats.nan_rate * 100.0
        colour = _colour(row)
        if row.nan_rate_ci is not None:
            low, high = (v * 100.0 for v in row.nan_rate_ci)
            ax.errorbar(
                rate,
                pos,
                xerr=[[rate - low], [high - rate]],
                fmt="o",
                color=colour,
                ecolor=colour,
                capsize=4,
                markersize=6,
            )
        else:
            ax.plot(rate, pos, "o", color=colour)
        # The p the label judged by: Holm-adjusted across the matrix's cells.
        p = "" if row.p_adjusted is None else f"  Holm p={row.p_adjusted:.2g}"
        # Near either edge, anchor the label inward so that it stays inside the axis.
        align = "left" if rate < 15 else "right" if rate > 85 else "center"
        ax.annotate(
            f"{stats.failed_count}/{stats.measured_count}{p}",
            (rate, pos),
            xytext=(0, 9),
            textcoords="offset points",
            ha=align,
            fontsize=8,
        )
    base = matrix.baseline_row.stats.nan_rate
    if base is not None and matrix.baseline_row.stats.error is None:
        ax.axvline(
            base * 100.0,
            color=_COLOURS["(baseline)"],
            linestyle=":",
            linewidth=1.2,
            label="baseline failure rate",
        )
        _legend_below(ax)
    ax.set_xlim(-5, 105)
    ax.set_xlabel(f"failure rate (%) with {matrix.confidence:.0%} Wilson interval")
    ax.set_title("Failures per cell", fontsize=10)
    ax.grid(axis="x", alpha=0.3)


def build_figure(matrix: Matrix, *, title: str) -> Any:
    """The matrix picture as a matplotlib `Figure` (see the module docstring); needs matplotlib."""
    figure_class = _import_matplotlib()
    rows = matrix.rows
    height = 1.6 + 0.75 * len(rows)
    losses = baseline_with_losses(matrix)
    extra = 0.0 if losses is None else _LOSS_PANEL_HEIGHT
    fig = figure_class(figsize=(12, height + extra), dpi=_DPI, layout="constrained")
    top = fig
    if losses is not None:  # a third panel below, across the width
        top, bottom = fig.subfigures(2, 1, height_ratios=[height, extra])
        draw_baseline_losses(bottom.subplots(), losses)
    left, right = top.subplots(1, 2, sharey=True, gridspec_kw={"width_ratios": [3, 2]})
    _draw_step_times(left, rows, matrix)
    _draw_failures(right, rows, matrix)
    left.set_yticks(range(len(rows)), [_label(r) for r in rows], fontsize=8)
    left.set_ylim(len(rows) - 0.5, -0.5)  # first cell on top, as in matrix.md
    fig.suptitle(title, fontsize=11)
    return fig


def render_png(matrix: Matrix, *, title: str) -> bytes:
    """The PNG bytes of `build_figure`."""
    buffer = io.BytesIO()
    build_figure(matrix, title=title).savefig(buffer, format="png")
    return buffer.getvalue()


def write_plot(matrix: Matrix, run_dir: Path, *, title: str) -> PlotOutcome:
    """Draw `run_dir/matrix.png` atomically (replacing an earlier one of the same run).

    Never raises for a missing or failing matplotlib: the matrix files matter more than the
    picture, so the outcome carries the reason instead and the caller writes it down.
    """
    try:
        png = render_png(matrix, title=title)
    except ImportError:
        return PlotOutcome(None, "matplotlib is not installed", hint=INSTALL_HINT)
    except Exception as exc:  # a plotting bug must never cost the matrix
        return PlotOutcome(None, f"drawing failed: {type(exc).__name__}: {exc}")
    return PlotOutcome(
        write_bytes_atomic(RunDir(run_dir).matrix_png, png, overwrite=True, shared=True)
    )
