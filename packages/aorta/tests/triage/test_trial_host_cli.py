"""End to end through `aorta triage run` / `aorta triage matrix`: where each trial ran, per node."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest

from aorta.cli.main import main
from aorta.instrumentation import system
from aorta.triage.report import writer
from aorta.triage.report.plot import PlotOutcome

pytestmark = pytest.mark.usefixtures("plugin")


@pytest.fixture(autouse=True)
def _no_plot(monkeypatch: pytest.MonkeyPatch) -> None:
    """The picture is not under test here; drawing it three times would triple the runtime."""
    monkeypatch.setattr(writer, "write_plot", lambda *a, **k: PlotOutcome(None, "not drawn"))


RECIPE = (
    "schema_version: 1\nworkload: toy\ntrials: 2\nsteps: 3\ncells:\n"
    "  - {name: base, mitigations: [none], environment: local}\n"
    "  - {name: fix, mitigations: [plugin_fix], environment: local}\n"
)


def _json(path: Path) -> Any:
    return json.loads(path.read_text())


def _trial_files(run_dir: Path) -> list[Path]:
    return sorted(run_dir.glob("cells/*/trial_*.json"))


def _run(tmp_path: Path) -> Path:
    """`aorta triage run` of RECIPE; its run directory."""
    recipe = tmp_path / "r.yaml"
    recipe.write_text(RECIPE)
    out = tmp_path / "out"
    assert main(["triage", "run", "--recipe", str(recipe), "--output-dir", str(out)]) == 0
    (run_dir,) = out.glob("*/toy/*")
    return run_dir


def _by_node(matrix: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    return {cell["name"]: cell["step_time_by_node"] for cell in matrix["cells"]}


def test_trials_record_this_machine_and_the_matrix_breaks_step_times_down_per_node(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SLURM_JOB_ID", "4242")
    monkeypatch.delenv("SLURM_ARRAY_JOB_ID", raising=False)
    run_dir = _run(tmp_path)
    node, cpu = socket.gethostname(), system.cpu_info().model
    for path in _trial_files(run_dir):
        host = _json(path)["host"]
        assert (host["node"], host["cpu_model"], host["slurm_job_id"]) == (node, cpu, "4242")
        assert host["slurm_array_job_id"] is None
    matrix = _json(run_dir / "matrix.json")
    for cell in matrix["cells"]:
        (only,) = cell["step_time_by_node"]
        assert (only["node"], only["cpu_model"], only["trials"], only["errors"]) == (
            node,
            cpu,
            2,
            0,
        )
        assert only["mean_step_time_ms"] == pytest.approx(cell["mean_step_time_ms"])
    assert not [w for w in matrix["warnings"] if "hardware" in w]
    assert f"**Hardware**: CPU {cpu}" in (run_dir / "matrix.md").read_text()

    # Re-analysis rebuilds the same breakdown from the trial files.
    assert main(["triage", "matrix", str(run_dir)]) == 0
    assert _by_node(_json(run_dir / "matrix.json")) == _by_node(matrix)

    # The same run as if cell `fix` had run on another CPU model: the matrix warns.
    for path in run_dir.glob("cells/fix/trial_*.json"):
        trial = _json(path)
        trial["host"] = {**trial["host"], "node": "gpu-99", "cpu_model": "Other CPU 9000"}
        path.write_text(json.dumps(trial))
    assert main(["triage", "matrix", str(run_dir)]) == 0
    md = (run_dir / "matrix.md").read_text()
    warning = next(line for line in md.splitlines() if "different hardware" in line)
    assert warning.startswith("> **Warning**: cells ran on different hardware")
    assert f"CPU {cpu}, " in warning and ": cells base;" in warning
    assert "CPU Other CPU 9000, " in warning and warning.rstrip().endswith("(step_time_by_node)")
    nodes = [n["node"] for n in _by_node(_json(run_dir / "matrix.json"))["fix"]]
    assert nodes == ["gpu-99"]
    capsys.readouterr()


def test_trial_files_written_before_hosts_were_recorded_still_make_a_matrix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = _run(tmp_path)
    for path in _trial_files(run_dir):
        trial = _json(path)
        del trial["host"]
        path.write_text(json.dumps(trial))
    assert main(["triage", "matrix", str(run_dir)]) == 0
    matrix = _json(run_dir / "matrix.json")
    for cell in matrix["cells"]:
        (only,) = cell["step_time_by_node"]
        assert (only["node"], only["trials"]) == (None, 2)
        assert all(trial["host"] is None for trial in cell["trials"])
    lines = [*matrix["warnings"], *matrix["notes"]]
    assert not [line for line in lines if "hardware" in line or "no host" in line]
    assert "**Hardware**" not in (run_dir / "matrix.md").read_text()
    capsys.readouterr()
