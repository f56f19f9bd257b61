"""The seed variables every trial gets (`aorta.runner.environ`)."""

from __future__ import annotations

from aorta.runner.environ import seed_env, with_seed


def test_both_variables_carry_the_trial_seed() -> None:
    assert seed_env(5) == {"AORTA_SEED": "5", "PYTHONHASHSEED": "5"}


def test_pythonhashseed_stays_in_the_range_python_accepts() -> None:
    # Outside 0..2**32-1 the interpreter would refuse to start.
    assert seed_env(2**32 + 3) == {"AORTA_SEED": str(2**32 + 3), "PYTHONHASHSEED": "3"}
    assert seed_env(-1)["PYTHONHASHSEED"] == str(2**32 - 1)


def test_a_cells_own_setting_wins_over_the_seed() -> None:
    cell = {"PYTHONHASHSEED": "0", "AORTA_FIX": "1"}
    assert with_seed(cell, 7) == {"AORTA_SEED": "7", "PYTHONHASHSEED": "0", "AORTA_FIX": "1"}
    assert cell == {"PYTHONHASHSEED": "0", "AORTA_FIX": "1"}  # not modified
