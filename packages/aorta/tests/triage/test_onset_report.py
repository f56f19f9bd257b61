"""matrix.md's "Where failures start" section, end to end through `aorta triage run`."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from aorta.cli.main import main
from aorta.triage.report import writer
from aorta.triage.report.plot import PlotOutcome

SCRIPT = str(Path(__file__).parents[1] / "instrumentation" / "scripts" / "nan_at_module.py")


@pytest.fixture(autouse=True)
def _no_plot(monkeypatch: pytest.MonkeyPatch) -> None:
    """The picture is not under test here."""
    monkeypatch.setattr(writer, "write_plot", lambda *a, **k: PlotOutcome(None, "not drawn"))


@pytest.mark.usefixtures("plugin")
def test_the_first_failing_steps_are_summarised_per_cell(tmp_path: Path) -> None:
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        "schema_version: 1\nworkload: toy\ntrials: 4\nsteps: 4\ncells:\n"
        "  - {name: base, mitigations: [none], environment: local,"
        " extra_env: {AORTA_TOY_FAIL_AT: '2'}}\n"
        "  - {name: fix, mitigations: [plugin_fix], environment: local,"
        " extra_env: {AORTA_TOY_FAIL_AT: '2'}}\n"
    )
    out = tmp_path / "out"
    assert main(["triage", "run", "--recipe", str(recipe), "--output-dir", str(out)]) == 0
    (run_dir,) = out.glob("*/toy/*")
    text = (run_dir / "matrix.md").read_text()
    assert "## Where failures start" in text
    assert "| Cell | Failed | First failing step |\n" in text  # no locate column without locate
    assert "| base | 2 / 4 | step 2, 2 trials |" in text
    assert "| fix |" not in text.split("## Where failures start")[1]  # no failure to place


@pytest.mark.slow
def test_a_located_command_matrix_names_the_module_in_matrix_md(tmp_path: Path) -> None:
    out = tmp_path / "out"
    argv = [
        "triage",
        "run",
        "--mode",
        "matrix",
        "--mitigation-axis",
        "none",
        "--environment-axis",
        "local",
        "--trials",
        "2",
        "--steps",
        "10",
        "--locate",
        "--step-time",
        "jsonl",
        "--failure-pattern",
        "non-finite grad norm",
        "--output-dir",
        str(out),
        "--",
        sys.executable,
        SCRIPT,
        "--seed",
        "{seed}",
        "--phase",
        "backward",
        "--module",
        "net.2",
    ]
    assert main(argv) == 0
    (run_dir,) = out.glob("*/command/*")
    text = (run_dir / "matrix.md").read_text()
    assert "| Cell | Failed | First failing step | First non-finite |" in text
    assert "| none-local | 2 / 2 | step 4, 2 trials | net.2 backward, 2 of 2 |" in text
    (trial,) = json.loads((run_dir / "matrix.json").read_text())["cells"][0]["trials"][:1]
    assert trial["first_nonfinite"]["module"] == "net.2"
