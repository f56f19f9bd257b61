"""Which node: per-node failure rates, the suspects, and `aorta triage nodes RUN`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aorta.cli.main import main
from aorta.triage.analysis.nodes import (
    exclusion_document,
    exclusion_list,
    node_banner,
    node_rates,
    suspect_nodes,
)
from aorta.triage.report import writer
from aorta.triage.report.plot import PlotOutcome


def _trials(node: str, failed: int, passed: int, errors: int = 0) -> list[tuple[str, str]]:
    return [(node, "failed")] * failed + [(node, "passed")] * passed + [(node, "error")] * errors


def test_failures_concentrated_on_one_node_make_it_a_suspect() -> None:
    trials = _trials("bad07", 5, 0) + _trials("n01", 0, 5) + _trials("n02", 1, 5, errors=3)
    rates = node_rates([*trials, (None, "failed")])  # a trial without a node is left out
    assert [(r.node, r.failures, r.trials) for r in rates] == [
        ("bad07", 5, 5),
        ("n01", 0, 5),
        ("n02", 1, 6),  # errors measure nothing
    ]
    assert suspect_nodes(rates, 0.05) == ["bad07"]
    banner = node_banner(rates, 0.05)
    assert banner is not None
    assert "bad07 (5 of 5 trials failed vs 1 of 11 elsewhere, adjusted p=" in banner


def test_evenly_spread_failures_raise_no_banner() -> None:
    rates = node_rates(_trials("n01", 2, 4) + _trials("n02", 3, 3) + _trials("n03", 2, 4))
    assert suspect_nodes(rates, 0.05) == [] and node_banner(rates, 0.05) is None


def test_a_node_failing_less_is_never_a_suspect() -> None:
    rates = node_rates(_trials("good", 0, 12) + _trials("n01", 9, 3))
    assert suspect_nodes(rates, 0.05) == ["n01"]


def test_one_node_has_nothing_to_be_compared_with() -> None:
    (only,) = node_rates(_trials("n01", 3, 3))
    assert only.p_adjusted is None and suspect_nodes([only], 0.05) == []


def test_exclusion_forms() -> None:
    assert exclusion_list(["a", "b", "a"]) == "a,b"
    document = exclusion_document(["a", "b"])
    oellm = pytest.importorskip("oellm_autoexp.monitor.node_exclusions")
    # The document is one oellm-autoexp's own loader accepts.
    assert document["format"] == oellm._FORMAT


RECIPE = (
    "schema_version: 1\nworkload: toy\ntrials: 6\nsteps: 3\ncells:\n"
    "  - {name: base, mitigations: [none], environment: local,"
    " extra_env: {AORTA_TOY_FAIL_AT: '1'}}\n"
    "  - {name: fix, mitigations: [plugin_fix], environment: local,"
    " extra_env: {AORTA_TOY_FAIL_AT: '1'}}\n"
)


@pytest.mark.usefixtures("plugin")
def test_triage_nodes_prints_the_exclusion_list(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(writer, "write_plot", lambda *a, **k: PlotOutcome(None, "not drawn"))
    recipe = tmp_path / "r.yaml"
    recipe.write_text(RECIPE)
    out = tmp_path / "out"
    assert main(["triage", "run", "--recipe", str(recipe), "--output-dir", str(out)]) == 0
    (run_dir,) = out.glob("*/toy/*")
    # As a SLURM run's records read: every failed trial ran on bad07, the rest elsewhere.
    spread = iter(["n01", "n02", "n03"] * 4)
    for path in sorted(run_dir.glob("cells/*/trial_*.json")):
        record = json.loads(path.read_text())
        record["host"]["node"] = "bad07" if record["outcome"] == "failed" else next(spread)
        path.write_text(json.dumps(record))
    capsys.readouterr()

    assert main(["triage", "nodes", str(run_dir)]) == 0
    printed = capsys.readouterr()
    assert printed.out == "bad07\n"
    assert "failures concentrate on node bad07 (3 of 3 trials failed" in printed.err

    assert main(["triage", "nodes", str(run_dir), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    oellm = pytest.importorskip("oellm_autoexp.monitor.node_exclusions")
    state = tmp_path / "state"
    state.mkdir()
    (state / oellm.EXCLUSIONS_FILE).write_text(json.dumps(document))
    assert oellm.load_project_exclusions(state) == ["bad07"]

    assert main(["triage", "nodes", str(run_dir), "--alpha", "2"]) == 2
    assert "--alpha" in capsys.readouterr().err
