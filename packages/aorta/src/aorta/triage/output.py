"""Where a triage run's results go, and what `matrix.json` / `matrix.md` say.

Layout (one directory per invocation, never reused)::

    <output_root>/<ticket or _no_ticket_>/<workload>/<YYYY-MM-DDTHH-MM-SS>/
        matrix.md  matrix.json  matrix.png  recipe.resolved.yaml  host_env.json
        environments/<env>/env.json  cells/<cell>/trial_<id>.json

`new_run_dir` creates that directory exclusively; `write_report` writes `matrix.json` (full data),
`matrix.png` (the picture, when matplotlib is installed) and `matrix.md` (the readable table).
Every file goes through `toolkit_core.atomic`, so a reader never sees a half-written matrix.

Rendering choices the spec leaves open, made here (the Notes section of matrix.md repeats the
reader-facing ones):

- NaN rate is `failed / trials run` in whole percent, followed by its Wilson interval in
  brackets, also in percent (`50% [22-78]`, with an en dash in the output). Rates that would
  round to 0 % or 100 % without being exactly that read `<1` / `>99`, so a rare failure is
  never shown as "0%".
- Trials is `failed / measured` (measured = passed + failed); errored trials follow in brackets
  (`3 / 7 (+1 error)`); when fewer trials ran than were requested it reads `1 / 6 of 8`.
- p vs baseline is the two-sided Fisher exact p-value, three decimals, `<0.001` below that, `—`
  where there is nothing to compare (the baseline row, errored cells, errored baseline); when
  the Holm adjustment changed it, the adjusted value (the one the labels use) follows,
  `0.077 (Holm 0.231)`.
- Missing numbers read `n/a` (never `—`, which in the Confound column means "trust it").
- Cells the recipe lists but that never ran (interrupted run) and that the matrix does not hold
  get a row labelled `not run`, so the table always shows the whole recipe.
- Free text (warnings, error reasons) is folded onto one line so it cannot break the blockquote
  or the table; names are already restricted to `[A-Za-z0-9_.+-]` by the recipe loader.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import Any

from aorta.instrumentation.redaction import redact_environ
from aorta.triage.hardware import hardware_summary
from aorta.triage.matrix import Matrix, MatrixRow, executions
from aorta.triage.names import NO_TICKET, runs_parent
from aorta.triage.plot import PLOT_NAME, PlotOutcome, write_plot
from aorta.triage.recipe import Cell, Recipe
from aorta.triage.step_sources import SOURCES_NOTE, load_range, sources_summary
from toolkit_core.atomic import create_run_dir, write_json_atomic, write_text_atomic
from toolkit_core.timestamps import dir_stamp, iso_stamp

__all__ = [
    "JSON_NAME",
    "MARKDOWN_NAME",
    "NO_TICKET",
    "PLOT_NAME",
    "REPORT_SCHEMA_VERSION",
    "MatrixReport",
    "cell_dir",
    "new_run_dir",
    "render_markdown",
    "report_json",
    "write_report",
]

REPORT_SCHEMA_VERSION = 1
MARKDOWN_NAME = "matrix.md"
JSON_NAME = "matrix.json"

_MISSING = "n/a"
_NO_COMPARISON = "\u2014"  # em dash, as the spec's p / confound columns use it
_NOT_RUN = "not run"
_HOST_SCOPE = "host"
_ENV_SCOPE_PREFIX = "environment "


@dataclass(frozen=True)
class MatrixReport:
    """Everything `matrix.json` and `matrix.md` are rendered from.

    `partial_scopes` names the probe scopes whose environment snapshot is partial (`"host"`,
    `"environment <name>"`); `cells_not_run` names the recipe cells an interrupted run never
    reached; `resumed_at` lists when `aorta triage run --resume` added trials to the run.
    """

    recipe: Recipe
    matrix: Matrix
    run_dir: Path
    run_timestamp: str  # ISO UTC, e.g. "2026-04-28T14:12:03Z"
    partial_scopes: tuple[str, ...] = ()
    interrupted: bool = False
    cells_not_run: tuple[str, ...] = ()
    resumed_at: tuple[str, ...] = ()
    # Interleaved order: the cells of each round, in the order they ran (all attempts).
    rounds: tuple[tuple[str, ...], ...] = ()
    # Docker environments: the digest of the image that ran, or "unresolved".
    image_digests: Mapping[str, str] = field(default_factory=dict)
    # SLURM executor: cells with trials still queued or running when this matrix was written.
    in_progress: tuple[str, ...] = ()


# --------------------------------------------------------------------------- layout


def new_run_dir(output_root: Path, recipe: Recipe, now: datetime) -> tuple[Path, str]:
    """Create `<output_root>/<ticket or _no_ticket_>/<workload>/<YYYY-MM-DDTHH-MM-SS>/`.

    The directory is created exclusively and never reused: a second run in the same second
    gets `-1`, `-2`, ... appended (`toolkit_core.atomic.create_run_dir`). `now` is converted to
    UTC (a naive value is taken as UTC). Returns the directory and the run timestamp as ISO UTC text
    (`2026-04-28T14:12:03Z`). Raises `ValueError` if the ticket or workload is not a safe
    directory name (the recipe loader already guarantees it; this guards other callers).
    """
    run_dir = create_run_dir(
        runs_parent(output_root, recipe), dir_stamp(now), root=Path(output_root)
    )
    return run_dir, iso_stamp(now)


def cell_dir(run_dir: Path, cell_name: str) -> Path:
    """The directory of one cell's per-trial JSON files: `<run_dir>/cells/<cell_name>`."""
    return Path(run_dir) / "cells" / cell_name


def _trial_path(cell_name: str, trial_id: int) -> str:
    # Relative and '/'-separated, so matrix.json stays valid when the run dir is moved or
    # copied to another machine.
    return str(PurePosixPath("cells", cell_name, f"trial_{trial_id}.json"))


# --------------------------------------------------------------------------- matrix.json


def _recipe_cells(recipe: Recipe) -> dict[str, Cell]:
    return {cell.name: cell for cell in recipe.cells}


def _environment_descriptor(cell: Cell, digests: Mapping[str, str]) -> dict[str, Any]:
    env = cell.environment
    descriptor: dict[str, Any] = {
        "name": env.name,
        "kind": env.kind,
        "image": env.image,
        "source_package": env.source_package,
    }
    if env.kind == "docker":
        descriptor["image_digest"] = digests.get(env.name, "unresolved")
    return descriptor


def _label(row: MatrixRow, report: MatrixReport) -> str:
    """The row's Confound label; a cell an interrupted run never reached reads `not run`."""
    if row.name in report.cells_not_run and row.stats.trials_run == 0:
        return _NOT_RUN
    return row.confound


def _cell_json(row: MatrixRow, cell: Cell | None, report: MatrixReport) -> dict[str, Any]:
    data = row.to_dict(report.matrix.alpha)
    data["confound"] = _label(row, report)
    paths = [_trial_path(row.name, t.trial_id) for t in row.stats.trials]
    for trial, path in zip(data["trials"], paths, strict=True):
        trial["path"] = path
    data["trial_paths"] = paths
    # A row without a recipe cell should not happen (the runner builds both from one recipe);
    # the configuration fields are then null rather than the whole report failing.
    data["mitigations"] = list(cell.mitigations) if cell is not None else None
    data["environment"] = (
        _environment_descriptor(cell, report.image_digests) if cell is not None else None
    )
    # Redacted like every recorded environment; recipe.resolved.yaml keeps the real values
    # because resume re-runs them.
    data["env"] = redact_environ(cell.env) if cell is not None else None
    data["extra_env"] = redact_environ(cell.extra_env) if cell is not None else None
    # "trials" already holds the per-trial records, hence the "effective_" prefix.
    data["effective_trials"] = cell.trials if cell is not None else None
    data["effective_steps"] = cell.steps if cell is not None else None
    return data


def report_json(report: MatrixReport) -> dict[str, Any]:
    """The content of `matrix.json`: strict JSON (`json.dumps(..., allow_nan=False)` accepts it).

    Top level: schema version, ticket, workload, recipe origin (path + sha256, or flags), run
    timestamp, baseline and its mean step time, threshold / confidence / alpha / smallest_cure,
    interruption state, partial probe scopes, the matrix's warnings and notes. Per cell: everything
    `MatrixRow.to_dict` gives (counts, stats, raw step times, ratio, confound, evidence) plus
    the cell's mitigations, resolved env vars (`env`), `extra_env`, environment descriptor,
    effective trials/steps and the trial JSON paths relative to the run directory.
    """
    recipe, matrix = report.recipe, report.matrix
    cells = _recipe_cells(recipe)
    return {
        "schema_version": REPORT_SCHEMA_VERSION,
        "ticket": recipe.ticket,
        "workload": recipe.workload,
        "workload_source_package": recipe.workload_source_package,
        "recipe": {
            "origin": "recipe" if recipe.source is not None else "flags",
            "source": None if recipe.source is None else str(recipe.source),
            "sha256": recipe.sha256,
        },
        "run_timestamp": report.run_timestamp,
        "resumed_at": list(report.resumed_at),
        "order": {
            "mode": recipe.order,
            "seed": recipe.order_seed,
            "rounds": [list(names) for names in report.rounds],
        },
        "executions": list(executions([row.stats for row in matrix.rows])),
        "trials": recipe.trials,
        "steps": recipe.steps,
        "baseline": matrix.baseline,
        "baseline_mean_step_time_ms": _finite_or_none(matrix.baseline_row.stats.mean_step_time_ms),
        "threshold": matrix.threshold,
        "confidence": matrix.confidence,
        "alpha": matrix.alpha,
        "smallest_cure": matrix.smallest_cure,
        "interrupted": report.interrupted,
        "cells_not_run": list(report.cells_not_run),
        "cells_in_progress": list(report.in_progress),
        "partial_scopes": list(report.partial_scopes),
        "host_load": _host_load_json(matrix),
        "warnings": list(matrix.warnings),
        "notes": list(matrix.notes),
        "cells": [_cell_json(row, cells.get(row.name), report) for row in matrix.rows],
    }


def _host_load_json(matrix: Matrix) -> dict[str, Any] | None:
    found = load_range([row.stats for row in matrix.rows])
    return None if found is None else found.to_dict()


def _finite_or_none(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


# --------------------------------------------------------------------------- matrix.md


def _one_line(text: str) -> str:
    # Error reasons may carry newlines (tracebacks, docker output); one line keeps the
    # blockquote and the table intact.
    return " ".join(text.split())


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
        return _MISSING
    text = f"{_pct_number(rate)}%"
    if row.nan_rate_ci is not None:
        low, high = row.nan_rate_ci
        if math.isfinite(low) and math.isfinite(high):
            text += f" [{_pct_number(low)}\u2013{_pct_number(high)}]"
    return text


def _trials_text(row: MatrixRow) -> str:
    stats = row.stats
    if stats.error is not None and not stats.trials_run:
        return _MISSING
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
        return _MISSING
    # Sub-10 ms steps (toy workloads) would all read "3" or "4" without a decimal.
    return f"{value:.1f}" if abs(value) < 10.0 else f"{value:.0f}"


def _p_text(p: float | None) -> str:
    if p is None or not math.isfinite(p):
        return _NO_COMPARISON
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def _p_column(row: MatrixRow) -> str:
    """The raw p, and the Holm-adjusted one the label used when the adjustment changed it."""
    if row.is_baseline:
        return _NO_COMPARISON
    text = _p_text(row.fisher_p)
    adjusted = _p_text(row.p_adjusted)
    if row.p_adjusted is not None and adjusted != text:
        text += f" (Holm {adjusted})"
    return text


def _mitigations_text(cell: Cell | None) -> str:
    return ", ".join(cell.mitigations) if cell is not None else _MISSING


def _environment_text(cell: Cell | None) -> str:
    return cell.environment.name if cell is not None else _MISSING


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
    cells = _recipe_cells(report.recipe)
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
                _label(row, report),
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
                _MISSING,
                _MISSING,
                _MISSING,
                _NO_COMPARISON,
                _NOT_RUN,
            ]
        )
    return rows


def _kernels_text(row: MatrixRow) -> str:
    """How many kernels the cell compiled differently from the baseline (names: matrix.json)."""
    if row.is_baseline:
        return _NO_COMPARISON
    return _MISSING if row.kernels_changed is None else str(len(row.kernels_changed))


def _summary_table(report: MatrixReport) -> list[str]:
    """The Reproduction Summary; a kernels column only when the recipe fingerprints kernels."""
    rows = _table_rows(report)
    if not report.recipe.fingerprint_kernels:
        return _table(rows)
    changed = {row.name: _kernels_text(row) for row in report.matrix.rows}
    extended = [[*row, changed.get(row[0], _MISSING)] for row in rows]
    return _table(extended, (*_HEADERS, _KERNELS_HEADER))


def _partial_scope_warning(scope: str) -> str:
    if scope == _HOST_SCOPE:
        where = "host_env.json"
    elif scope.startswith(_ENV_SCOPE_PREFIX):
        where = f"environments/{scope[len(_ENV_SCOPE_PREFIX) :]}/env.json"
    else:
        where = "host_env.json / environments/<env>/env.json"
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
    return [
        f"**Plot**: not drawn: {_one_line(plot.reason or 'unknown reason')}; then "
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
        origin = f"{recipe.source}{digest}"
    base_ms = matrix.baseline_row.stats.mean_step_time_ms
    base_text = _MISSING if _ms_text(base_ms) == _MISSING else f"{_ms_text(base_ms)} ms"
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
        return _MISSING
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
    return "\n".join(lines) + "\n"


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
    run_dir = Path(report.run_dir)
    json_path = write_json_atomic(run_dir / JSON_NAME, report_json(report), overwrite=True)
    pending_md = render_markdown(report, PlotOutcome(None, pending=True))
    md_path = write_text_atomic(run_dir / MARKDOWN_NAME, pending_md, overwrite=True)
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
    md_path = run_dir / MARKDOWN_NAME
    if pending_md is not None and md_path.read_text(encoding="utf-8") != pending_md:
        return
    write_text_atomic(md_path, render_markdown(report, plot), overwrite=True)
