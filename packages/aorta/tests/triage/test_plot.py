"""matrix.png: what it shows, atomic writing, no matplotlib, and never before the matrix."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import matplotlib.image
import pytest
from aorta_testing import make_trial

from aorta.atomic import write_text_atomic
from aorta.cli import plot_job
from aorta.runner.models import TrialResult
from aorta.triage.analysis.cells import aggregate_cell, error_cell
from aorta.triage.analysis.matrix import Matrix, build_matrix
from aorta.triage.lifecycle import reanalyse
from aorta.triage.recipe import dump_resolved_yaml, recipe_from_flags
from aorta.triage.report import plot
from aorta.triage.report.markdown import render_markdown
from aorta.triage.report.output import MatrixReport
from aorta.triage.report.plot import PlotOutcome
from aorta.triage.report.writer import draw_plot, write_report


def _trial(trial_id: int, *, passed: bool, ms: float) -> TrialResult:
    return make_trial(
        trial_id,
        passed=passed,
        step_times_ms=[ms, ms * 1.1, ms * 0.9],
        failure="non-finite loss at step 2",
    )


def _matrix() -> Matrix:
    def cell(name: str, failures: int, ms: float) -> Any:
        trials = [_trial(i, passed=i >= failures, ms=ms) for i in range(8)]
        return aggregate_cell(name, trials, trials_requested=8)

    return build_matrix(
        [
            cell("none-local", 4, 10.0),
            cell("tf32_off-local", 0, 13.0),  # 1.3x: speed confound
            cell("xnack-local", 0, 10.0),  # trust it
            error_cell("xnack-docker", "no docker engine answered", trials_requested=8),
        ],
        baseline="none-local",
        threshold=1.15,
        bootstrap_resamples=100,
    )


def _report(run_dir: Path) -> MatrixReport:
    recipe = recipe_from_flags(
        workload="fsdp",
        mitigation_axis=["none", "tf32_off", "xnack"],
        environment_axis=["local"],
        trials=8,
        steps=4,
    )
    return MatrixReport(
        recipe=recipe, matrix=_matrix(), run_dir=run_dir, run_timestamp="2026-01-01T00:00:00Z"
    )


def test_figure_marks_baseline_threshold_and_failure_intervals() -> None:
    matrix = _matrix()
    fig = plot.build_figure(matrix, title="t")
    left, right = fig.axes
    ticks = [t.get_text() for t in left.get_yticklabels()]
    assert ticks == [
        "none-local\n(baseline)",
        # Two cells compared: p = 0.077 each, 0.15 Holm-adjusted.
        "tf32_off-local\nspeed (+30%)\ndrop inconclusive (p=0.15, ~17 trials per cell needed)",
        "xnack-local\ninconclusive (p=0.15, ~17 trials per cell needed)",
        "xnack-docker\nerror",
    ]
    base = matrix.baseline_row.stats.mean_step_time_ms
    assert base is not None
    vertical = {round(float(line.get_xdata()[0]), 6) for line in left.lines if line.get_label()}
    assert round(base, 6) in vertical and round(base * 1.15, 6) in vertical
    legend = [t.get_text() for t in left.get_legend().get_texts()]
    assert legend == [f"baseline mean {base:.3g} ms", "confound threshold 1.15\u00d7 baseline"]
    # One dot per trial mean for each of the three cells that ran; the errored cell says so.
    assert sum(len(c.get_offsets()) for c in left.collections) == 24
    assert "error" in [t.get_text() for t in left.texts]
    labels = [t.get_text() for t in right.texts]
    assert labels[0] == "4/8"
    assert labels[1] == labels[2] == "0/8  Holm p=0.15"  # the p the labels judged by
    assert "error" in labels
    # Wilson bars: the baseline's 4/8 interval around 50 %.
    low, high = matrix.baseline_row.nan_rate_ci or (0.0, 0.0)
    segments = [seg for coll in right.collections for seg in coll.get_segments()]
    assert any(
        abs(seg[0][0] - low * 100) < 1e-6 and abs(seg[1][0] - high * 100) < 1e-6 for seg in segments
    )


def test_write_report_draws_a_readable_png_atomically(tmp_path: Path) -> None:
    write_report(_report(tmp_path))
    png = tmp_path / "matrix.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    height, width, _ = matplotlib.image.imread(png).shape
    assert width >= 1000 and height >= 300
    assert sorted(p.name for p in tmp_path.iterdir()) == ["matrix.json", "matrix.md", "matrix.png"]
    assert "**Plot**: [matrix.png](matrix.png)" in (tmp_path / "matrix.md").read_text()


def _no_matplotlib() -> Any:
    raise ImportError("No module named 'matplotlib'")


def test_without_matplotlib_the_matrix_is_written_and_says_how_to_get_the_plot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(plot, "_import_matplotlib", _no_matplotlib)
    md_path, json_path = write_report(_report(tmp_path))
    assert not (tmp_path / "matrix.png").exists()
    md = md_path.read_text()
    assert "pip install 'aorta[plot]'" in md
    assert "`aorta triage matrix <this run dir>` draws it" in md
    assert "| tf32_off-local" in md  # the table is all there
    assert len(json.loads(json_path.read_text())["cells"]) == 4


def test_a_failing_plot_never_costs_the_matrix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    class BrokenFigure:
        def __init__(self, **kwargs: object) -> None:
            raise RuntimeError("no fonts")

    monkeypatch.setattr(plot, "_import_matplotlib", lambda: BrokenFigure)
    md_path, _ = write_report(_report(tmp_path))
    assert "not drawn: drawing failed: RuntimeError: no fonts" in md_path.read_text()


def test_reanalysis_draws_the_plot_that_was_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A run written without matplotlib; the trial files come from the report's own data.
    report = _report(tmp_path)
    write_text_atomic(tmp_path / "recipe.resolved.yaml", dump_resolved_yaml(report.recipe))
    for row in report.matrix.rows:
        for t in row.stats.trials:
            trial = _trial(t.trial_id, passed=t.passed, ms=t.step_times_ms[0])
            path = tmp_path / "cells" / row.name / f"trial_{t.trial_id}.json"
            write_text_atomic(path, json.dumps(trial.to_dict()))
    with monkeypatch.context() as patch:
        patch.setattr(plot, "_import_matplotlib", _no_matplotlib)
        write_report(report)
    assert not (tmp_path / "matrix.png").exists()
    reanalyse(tmp_path)
    assert (tmp_path / "matrix.png").read_bytes()[:4] == b"\x89PNG"
    (archive,) = (tmp_path / "previous").iterdir()
    assert "pip install 'aorta[plot]'" in (archive / "matrix.md").read_text()
    assert "[matrix.png](matrix.png)" in (tmp_path / "matrix.md").read_text()


# --- the matrix never waits for the picture ----------------------------------------------

PENDING = "matrix.png is being drawn after the matrix"


def test_matrix_files_are_on_disk_before_matplotlib_is_imported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, str] = {}

    def import_matplotlib() -> Any:
        seen["json"] = (tmp_path / "matrix.json").read_text(encoding="utf-8")
        seen["md"] = (tmp_path / "matrix.md").read_text(encoding="utf-8")
        raise ImportError("No module named 'matplotlib'")

    monkeypatch.setattr(plot, "_import_matplotlib", import_matplotlib)
    md_path, _ = write_report(_report(tmp_path))
    assert len(json.loads(seen["json"])["cells"]) == 4
    assert PENDING in seen["md"] and "| tf32_off-local" in seen["md"]
    final = md_path.read_text(encoding="utf-8")
    assert PENDING not in final and "pip install 'aorta[plot]'" in final


def test_background_plot_is_drawn_by_a_child_and_linked_from_the_table(tmp_path: Path) -> None:
    plot_job.wait(timeout=120)  # children that earlier in-process CLI tests started
    report = _report(tmp_path)
    md_path, json_path = write_report(report, plot_drawer=plot_job.start)
    assert json.loads(json_path.read_text(encoding="utf-8"))["cells"]  # written before return
    assert plot_job.wait(timeout=120) == [0]
    png = tmp_path / "matrix.png"
    assert png.read_bytes().startswith(b"\x89PNG")
    assert md_path.read_text(encoding="utf-8") == render_markdown(report, PlotOutcome(png))


def test_a_late_plot_never_replaces_a_newer_table(tmp_path: Path) -> None:
    report = _report(tmp_path)
    write_report(report)
    newer = "a newer matrix.md (say, of a resumed run)\n"
    (tmp_path / "matrix.md").write_text(newer, encoding="utf-8")
    draw_plot(report, pending_md=render_markdown(report, PlotOutcome(None, pending=True)))
    assert (tmp_path / "matrix.md").read_text(encoding="utf-8") == newer
    assert (tmp_path / "matrix.png").exists()
