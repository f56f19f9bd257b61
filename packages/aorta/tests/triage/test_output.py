"""`report.output`: run-dir layout, matrix.json content, matrix.md rendering, writing."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from aorta_testing import make_trial

from aorta.runner.models import TrialResult
from aorta.triage.analysis.cells import CellStats, aggregate_cell, error_cell
from aorta.triage.analysis.matrix import Matrix, build_matrix
from aorta.triage.layout import RunDir
from aorta.triage.recipe import Cell, Recipe, recipe_from_flags
from aorta.triage.report.markdown import render_markdown
from aorta.triage.report.output import NO_TICKET, MatrixReport, new_run_dir, report_json
from aorta.triage.report.plot import PlotOutcome
from aorta.triage.report.writer import write_report

NOW = datetime(2026, 4, 28, 14, 12, 3, tzinfo=UTC)
STAMP = "2026-04-28T14:12:03Z"
EM = "\u2014"


def _recipe(ticket: str | None = None, workload: str = "fsdp") -> Recipe:
    recipe = recipe_from_flags(
        workload="fsdp",
        mitigation_axis=["none", "tf32_off", "xnack"],
        environment_axis=["local"],
        trials=8,
        steps=50,
        ticket=ticket,
    )
    # Only fsdp is registered in core; the layout does not care whether a workload resolves.
    return recipe if workload == "fsdp" else dataclasses.replace(recipe, workload=workload)


def _with_extra_cells(recipe: Recipe) -> Recipe:
    """The flag recipe plus a stacked cell and a cell that will error as a whole."""
    tf32, xnack = recipe.cell("tf32_off-local"), recipe.cell("xnack-local")
    stack = Cell(
        name="stack-local",
        mitigations=("tf32_off", "xnack"),
        environment=tf32.environment,
        extra_env={"HSA_XNACK": "0"},
        trials=8,
        steps=50,
        env={**tf32.env, **xnack.env, "HSA_XNACK": "0"},
        mitigation_entries=tf32.mitigation_entries + xnack.mitigation_entries,
    )
    broken = dataclasses.replace(stack, name="broken-local", extra_env={}, env=dict(tf32.env))
    return dataclasses.replace(recipe, cells=(*recipe.cells, stack, broken))


def _trial(trial_id: int, step_ms: float, *, passed: bool) -> TrialResult:
    return make_trial(
        trial_id,
        passed=passed,
        step_times_ms=[step_ms] * 4,
        failure="NaN loss at step 3",
        losses=[1.0 + trial_id / 1000.0] * 4,
        wall_clock_sec=2.0,
        started_at=STAMP,
        failed_at_step=None if passed else 3,
    )


def _cell(name: str, step_ms: float, failures: int, trials: int = 8) -> CellStats:
    # Constant step times make the pooled means (and so the ratios) exact.
    results = [_trial(i, step_ms, passed=i >= failures) for i in range(trials)]
    return aggregate_cell(name, results, trials_requested=trials)


def _matrix(*, baseline_error: bool = False) -> Matrix:
    base = (
        error_cell("none-local", "docker pull failed:\nno such image", trials_requested=8)
        if baseline_error
        else _cell("none-local", 400.0, failures=4)
    )
    cells = [
        base,
        _cell("tf32_off-local", 500.0, failures=0),  # exactly 1.25x the baseline
        _cell("xnack-local", 404.0, failures=0),  # 1.01x, fewer failures, not significant
        _cell("stack-local", 400.0, failures=4),  # same rate: too few trials to rule out a cure
        error_cell("broken-local", "docker unavailable", trials_requested=8),
    ]
    return build_matrix(cells, baseline="none-local", threshold=1.15, bootstrap_resamples=200)


def _report(tmp_path: Path, **kwargs: object) -> MatrixReport:
    matrix = kwargs.pop("matrix", None) or _matrix()
    assert isinstance(matrix, Matrix)
    return MatrixReport(
        recipe=_with_extra_cells(_recipe(ticket="EXAMPLE-001")),
        matrix=matrix,
        run_dir=tmp_path,
        run_timestamp=STAMP,
        **kwargs,  # type: ignore[arg-type]
    )


def _table(markdown: str) -> list[list[str]]:
    """The Reproduction Summary table's rows (header and rule excluded), cells stripped."""
    section = markdown.split("## Reproduction Summary", 1)[1].split("## Notes", 1)[0]
    lines = [line for line in section.splitlines() if line.startswith("|")]
    return [[c.strip() for c in line.strip().strip("|").split("|")] for line in lines[2:]]


def _row(markdown: str, name: str) -> list[str]:
    for row in _table(markdown):
        if row[0] == name:
            return row
    raise AssertionError(f"no row {name!r} in:\n{markdown}")


# --- layout ------------------------------------------------------------------------------


def test_new_run_dir_groups_by_ticket_and_workload(tmp_path: Path) -> None:
    run_dir, stamp = new_run_dir(tmp_path, _recipe(ticket="EXAMPLE-001"), NOW)
    assert run_dir == tmp_path / "EXAMPLE-001" / "fsdp" / "2026-04-28T14-12-03"
    assert run_dir.is_dir()
    assert stamp == STAMP


def test_new_run_dir_without_ticket_uses_placeholder(tmp_path: Path) -> None:
    run_dir, _ = new_run_dir(tmp_path, _recipe(), NOW)
    assert run_dir == tmp_path / NO_TICKET / "fsdp" / "2026-04-28T14-12-03"
    assert NO_TICKET == "_no_ticket_"


def test_new_run_dir_converts_to_utc_and_treats_naive_as_utc(tmp_path: Path) -> None:
    plus_two = NOW.astimezone(timezone(timedelta(hours=2)))
    _, stamp = new_run_dir(tmp_path, _recipe(), plus_two)
    assert stamp == STAMP
    _, naive_stamp = new_run_dir(tmp_path, _recipe(), NOW.replace(tzinfo=None))
    assert naive_stamp == STAMP


def test_two_runs_in_the_same_second_get_distinct_dirs(tmp_path: Path) -> None:
    first, _ = new_run_dir(tmp_path, _recipe(), NOW)
    (first / "matrix.md").write_text("first run")
    second, stamp = new_run_dir(tmp_path, _recipe(), NOW)
    assert second != first
    assert second.name == "2026-04-28T14-12-03-1"
    assert second.is_dir() and not any(second.iterdir())
    assert (first / "matrix.md").read_text() == "first run"
    assert stamp == STAMP


def test_different_tickets_and_workloads_never_share_a_dir(tmp_path: Path) -> None:
    dirs = {
        new_run_dir(tmp_path, recipe, NOW)[0]
        for recipe in (
            _recipe(ticket="A-1"),
            _recipe(ticket="B-2"),
            _recipe(),
            _recipe(ticket="A-1", workload="toy"),
        )
    }
    assert len(dirs) == 4
    assert tmp_path / "A-1" / "toy" / "2026-04-28T14-12-03" in dirs


def test_new_run_dir_rejects_unsafe_ticket(tmp_path: Path) -> None:
    recipe = dataclasses.replace(_recipe(), ticket="../escape")
    with pytest.raises(ValueError, match="ticket"):
        new_run_dir(tmp_path, recipe, NOW)
    assert not any(tmp_path.iterdir())


def test_cell_dir(tmp_path: Path) -> None:
    assert RunDir(tmp_path).cell("none-local") == tmp_path / "cells" / "none-local"
    trial = RunDir(tmp_path).trial("none-local", 3)
    assert trial == tmp_path / "cells" / "none-local" / "trial_3.json"


# --- matrix.md ---------------------------------------------------------------------------


def test_markdown_header_lines(tmp_path: Path) -> None:
    md = render_markdown(_report(tmp_path))
    lines = md.splitlines()
    assert lines[0] == f"# Triage Matrix {EM} fsdp"
    for expected in (
        "**Ticket**: EXAMPLE-001",
        "**Workload**: fsdp",
        "**Recipe**: flags",
        "**Trials per cell**: 8",
        "**Steps per trial**: 50",
        f"**Run timestamp**: {STAMP}",
        "**Baseline cell**: none-local (mean step time = 400 ms)",
    ):
        assert expected in lines
    quoted = [line.rstrip() for line in lines if line.startswith(">")]
    assert quoted == ["> **Warning**: cell broken-local failed: docker unavailable"]
    assert md.index("## Reproduction Summary") < md.index("## Notes")


def test_markdown_rows_follow_the_spec(tmp_path: Path) -> None:
    md = render_markdown(_report(tmp_path))
    assert _table(md) == [
        ["none-local", "none", "local", "50% [22\u201378]", "4 / 8", "400", EM, "(baseline)"],
        # Three cells compared (the errored one is not): Holm multiplies the smallest p by 3.
        ["tf32_off-local", "tf32_off", "local", "0% [0\u201332]", "0 / 8", "500",
         "0.077 (Holm 0.231)",
         "speed (+25%); drop inconclusive (p=0.23, ~19 trials per cell needed)"],
        ["xnack-local", "xnack", "local", "0% [0\u201332]", "0 / 8", "404", "0.077 (Holm 0.231)",
         "inconclusive (p=0.23, ~19 trials per cell needed)"],
        ["stack-local", "tf32_off, xnack", "local", "50% [22\u201378]", "4 / 8", "400",
         "1.000", "inconclusive (p=1.00, ~85 trials per cell needed)"],
        ["broken-local", "tf32_off, xnack", "local", "n/a", "n/a", "n/a", EM, "error"],
    ]  # fmt: skip


def test_a_baseline_that_never_failed_opens_the_page_and_labels_every_cell(
    tmp_path: Path,
) -> None:
    matrix = build_matrix(
        [
            _cell("none-local", 400.0, failures=0),
            _cell("tf32_off-local", 500.0, failures=0),
            _cell("xnack-local", 404.0, failures=1),
        ],
        baseline="none-local",
        bootstrap_resamples=200,
    )
    md = render_markdown(_report(tmp_path, matrix=matrix))
    quoted = [line.rstrip() for line in md.splitlines() if line.startswith(">")]
    assert quoted[0] == (
        "> **Warning**: Baseline did not reproduce the failure (0 of 8 trials failed): no cell "
        "can show a cure."
    )
    assert md.index(quoted[0]) < md.index("## Reproduction Summary")
    assert _row(md, "tf32_off-local")[-1] == "speed (+25%); no failure to cure"
    assert _row(md, "xnack-local")[-2:] == ["1.000", "no failure to cure"]  # Holm: 2 x 1.0 = 1


def test_markdown_table_is_aligned(tmp_path: Path) -> None:
    md = render_markdown(_report(tmp_path))
    section = md.split("## Reproduction Summary", 1)[1].split("## Notes", 1)[0]
    lines = [line for line in section.splitlines() if line.startswith("|")]
    assert len(lines) == 7  # header, rule, 5 rows
    assert len({len(line) for line in lines}) == 1
    assert lines[0].startswith("| Cell ")
    assert "| p vs baseline " in lines[0]
    assert set(lines[1]) <= {"|", "-"}
    # every column boundary sits at the same offset in every line
    bars = {tuple(i for i, ch in enumerate(line) if ch == "|") for line in lines}
    assert len(bars) == 1


def test_markdown_recipe_line_shows_path_and_short_digest(tmp_path: Path) -> None:
    report = _report(tmp_path)
    recipe = dataclasses.replace(
        report.recipe, source=Path("recipes/example-fsdp.yaml"), sha256="abc123" + "0" * 58
    )
    md = render_markdown(dataclasses.replace(report, recipe=recipe))
    assert "**Recipe**: recipes/example-fsdp.yaml (sha256:abc123000000)" in md.splitlines()


def test_markdown_without_ticket_shows_placeholder(tmp_path: Path) -> None:
    report = _report(tmp_path)
    md = render_markdown(dataclasses.replace(report, recipe=_with_extra_cells(_recipe())))
    assert f"**Ticket**: `{NO_TICKET}`" in md.splitlines()


def test_markdown_shows_per_cell_overrides(tmp_path: Path) -> None:
    report = _report(tmp_path)
    cells = tuple(
        dataclasses.replace(c, trials=16) if c.name == "stack-local" else c
        for c in report.recipe.cells
    )
    md = render_markdown(
        dataclasses.replace(report, recipe=dataclasses.replace(report.recipe, cells=cells))
    )
    assert "**Trials per cell**: 8 (per-cell overrides: stack-local = 16)" in md.splitlines()


def test_baseline_error_gives_na_ratios_and_a_top_warning(tmp_path: Path) -> None:
    md = render_markdown(_report(tmp_path, matrix=_matrix(baseline_error=True)))
    assert "**Baseline cell**: none-local (mean step time = n/a)" in md.splitlines()
    warning = next(line for line in md.splitlines() if line.startswith("> **Warning**"))
    assert "baseline cell none-local failed: ratios are n/a" in warning
    assert "docker pull failed: no such image" in warning  # folded onto one line
    assert md.index("> **Warning**") < md.index("## Reproduction Summary")
    assert _row(md, "none-local")[-1] == "error"
    for name in ("tf32_off-local", "xnack-local", "stack-local"):
        row = _row(md, name)
        assert row[-1] == "n/a"
        assert row[-2] == EM  # no baseline failure count to compare against
    assert _row(md, "xnack-local")[5] == "404"  # the cell's own timing is still shown


def test_partial_scope_warnings(tmp_path: Path) -> None:
    md = render_markdown(_report(tmp_path, partial_scopes=("host", "environment local")))
    lines = [line.rstrip() for line in md.splitlines()]
    assert "> **Warning**: environment snapshot for host is partial: see host_env.json" in lines
    assert (
        "> **Warning**: environment snapshot for environment local is partial: "
        "see environments/local/env.json"
    ) in lines
    assert md.index("is partial") < md.index("## Reproduction Summary")


def test_interrupted_banner_and_not_run_rows(tmp_path: Path) -> None:
    full = _matrix()
    ran = [r.stats for r in full.rows if r.name in ("none-local", "tf32_off-local")]
    matrix = build_matrix(ran, baseline="none-local", bootstrap_resamples=50)
    report = _report(
        tmp_path,
        matrix=matrix,
        interrupted=True,
        cells_not_run=("xnack-local", "stack-local", "broken-local"),
    )
    md = render_markdown(report)
    lines = [line.rstrip() for line in md.splitlines()]
    assert "> **Interrupted**: cells not run: xnack-local, stack-local, broken-local" in lines
    assert md.index("**Interrupted**") < md.index("## Reproduction Summary")
    assert _row(md, "xnack-local") == [
        "xnack-local", "xnack", "local", "n/a", "n/a", "n/a", EM, "not run",
    ]  # fmt: skip
    assert len(_table(md)) == 5
    data = report_json(report)
    assert data["interrupted"] is True
    assert data["cells_not_run"] == ["xnack-local", "stack-local", "broken-local"]


def test_notes_carry_legend_and_matrix_notes(tmp_path: Path) -> None:
    report = _report(tmp_path)
    matrix = dataclasses.replace(report.matrix, notes=("more trials needed: 40 per cell",))
    md = render_markdown(dataclasses.replace(report, matrix=matrix))
    notes = md.split("## Notes", 1)[1]
    assert "- more trials needed: 40 per cell" in notes.splitlines()
    assert "Wilson" in notes
    assert "matrix.json" in notes and "p99" in notes and "recipe.resolved.yaml" in notes
    assert "`speed (+N%)`" in notes and "`no effect`" in notes and "15%" in notes
    assert "Holm-Bonferroni" in notes and "`p_adjusted`" in notes
    assert "`no failure to cure`" in notes and "below half of the baseline's rate" in notes


def test_small_step_times_get_one_decimal(tmp_path: Path) -> None:
    matrix = build_matrix(
        [_cell("none-local", 4.25, failures=1), _cell("xnack-local", 4.0, failures=0)],
        baseline="none-local",
        bootstrap_resamples=50,
    )
    md = render_markdown(_report(tmp_path, matrix=matrix))
    assert _row(md, "none-local")[5] == "4.2"
    assert _row(md, "xnack-local")[5] == "4.0"
    assert "(mean step time = 4.2 ms)" in md


def test_tiny_p_value_and_rare_failure_rate(tmp_path: Path) -> None:
    matrix = build_matrix(
        [_cell("none-local", 100.0, failures=20, trials=20), _cell("xnack-local", 100.0, 1, 250)],
        baseline="none-local",
        bootstrap_resamples=50,
    )
    row = _row(render_markdown(_report(tmp_path, matrix=matrix)), "xnack-local")
    assert row[3].startswith("<1% [")  # 0.4 % is not shown as 0 %
    assert row[6] == "<0.001"


def test_fewer_trials_than_requested_shows_of_n(tmp_path: Path) -> None:
    results = [_trial(i, 400.0, passed=i != 0) for i in range(6)]
    matrix = build_matrix(
        [aggregate_cell("none-local", results, trials_requested=8)],
        baseline="none-local",
        bootstrap_resamples=50,
    )
    assert _row(render_markdown(_report(tmp_path, matrix=matrix)), "none-local")[4] == "1 / 6 of 8"


# --- matrix.json -------------------------------------------------------------------------


def test_json_is_strict_and_complete(tmp_path: Path) -> None:
    data = report_json(_report(tmp_path, partial_scopes=("host",)))
    json.dumps(data, allow_nan=False)
    assert data["schema_version"] == 1
    assert data["ticket"] == "EXAMPLE-001"
    assert data["workload"] == "fsdp"
    assert data["recipe"] == {"origin": "flags", "source": None, "sha256": None}
    assert data["run_timestamp"] == STAMP
    assert data["baseline"] == "none-local"
    assert data["baseline_mean_step_time_ms"] == 400.0
    assert data["threshold"] == 1.15
    assert data["partial_scopes"] == ["host"]
    assert data["interrupted"] is False and data["cells_not_run"] == []
    assert any("broken-local failed" in w for w in data["warnings"])

    cells = {c["name"]: c for c in data["cells"]}
    assert list(cells) == [
        "none-local", "tf32_off-local", "xnack-local", "stack-local", "broken-local",
    ]  # fmt: skip
    tf32 = cells["tf32_off-local"]
    assert tf32["step_time_ratio"] == 1.25
    assert tf32["confound"] == (
        "speed (+25%); drop inconclusive (p=0.23, ~19 trials per cell needed)"
    )
    assert tf32["p_value"] == pytest.approx(1 / 13)
    assert tf32["p_adjusted"] == pytest.approx(3 / 13)
    assert data["smallest_cure"] == 0.5
    assert tf32["env"] == {"NVIDIA_TF32_OVERRIDE": "0", "HIPBLASLT_ALLOW_TF32": "0"}
    assert tf32["mitigations"] == ["tf32_off"]
    assert tf32["environment"] == {
        "name": "local", "kind": "local", "image": None, "source_package": "aorta",
    }  # fmt: skip
    assert tf32["effective_trials"] == 8 and tf32["effective_steps"] == 50
    assert tf32["trial_paths"] == [f"cells/tf32_off-local/trial_{i}.json" for i in range(8)]
    assert tf32["trials"][3]["path"] == "cells/tf32_off-local/trial_3.json"
    assert tf32["trials"][0]["step_times_ms"] == [500.0] * 4
    assert tf32["std_step_time_ms"] == 0.0 and tf32["p99_step_time_ms"] == 500.0

    stack = cells["stack-local"]
    assert stack["extra_env"] == {"HSA_XNACK": "0"}
    assert stack["env"]["HSA_XNACK"] == "0"
    assert cells["broken-local"]["error"] == "docker unavailable"
    assert cells["broken-local"]["trial_paths"] == []


def test_json_with_errored_baseline_is_strict(tmp_path: Path) -> None:
    data = report_json(_report(tmp_path, matrix=_matrix(baseline_error=True)))
    json.dumps(data, allow_nan=False)
    assert data["baseline_mean_step_time_ms"] is None
    assert all(c["step_time_ratio"] is None for c in data["cells"])


# --- writing -----------------------------------------------------------------------------


def test_write_report_writes_all_three_files_atomically(tmp_path: Path) -> None:
    run_dir, stamp = new_run_dir(tmp_path, _recipe(ticket="EXAMPLE-001"), NOW)
    report = dataclasses.replace(_report(tmp_path), run_dir=run_dir, run_timestamp=stamp)
    md_path, json_path = write_report(report)
    assert md_path == run_dir / "matrix.md"
    assert json_path == run_dir / "matrix.json"
    plotted = PlotOutcome(run_dir / "matrix.png")
    assert md_path.read_text(encoding="utf-8") == render_markdown(report, plotted)
    assert json.loads(json_path.read_text(encoding="utf-8")) == report_json(report)
    # No temp file left behind: only the three final names.
    assert sorted(p.name for p in run_dir.iterdir()) == ["matrix.json", "matrix.md", "matrix.png"]


def test_write_report_may_rewrite_its_own_files(tmp_path: Path) -> None:
    partial = _report(tmp_path, interrupted=True, cells_not_run=("broken-local",))
    write_report(partial)
    md_path, _ = write_report(_report(tmp_path))
    assert "**Interrupted**" not in md_path.read_text(encoding="utf-8")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["matrix.json", "matrix.md", "matrix.png"]
