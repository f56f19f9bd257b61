"""Writing a matrix report: `matrix.json`, then `matrix.md`, then `matrix.png` (maybe elsewhere)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from aorta.atomic import write_json_atomic, write_text_atomic
from aorta.triage.layout import RunDir
from aorta.triage.names import NO_TICKET
from aorta.triage.report.markdown import render_markdown
from aorta.triage.report.output import MatrixReport, report_json
from aorta.triage.report.plot import PlotOutcome, write_plot


def _plot_title(report: MatrixReport) -> str:
    recipe = report.recipe
    ticket = recipe.ticket if recipe.ticket is not None else NO_TICKET
    state = " (interrupted)" if report.interrupted else ""
    return f"Triage matrix \u2014 {recipe.workload}, {ticket}, {report.run_timestamp}{state}"


PlotDrawer = Callable[["MatrixReport", str], object]
"""Draws a written report's picture elsewhere, given the report and its pending `matrix.md`."""


def write_report(
    report: MatrixReport, *, plot_drawer: PlotDrawer | None = None
) -> tuple[Path, Path]:
    """Write `matrix.json`, `matrix.md` and `matrix.png`; return `(md_path, json_path)`.

    Each is written atomically. They are the only files allowed to replace an earlier version
    of themselves: an interrupted run rewrites its partial matrix. JSON goes first so that a
    crash never leaves a table without its data; then the table, whose plot line says the
    picture is being drawn, so that both are on disk before matplotlib is even imported; then
    the picture, after which the table's plot line is rewritten to link it or say why it was
    not drawn (without matplotlib it is not, and the line says how to get it).
    `plot_drawer` is called instead of drawing here: the CLI's runs pass one that hands the
    picture to a child process (`aorta.cli.plot_job`), so that matplotlib never delays them.
    """
    run = RunDir(Path(report.run_dir))
    json_path = write_json_atomic(run.matrix_json, report_json(report), overwrite=True)
    pending_md = render_markdown(report, PlotOutcome(None, pending=True))
    md_path = write_text_atomic(run.matrix_md, pending_md, overwrite=True, shared=True)
    if plot_drawer is not None:
        plot_drawer(report, pending_md)
    else:
        draw_plot(report)
    return md_path, json_path


def draw_plot(report: MatrixReport, *, pending_md: str | None = None) -> None:
    """Draw `matrix.png` of a written report, then rewrite `matrix.md`'s plot line to match.

    With `pending_md` (a child process drawing after its parent moved on) the table is
    rewritten only while it still reads `pending_md`: a newer table is never replaced.
    """
    run_dir = Path(report.run_dir)
    plot = write_plot(report.matrix, run_dir, title=_plot_title(report))
    md_path = RunDir(run_dir).matrix_md
    if pending_md is not None and md_path.read_text(encoding="utf-8") != pending_md:
        return
    write_text_atomic(md_path, render_markdown(report, plot), overwrite=True, shared=True)
