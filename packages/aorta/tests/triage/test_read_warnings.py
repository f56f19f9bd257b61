"""A trial's read warnings (unreadable values, no loss read) reach the matrix's warnings."""

from __future__ import annotations

from aorta_testing import make_trial

from aorta.runner.models import TrialResult
from aorta.triage.analysis.cells import aggregate_cell
from aorta.triage.analysis.matrix import build_matrix

UNREADABLE = (
    "3 loss/grad-norm value(s) could not be read as numbers and count as unknown, not as "
    "non-finite (first: 'step 1 loss: 4.45.12')"
)


def test_each_distinct_read_warning_is_stated_once_per_cell_with_its_trials() -> None:
    def trial(trial_id: int, warnings: list[str]) -> TrialResult:
        return make_trial(
            trial_id, passed=True, step_times_ms=[10.0], command={"warnings": warnings}
        )

    base = aggregate_cell(
        "baseline", [trial(0, [UNREADABLE]), trial(1, []), trial(2, [UNREADABLE])],
        trials_requested=3,
    )  # fmt: skip
    other = aggregate_cell("clip", [trial(0, []), trial(1, [])], trials_requested=2)
    # An in-tree workload's trial (no command record) has none.
    plain = aggregate_cell(
        "fsdp", [make_trial(0, passed=True, step_times_ms=[10.0])], trials_requested=1
    )
    matrix = build_matrix([base, other, plain], baseline="baseline", bootstrap_resamples=50)
    read = [w for w in matrix.warnings if "could not be read" in w]
    assert read == [f"cell baseline, trial(s) 0, 2: {UNREADABLE}"]
    assert not [w for w in matrix.warnings if w.startswith(("cell clip,", "cell fsdp,"))]
