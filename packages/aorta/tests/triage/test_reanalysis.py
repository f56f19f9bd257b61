"""`aorta triage matrix <run-dir>`: rebuild from disk, keep the old matrix, keep cell errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aorta.cli.main import main
from aorta.errors import EnvironmentUnavailableError
from aorta.runner.models import RunRequest, TrialResult
from aorta.runner.trials import run_trials as real_run_trials
from aorta.triage.analysis.stats import fisher_p_value
from aorta.triage.lifecycle import reanalyse, run_recipe
from aorta.triage.recipe import recipe_from_flags
from aorta.triage.run import local as triage_runner

pytestmark = pytest.mark.usefixtures("plugin")


def _run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A real toy matrix in which the plugin_fix cell's environment 'fails'."""

    def run_trials(request: RunRequest, reporter: object = None) -> list[TrialResult]:
        if request.output_dir.name == "plugin_fix-local":
            raise EnvironmentUnavailableError("engine gone")
        return real_run_trials(request)

    monkeypatch.setattr(triage_runner, "run_trials", run_trials)
    recipe = recipe_from_flags(
        workload="toy",
        mitigation_axis=["none", "plugin_fix", "plugin_factory"],
        environment_axis=["local"],
        trials=3,
        steps=2,
        order="sequential",  # the spec's one run_trials call per cell
    )
    return run_recipe(recipe, tmp_path).run_dir


def test_rebuilds_from_trial_files_with_a_new_threshold_and_keeps_the_old_matrix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir = _run(tmp_path, monkeypatch)
    before = json.loads((run_dir / "matrix.json").read_text())
    old_md = (run_dir / "matrix.md").read_text()
    report = reanalyse(run_dir, threshold=2.5)
    after = json.loads((run_dir / "matrix.json").read_text())
    assert after["threshold"] == 2.5 and before["threshold"] == 1.15
    (archive,) = (run_dir / "previous").iterdir()
    assert (archive / "matrix.md").read_text() == old_md
    assert json.loads((archive / "matrix.json").read_text()) == before
    for old, new in zip(before["cells"], after["cells"], strict=True):
        assert (old["name"], old["passed_count"], old["trials_run"]) == (
            new["name"],
            new["passed_count"],
            new["trials_run"],
        )
    # The errored cell has no trial files; its recorded reason survives the rebuild.
    row = report.matrix.row("plugin_fix-local")
    assert row.confound == "error" and row.stats.error == "engine gone"


def test_alpha_of_a_reanalysis_is_the_family_wise_level(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Odd seeds diverge at step 1 unless plugin_fix: 5/10 in the baseline and plugin_factory,
    # 0/10 with plugin_fix. Steps sleep 1 ms and the threshold is wide: only failures decide.
    monkeypatch.setenv("AORTA_TOY_FAIL_AT", "1")
    monkeypatch.setenv("AORTA_TOY_SLEEP_S", "0.001")
    recipe = recipe_from_flags(
        workload="toy",
        mitigation_axis=["none", "plugin_fix", "plugin_factory"],
        environment_axis=["local"],
        trials=10,
        steps=3,
        order="sequential",
        confound_threshold=5.0,
    )
    run_dir = run_recipe(recipe, tmp_path).run_dir
    cells = {c["name"]: c for c in json.loads((run_dir / "matrix.json").read_text())["cells"]}
    fix = cells["plugin_fix-local"]
    assert (cells["none-local"]["failed_count"], fix["failed_count"]) == (5, 0)
    # Raw p = 0.033 < 0.05, but two cells were compared: Holm doubles the smaller p.
    assert fix["p_value"] == pytest.approx(fisher_p_value(0, 10, 5, 10))
    assert fix["p_adjusted"] == pytest.approx(2 * fix["p_value"])
    assert fix["confound"].startswith("inconclusive (p=0.07, ~")
    assert not fix["significant"]
    # `--alpha` keeps its meaning: the family-wise level the adjusted p is judged against.
    report = reanalyse(run_dir, alpha=0.1)
    row = report.matrix.row("plugin_fix-local")
    assert row.p_adjusted == pytest.approx(fix["p_adjusted"])
    assert row.confound == "\u2014" and row.significant(0.1)


def test_cli_matrix_command_and_its_bad_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = _run(tmp_path, monkeypatch)
    assert main(["triage", "matrix", str(run_dir), "--confound-threshold", "1.5"]) == 0
    assert f"matrix: {run_dir / 'matrix.md'}" in capsys.readouterr().out
    assert json.loads((run_dir / "matrix.json").read_text())["threshold"] == 1.5
    assert main(["triage", "matrix", str(run_dir), "--alpha", "0.2"]) == 0
    relabelled = json.loads((run_dir / "matrix.json").read_text())
    assert (relabelled["alpha"], relabelled["threshold"]) == (0.2, 1.15)  # the run's own
    assert "alpha 0.2 bounds the chance that any cell" in (run_dir / "matrix.md").read_text()
    for bad in ("0", "1", "nan"):
        assert main(["triage", "matrix", str(run_dir), "--alpha", bad]) == 2
        assert "--alpha: expected a significance level" in capsys.readouterr().err, bad

    assert main(["triage", "matrix", str(tmp_path)]) == 2
    assert "not a triage run directory (no recipe.resolved.yaml)" in capsys.readouterr().err
    # The same check as the recipe's: below 1.0 a faster cell would read as a speed confound.
    for bad in ("-1", "0.9", "inf"):
        assert main(["triage", "matrix", str(run_dir), "--confound-threshold", bad]) == 2
        err = capsys.readouterr().err
        assert "--confound-threshold: expected a finite number >= 1.0" in err, bad
    (run_dir / "recipe.resolved.yaml").write_text("cells: [unclosed\n")
    assert main(["triage", "matrix", str(run_dir)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "cannot read it as a triage run file" in line
