"""Per-cell summaries of where failures start (first failure step, first non-finite module)."""

from __future__ import annotations

import pytest

from aorta.triage.analysis.onset import location_summary, onset_summary


@pytest.mark.parametrize(
    ("steps", "expected"),
    [
        ([], None),
        ([4], "step 4"),
        ([4, 4, 4], "step 4, 3 trials"),
        ([6, 3, 4, 5], "steps 3\u20136, median 4.5"),
        ([3, 6, 4], "steps 3\u20136, median 4"),
        ([3, None, 6, 4], "steps 3\u20136, median 4; 1 of 4 at an unknown step"),
        ([None, None], "step unknown (2 of 2)"),
    ],
)
def test_onset_summary(steps: list[int | None], expected: str | None) -> None:
    assert onset_summary(steps) == expected


def _at(module: str, phase: str = "backward") -> dict[str, object]:
    return {"located": True, "step": 3, "module": module, "phase": phase, "tensor": "grad"}


def test_location_summary_names_the_most_common_location_and_its_share() -> None:
    records = [_at("layers.1.mlp.fc2"), _at("layers.1.mlp.fc2"), _at("head"), None]
    assert location_summary(records) == "layers.1.mlp.fc2 backward, 2 of 3"


def test_a_located_trial_outranks_more_numerous_unlocated_ones() -> None:
    nothing = {"located": False, "reason": "no torch"}
    assert location_summary([nothing, nothing, _at("head", "forward")]) == "head forward, 1 of 3"
    assert location_summary([nothing, nothing]) == "not located (no torch), 2 of 2"
    assert location_summary([None, None]) is None


def test_ties_are_broken_by_name() -> None:
    assert location_summary([_at("b"), _at("a")]) == "a backward, 1 of 2"
