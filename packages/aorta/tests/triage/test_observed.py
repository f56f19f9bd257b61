"""`aorta.triage.analysis.observed` and the matrix's "no observable effect" note."""

from __future__ import annotations

from typing import Any

from aorta_testing import make_trial

from aorta.triage.analysis.cells import aggregate_cell
from aorta.triage.analysis.matrix import build_matrix
from aorta.triage.analysis.observed import observed_differences, observed_settings

_BASE: dict[str, Any] = {
    "fp32_matmul_effective": "ieee",
    "config": {"grad_clip": 0.0},
    "NVIDIA_TF32_OVERRIDE": None,
    "grad_norms": [1.0, 2.0],
}


def _cell(name: str, observed: list[dict[str, Any]], env: dict[str, str]) -> Any:
    trials = [
        make_trial(i, passed=True, step_times_ms=[1.0, 1.0], observed=o, env_applied=env)
        for i, o in enumerate(observed)
    ]
    return aggregate_cell(name, trials, trials_requested=len(trials))


def test_settings_leave_out_series_per_trial_values_and_the_cells_own_variables() -> None:
    found = observed_settings(
        [
            {**_BASE, "pid": 10, "NVIDIA_TF32_OVERRIDE": "0"},
            {**_BASE, "pid": 11, "NVIDIA_TF32_OVERRIDE": "0", "grad_norms": [3.0]},
        ],
        {"NVIDIA_TF32_OVERRIDE"},
    )
    assert found is not None
    assert found.settings == {"fp32_matmul_effective": "ieee", "config": {"grad_clip": 0.0}}
    assert found.excluded == {"NVIDIA_TF32_OVERRIDE", "pid", "grad_norms"}
    assert observed_settings([{}, {}], ()) is None


def test_differences_compare_only_what_both_sides_can_compare() -> None:
    base = observed_settings([_BASE, _BASE], ())
    echo_only = observed_settings(
        [{**_BASE, "NVIDIA_TF32_OVERRIDE": "0"}], {"NVIDIA_TF32_OVERRIDE"}
    )
    acted = observed_settings(
        [{**_BASE, "NVIDIA_TF32_OVERRIDE": "0", "fp32_matmul_effective": "reduced"}],
        {"NVIDIA_TF32_OVERRIDE"},
    )
    extra_key = observed_settings([{**_BASE, "gcnArchName": "gfx90a:xnack+"}], ())
    assert observed_differences(echo_only, base) == ()
    assert observed_differences(acted, base) == ("fp32_matmul_effective",)
    assert observed_differences(extra_key, base) == ("gcnArchName",)
    assert observed_differences(None, base) is None
    assert observed_differences(base, None) is None


def test_matrix_notes_a_cell_whose_mitigation_changed_no_observed_setting() -> None:
    base = _cell("baseline", [_BASE, _BASE], {})
    xnack = _cell("xnack", [{**_BASE, "HSA_XNACK": "1"}] * 2, {"HSA_XNACK": "1"})
    clip = _cell("clip", [{**_BASE, "config": {"grad_clip": 1.0}}] * 2, {"G": "1"})
    silent = _cell("silent", [{}, {}], {})
    matrix = build_matrix([base, xnack, clip, silent], baseline="baseline")
    assert matrix.row("xnack").observed_differences == ()
    assert matrix.row("clip").observed_differences == ("config",)
    assert matrix.row("silent").observed_differences is None
    assert matrix.row("baseline").observed_differences is None
    notes = [n for n in matrix.notes if n.startswith("no observable effect")]
    assert len(notes) == 1 and "cell xnack " in notes[0] and "(3 compared)" in notes[0]
    cells = {c["name"]: c for c in matrix.to_dict()["cells"]}
    assert cells["xnack"]["observed_differences"] == []
    assert cells["clip"]["observed_differences"] == ["config"]
    assert cells["silent"]["observed_differences"] is None


def test_no_effect_note_is_not_given_to_a_cell_whose_kernels_changed() -> None:
    # TRITON_FORCE_DISABLE_FP_FUSION changes no observed setting (its echo is excluded), but
    # with fingerprint_kernels it shows in the compiled kernels: that cell did act.
    def cell(name: str, env: dict[str, str], fingerprints: dict[str, str]) -> Any:
        trials = [
            make_trial(
                0,
                passed=True,
                step_times_ms=[1.0, 1.0],
                observed={**_BASE, **env},
                env_applied=env,
                kernel_fingerprints=fingerprints,
            )
        ]
        return aggregate_cell(name, trials, trials_requested=1)

    fused = {"triton_poi_fused_add_0": "a"}
    unfused = {"triton_poi_fused_add_0": "b"}
    knob = {"TRITON_FORCE_DISABLE_FP_FUSION": "1"}
    matrix = build_matrix(
        [cell("baseline", {}, fused), cell("no_fma", knob, unfused), cell("again", {}, fused)],
        baseline="baseline",
    )
    assert matrix.row("no_fma").observed_differences == ()
    assert matrix.row("no_fma").kernels_changed == ("triton_poi_fused_add_0",)
    notes = [n for n in matrix.notes if n.startswith("no observable effect")]
    assert len(notes) == 1 and "cell again " in notes[0]
