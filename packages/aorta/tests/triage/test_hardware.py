"""Step-time comparability across machines: per-node step times, different-hardware warning."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest
from aorta_testing import make_trial

from aorta.runner.host import TrialHost
from aorta.runner.models import TrialResult
from aorta.triage.analysis.cells import CellStats, aggregate_cell
from aorta.triage.analysis.hardware import describe, hardware_summary
from aorta.triage.analysis.matrix import Matrix, build_matrix

XEON = TrialHost("n1", "Intel Xeon Platinum 8480+", ("NVIDIA H100",) * 2)
XEON_2 = TrialHost("n2", "Intel Xeon Platinum 8480+", ("NVIDIA H100",) * 2)
EPYC = TrialHost("n3", "AMD EPYC 9654", ("NVIDIA H100",) * 2)
A100 = TrialHost("n4", "Intel Xeon Platinum 8480+", ("NVIDIA A100",) * 2)


def _trial(
    trial_id: int, times: Sequence[float], host: TrialHost | None, **kw: object
) -> TrialResult:
    return make_trial(trial_id, passed=True, step_times_ms=times, host=host, **kw)


def _cell(name: str, *hosts: TrialHost | None) -> CellStats:
    trials = [_trial(i, [10.0, 12.0], host) for i, host in enumerate(hosts)]
    return aggregate_cell(name, trials, trials_requested=len(trials))


def _matrix(*cells: CellStats) -> Matrix:
    return build_matrix(cells, baseline=cells[0].name, bootstrap_resamples=50)


def _hardware_lines(lines: Sequence[str]) -> list[str]:
    return [line for line in lines if "hardware" in line or "recorded no host" in line]


def test_same_hardware_on_one_node_gives_no_warning_or_note() -> None:
    matrix = _matrix(_cell("base", XEON, XEON), _cell("tf32", XEON, XEON))
    assert _hardware_lines(matrix.warnings) == [] and _hardware_lines(matrix.notes) == []


def test_two_cpu_models_warn_naming_the_cells_and_the_models() -> None:
    matrix = _matrix(_cell("base", XEON, XEON), _cell("tf32", EPYC, EPYC), _cell("hip", XEON))
    (warning,) = _hardware_lines(matrix.warnings)
    assert "cells ran on different hardware" in warning
    assert "CPU Intel Xeon Platinum 8480+, GPU 2x NVIDIA H100: cells base, hip" in warning
    assert "CPU AMD EPYC 9654, GPU 2x NVIDIA H100: cells tf32" in warning
    assert "step-time ratios and speed labels are suspect" in warning
    assert warning in matrix.to_dict()["warnings"]


def test_two_gpu_models_warn_too() -> None:
    matrix = _matrix(_cell("base", XEON), _cell("tf32", A100))
    (warning,) = _hardware_lines(matrix.warnings)
    assert "2x NVIDIA A100: cells tf32" in warning


def test_several_nodes_of_one_hardware_are_a_note_not_a_warning() -> None:
    matrix = _matrix(_cell("base", XEON, XEON_2), _cell("tf32", XEON_2))
    assert _hardware_lines(matrix.warnings) == []
    (note,) = _hardware_lines(matrix.notes)
    assert note.startswith("trials ran on 2 nodes of the same hardware")
    assert "n1 (cells base); n2 (cells base, tf32)" in note


def test_unknown_sides_are_not_evidence_of_a_difference() -> None:
    unknown_gpu = TrialHost("n1", XEON.cpu_model, None)
    matrix = _matrix(_cell("base", XEON), _cell("tf32", unknown_gpu))
    assert _hardware_lines(matrix.warnings) == [] and _hardware_lines(matrix.notes) == []


def test_old_trials_without_host_get_no_finding_and_a_mix_gets_a_note() -> None:
    old = _matrix(_cell("base", None, None), _cell("tf32", None))
    assert _hardware_lines(old.warnings) == [] and _hardware_lines(old.notes) == []
    mixed = _matrix(_cell("base", XEON, None), _cell("tf32", XEON))
    (note,) = _hardware_lines(mixed.notes)
    assert note.startswith("1 trial(s) recorded no host (cells base (1);")


def test_errored_trials_do_not_count_for_the_hardware_check() -> None:
    errored = make_trial(1, passed=False, step_times_ms=[], host=EPYC, outcome="error")
    cell = aggregate_cell("tf32", [_trial(0, [10.0], XEON), errored], trials_requested=2)
    assert _hardware_lines(_matrix(_cell("base", XEON), cell).warnings) == []


def test_step_times_broken_down_per_node() -> None:
    trials = [
        _trial(0, [10.0, 20.0], XEON),  # mean 15
        _trial(1, [30.0, 30.0, 60.0], XEON_2),  # mean 40
        _trial(2, [5.0, 7.0], XEON),  # mean 6
        make_trial(3, passed=False, step_times_ms=[], host=XEON_2, outcome="error"),
        _trial(4, [1.0, float("nan")], None),
    ]
    cell = aggregate_cell("base", trials, trials_requested=5)
    by_node = {n.node: n for n in cell.step_time_by_node}
    assert list(by_node) == ["n1", "n2", None]  # order of each node's first trial
    n1, n2, unknown = by_node["n1"], by_node["n2"], by_node[None]
    assert (n1.trials, n1.errors, n1.mean_step_time_ms) == (2, 0, pytest.approx(10.5))
    assert n1.median_step_time_ms == pytest.approx(8.5)  # pooled 5, 7, 10, 20
    assert (n2.trials, n2.errors, n2.mean_step_time_ms, n2.median_step_time_ms) == (
        1,
        1,
        pytest.approx(40.0),
        30.0,
    )
    assert (unknown.cpu_model, unknown.mean_step_time_ms, unknown.median_step_time_ms) == (
        None,
        1.0,
        1.0,
    )
    data = json.loads(json.dumps(cell.to_dict(), allow_nan=False))
    assert data["step_time_by_node"][0] == {
        "node": "n1",
        "cpu_model": "Intel Xeon Platinum 8480+",
        "gpu_models": ["NVIDIA H100", "NVIDIA H100"],
        "trials": 2,
        "errors": 0,
        "mean_step_time_ms": pytest.approx(10.5),
        "median_step_time_ms": pytest.approx(8.5),
    }
    assert data["trials"][1]["host"]["node"] == "n2" and data["trials"][4]["host"] is None


def test_descriptions_and_header_summary() -> None:
    assert describe(("X", ("A", "A", "B"))) == "CPU X, GPU 2x A + 1x B"
    assert describe((None, ())) == "CPU unknown, no GPU seen"
    assert describe(("X", None)) == "CPU X, GPU unknown"
    assert hardware_summary([None]) is None
    assert hardware_summary([XEON, XEON]) == (
        "CPU Intel Xeon Platinum 8480+, GPU 2x NVIDIA H100; node n1"
    )
    assert hardware_summary([XEON, EPYC]) == "mixed (see warnings); nodes n1, n3"
