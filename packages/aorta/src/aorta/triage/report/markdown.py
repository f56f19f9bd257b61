"""`matrix.md`: the readable table of a matrix report, with its banner, header and notes.

Rendering choices are listed in `aorta.triage.report.output`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from aorta.text_safety import markdown_text
from aorta.triage.analysis.hardware import hardware_summary
from aorta.triage.analysis.matrix import Matrix, MatrixRow, executions
from aorta.triage.analysis.step_sources import SOURCES_NOTE, load_range, sources_summary
from aorta.triage.layout import HOST_ENV_NAME, PLOT_NAME, RunDir
from aorta.triage.names import NO_TICKET
from aorta.triage.recipe import Cell, Recipe
from aorta.triage.report.adaptive_report import adaptive_section
from aorta.triage.report.onset_report import node_warning, onset_section
from aorta.triage.report.output import (
    ENV_SCOPE_PREFIX,
    HOST_SCOPE,
    MISSING,
    NO_COMPARISON,
    NOT_RUN_LABEL,
    MatrixReport,
    recipe_cells,
    row_label,
)
from aorta.triage.report.plot import PlotOutcome


def _one_line(text: str) -> str:
    # Error reasons may carry newlines (tracebacks, docker output), escapes and Markdown from
    # a job's log; one inert line keeps the blockquote and the table intact (`text_safety`).
    return markdown_text(text)


def _pct_number(rate: float) -> str:
    """A fraction as whole percent (half up), never rounding a non-zero rate to 0 or 100."""
    n = math.floor(rate * 100.0 + 0.5)
    if n == 0 and rate > 0.0:
        return "<1"
    if n == 100 and rate < 1.0:
        return ">99"
    return str(n)


def _nan_rate_text(row: MatrixRow) -> str:
    rate = row.stats.nan_rate
    if row.stats.error is not None or rate is None or not math.isfinite(rate):
        return MISSING
    text = f"{_pct_number(rate)}%"
    if row.nan_rate_ci is not None:
        low, high = row.nan_rate_ci
        if math.isfinite(low) and math.isfinite(high):
            text += f" [{_pct_number(low)}\u2013{_pct_number(high)}]"
    return text


def _trials_text(row: MatrixRow) -> str:
    stats = row.stats
    if stats.error is not None and not stats.trials_run:
        return MISSING
    text = f"{stats.failed_count} / {stats.measured_count}"
    if stats.stopped_early:
        text += f" (stopped at {stats.stop_after_failures} failures; max {stats.trials_requested})"
    elif stats.trials_run < stats.trials_requested:
        text += f" of {stats.trials_requested}"
    if stats.error_count:
        text += f" (+{stats.error_count} error{'s' if stats.error_count > 1 else ''})"
    return text


def _ms_text(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return MISSING
    # Sub-10 ms steps (toy workloads) would all read "3" or "4" without a decimal.
    return f"{value:.1f}" if abs(value) < 10.0 else f"{value:.0f}"


def _p_text(p: float | None) -> str:
    if p is None or not math.isfinite(p):
        return NO_COMPARISON
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def _p_column(row: MatrixRow) -> str:
    """The raw p, and the Holm-adjusted one the label used when the adjustment changed it."""
    if row.is_baseline:
        return NO_COMPARISON
    text = _p_text(row.fisher_p)
    adjusted = _p_text(row.p_adjusted)
    if row.p_adjusted is not None and adjusted != text:
        text += f" (Holm {adjusted})"
    return text


def _mitigations_text(cell: Cell | None) -> str:
    return ", ".join(cell.mitigations) if cell is not None else MISSING


def _environment_text(cell: Cell | None) -> str:
    return cell.environment.name if cell is not None else MISSING


_HEADERS = (
    "Cell",
    "Mitigations",
    "Environment",
    "NaN rate",
    "Trials",
    "Mean step (ms)",
    "p vs baseline",
    "Confound",
)


_KERNELS_HEADER = "Kernels changed vs baseline"


def _table(rows: Sequence[Sequence[str]], headers: Sequence[str] = _HEADERS) -> list[str]:
    """A pipe table padded so that the columns line up in plain text as well."""
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(value)) for w, value in zip(widths, row, strict=True)]

    def line(values: Sequence[str]) -> str:
        return "| " + " | ".join(v.ljust(w) for v, w in zip(values, widths, strict=True)) + " |"

    rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return [line(headers), rule, *(line(row) for row in rows)]


def _table_rows(report: MatrixReport) -> list[list[str]]:
    cells = recipe_cells(report.recipe)
    rows: list[list[str]] = []
    for row in report.matrix.rows:
        cell = cells.get(row.name)
        rows.append(
            [
                row.name,
                _mitigations_text(cell),
                _environment_text(cell),
                _nan_rate_text(row),
                _trials_text(row),
                _ms_text(row.stats.mean_step_time_ms),
                _p_column(row),
                row_label(row, report),
            ]
        )
    in_matrix = {row.name for row in report.matrix.rows}
    for name in report.cells_not_run:
        if name in in_matrix:
            continue  # the runner already gave it a row (e.g. an error cell)
        cell = cells.get(name)
        rows.append(
            [
                name,
                _mitigations_text(cell),
                _environment_text(cell),
                MISSING,
                MISSING,
                MISSING,
                NO_COMPARISON,
                NOT_RUN_LABEL,
            ]
        )
    return rows


def _kernels_text(row: MatrixRow) -> str:
    """How many kernels the cell compiled differently from the baseline (names: matrix.json)."""
    if row.is_baseline:
        return NO_COMPARISON
    return MISSING if row.kernels_changed is None else str(len(row.kernels_changed))


def _summary_table(report: MatrixReport) -> list[str]:
    """The Reproduction Summary; a kernels column only when the recipe fingerprints kernels."""
    rows = _table_rows(report)
    if not report.recipe.fingerprint_kernels:
        return _table(rows)
    changed = {row.name: _kernels_text(row) for row in report.matrix.rows}
    extended = [[*row, changed.get(row[0], MISSING)] for row in rows]
    return _table(extended, (*_HEADERS, _KERNELS_HEADER))


def _partial_scope_warning(scope: str) -> str:
    if scope == HOST_SCOPE:
        where = HOST_ENV_NAME
    elif scope.startswith(ENV_SCOPE_PREFIX):
        where = str(RunDir(Path()).env_json(scope[len(ENV_SCOPE_PREFIX) :]))
    else:
        where = f"{HOST_ENV_NAME} / environments/<env>/env.json"
    return f"environment snapshot for {scope} is partial: see {where}"


def _banner(report: MatrixReport) -> list[str]:
    lines: list[str] = []
    if report.interrupted:
        not_run = ", ".join(report.cells_not_run) if report.cells_not_run else "none"
        lines.append(f"> **Interrupted**: cells not run: {not_run}")
    if report.in_progress:
        lines.append(
            f"> **Unfinished**: trials still queued or running on SLURM in cells "
            f"{', '.join(report.in_progress)}; this matrix is partial: rebuild it later with "
            "`aorta triage matrix <run dir>`"
        )
    lines.extend(f"> **Warning**: {_one_line(w)}" for w in report.matrix.warnings)
    node = node_warning(report.matrix, report.matrix.alpha)
    lines.extend([f"> **Warning**: {_one_line(node)}"] if node else [])
    lines.extend(
        f"> **Warning**: {_one_line(_partial_scope_warning(scope))}"
        for scope in report.partial_scopes
    )
    # A blank-free blockquote: consecutive '>' lines render as one quote, so end each line
    # with a hard break to keep one warning per line when rendered.
    return [line + "  " if i < len(lines) - 1 else line for i, line in enumerate(lines)]


def _count_line(label: str, default: int, overrides: dict[str, int]) -> str:
    text = f"**{label}**: {default}"
    if overrides:
        listed = ", ".join(f"{name} = {value}" for name, value in overrides.items())
        text += f" (per-cell overrides: {listed})"
    return text


def _plot_line(plot: PlotOutcome | None) -> list[str]:
    if plot is None:
        return []
    if plot.pending:
        return [
            f"**Plot**: {PLOT_NAME} is being drawn after the matrix; this line links it once it "
            "is on disk (if it never does, `aorta triage matrix <this run dir>` draws it)"
        ]
    if plot.path is not None:
        return [
            f"**Plot**: [{PLOT_NAME}]({PLOT_NAME}) (step time per cell with the baseline and "
            "the confound threshold marked; failure rate per cell with its Wilson interval)"
        ]
    hint = f"; `{plot.hint}` to get it" if plot.hint else ""
    return [
        f"**Plot**: not drawn: {_one_line(plot.reason or 'unknown reason')}{hint}; then "
        "`aorta triage matrix <this run dir>` draws it"
    ]


def _header(report: MatrixReport) -> list[str]:
    recipe, matrix = report.recipe, report.matrix
    # `_no_ticket_` would render as italic "no_ticket"; code spans show the name as it is.
    ticket = recipe.ticket if recipe.ticket is not None else f"`{NO_TICKET}`"
    if recipe.source is None:
        origin = "flags"
    else:
        digest = f" (sha256:{recipe.sha256[:12]})" if recipe.sha256 else ""
        origin = f"{markdown_text(str(recipe.source))}{digest}"
    base_ms = matrix.baseline_row.stats.mean_step_time_ms
    base_text = MISSING if _ms_text(base_ms) == MISSING else f"{_ms_text(base_ms)} ms"
    trials = {c.name: c.trials for c in recipe.cells if c.trials != recipe.trials}
    steps = {c.name: c.steps for c in recipe.cells if c.steps != recipe.steps}
    return [
        f"**Ticket**: {ticket}",
        f"**Workload**: {recipe.workload}",
        f"**Recipe**: {origin}",
        _count_line("Trials per cell", recipe.trials, trials),
        _count_line("Steps per trial", recipe.steps, steps),
        f"**Run timestamp**: {report.run_timestamp}",
        *([f"**Resumed**: {', '.join(report.resumed_at)}"] if report.resumed_at else []),
        f"**Baseline cell**: {matrix.baseline} (mean step time = {base_text})",
        f"**Order**: {_order_text(recipe)}",
        f"**Execution**: {_execution_text(report)}",
        *_hardware_line(report),
        *_timing_lines(report),
    ]


def _timing_lines(report: MatrixReport) -> list[str]:
    """Where each cell's step times came from; the host's load when wall clocks timed them."""
    cells = [row.stats for row in report.matrix.rows]
    sources, load = sources_summary(cells), load_range(cells)
    lines = [] if sources is None else [f"**Step times from**: {sources}"]
    return lines + ([] if load is None else [f"**Host load during the run**: {load.text()}"])


def _hardware_line(report: MatrixReport) -> list[str]:
    hosts = [t.host for row in report.matrix.rows for t in row.stats.trials if t.measured]
    summary = hardware_summary(hosts)
    return [] if summary is None else [f"**Hardware**: {_one_line(summary)}"]


def _order_text(recipe: Recipe) -> str:
    if recipe.order == "sequential":
        return "sequential (all trials of a cell, then the next cell); ratios pool trials"
    return (
        f"interleaved (round k of every cell before round k+1, cells shuffled per round, "
        f"order_seed {recipe.order_seed}); step-time ratios are paired round by round"
    )


def _execution_text(report: MatrixReport) -> str:
    modes = executions([row.stats for row in report.matrix.rows])
    if not modes:
        return MISSING
    if len(modes) > 1:
        return "mixed: some trials in this process, some in fresh child processes (see warnings)"
    if modes[0] == "child_process":
        return "every trial in a fresh child process"
    return "every trial in this process"


def _notes(report: MatrixReport) -> list[str]:
    matrix = report.matrix
    confidence = f"{matrix.confidence * 100:g}%"
    slower = f"{(matrix.threshold - 1.0) * 100:g}%"
    bullets = [
        "Rows are named by the recipe; the Mitigations and Environment columns say what each "
        "cell actually ran with.",
        "Each trial is passed, failed (the failure under study fired: non-finite loss or grad "
        "norm, or a workload-declared failure) or an error (it could not measure: crashed "
        "before its first step, import or setup error, killed, out of memory). Errors are "
        "counted apart and left out of every rate, test and timing.",
        f"NaN rate is failed trials over measured (passed + failed) trials; the bracket is its "
        f"{confidence} Wilson interval in percent. Trials reads `failed / measured` (`of N` "
        "when fewer than N requested trials ran, `(+K errors)` for errored trials).",
        "p vs baseline is the two-sided Fisher exact p-value of the cell's failure count "
        "against the baseline's. A matrix is many tests, so the p-values are Holm-Bonferroni "
        "adjusted across the cells compared with the baseline (in brackets where that changed "
        f"them; matrix.json: `p_value`, `p_adjusted`); labels use the adjusted value, and alpha "
        f"{matrix.alpha:g} bounds the chance that any cell of this matrix falsely reads "
        "`\u2014` or `fails more`. `\u2014` in this column means there is nothing to compare.",
        "Confound labels say only what the evidence supports, in up to two parts: what the "
        "step times say, then what the failure counts say. Speed compares the mean of the "
        "trials' mean step times with the baseline's, with a "
        f"{confidence} bootstrap interval over trials. `speed (+N%)`: the whole interval is "
        f"more than {slower} slower than the baseline, so a lower failure rate may only come "
        "from slower iteration: check with a profiler (e.g. a rocprofv3 kernel dispatch "
        f"comparison) before believing it. `speed? (+N%, CI a-b)`: the interval straddles "
        f"{matrix.threshold:g}x, so such a slowdown is possible but not shown; run more "
        "trials. `faster (-N%)`: the whole interval is faster than the baseline by more than "
        "the threshold. `speed n/a`: a side recorded no step times. No speed part: speed "
        f"stayed within {slower}. Failure counts: `\u2014` (alone): the failure rate dropped "
        f"significantly (adjusted p < {matrix.alpha:g}) at no speed cost: the mitigation can "
        "be trusted; after a speed part it reads `drop significant (p=...)`. `fails more "
        "(p=...)`: the rate rose significantly. `no failure to cure`: the baseline never "
        "failed, so no cell can show a cure. `no effect`: the data rule out a cure: the upper "
        f"end of the {confidence} interval of the drop in failure rate (baseline minus cell, "
        f"Newcombe) is below {_cure_text(matrix)} the baseline's rate (its env vars are "
        "probably not read). `inconclusive (p=..., ~N trials per cell needed)` (`drop "
        "inconclusive` after a speed part): a cure is neither shown nor ruled out; about N "
        "trials per cell would tell. `(baseline)`: the reference cell. `error`: the whole "
        "cell failed or all its trials errored; its row is kept. `n/a`: no failure rate to "
        "compare. `not run`: an interrupted run never reached the cell.",
        "`not independent: ...`: the trials of the cell (or of the baseline) are copies of one "
        "run: identical loss traces, or identical logs where no loss was read, so their "
        "different seeds did not change the run; no failure rate, interval or p-value is drawn "
        "from copies (the warning above names the cell; `fails identically in every trial "
        "(deterministic)` when the copies failed). Copies among otherwise distinct trials count "
        "once in the interval and the test.",
        "Step-time ratios compare the same work: each trial's timed steps after warm-up up to "
        "the shortest measured trial of the two cells (matrix.json: `step_window` per cell); "
        "the Mean step column averages every timed step.",
        "Only the mean step time is shown; matrix.json holds std, p50, p99, the raw step "
        "times, the resolved env vars and the path of every trial JSON.",
        "recipe.resolved.yaml records the recipe as executed (registry names expanded); "
        "re-run it to reproduce this matrix.",
    ]
    if report.recipe.fingerprint_kernels:
        bullets.append(
            "Kernels changed vs baseline counts the Triton kernels the cell compiled with a "
            "different triton-invariance fingerprint than the baseline cell (or that only one "
            "of them compiled); matrix.json names them. 0: no Triton kernel's compiled numerics "
            "changed; `n/a`: one side recorded no fingerprints."
        )
    if sources_summary([row.stats for row in matrix.rows]) is not None:
        bullets.append(SOURCES_NOTE)
    bullets.extend(_one_line(note) for note in matrix.notes)
    return [f"- {bullet}" for bullet in bullets]


def _cure_text(matrix: Matrix) -> str:
    # 0.5 -> "half of", other fractions in percent: the wording of the smallest cure.
    fraction = matrix.smallest_cure
    return "half of" if fraction == 0.5 else f"{fraction * 100:g}% of"


def render_markdown(report: MatrixReport, plot: PlotOutcome | None = None) -> str:
    """The content of `matrix.md`, in the spec's target format.

    Title, bold header lines (ticket, workload, recipe path + short sha256 or `flags`, trials,
    steps, timestamp, baseline with its mean step time), then a blockquote of warnings that a
    reader must see first (interrupted run, the matrix's warnings such as an errored baseline,
    partial environment snapshots), the `Reproduction Summary` table and the `Notes` legend.
    `plot`, when given, adds a line linking `matrix.png` or saying why it was not drawn.
    """
    header = [*_header(report), *_plot_line(plot)]
    lines = [f"# Triage Matrix \u2014 {report.recipe.workload}", "", *header, ""]
    banner = _banner(report)
    if banner:
        lines.extend([*banner, ""])
    lines.extend(["## Reproduction Summary", "", *_summary_table(report), ""])
    lines.extend(["## Notes", "", *_notes(report)])
    onset = onset_section(report.matrix, report.recipe.locate)
    lines.extend(["", *onset[:-1]] if onset else [])  # after the notes: the summary ends there
    adaptive = adaptive_section(report.matrix, report.recipe)
    lines.extend(["", *adaptive[:-1]] if adaptive else [])
    return "\n".join(lines) + "\n"
