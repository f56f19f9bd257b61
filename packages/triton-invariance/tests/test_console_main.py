"""The `triton-invariance` console script is `console_main`: `main`, then `gc.freeze()` so the
interpreter's final collection does not walk every object again (issue 26)."""

from __future__ import annotations

import gc
import importlib.metadata

import pytest

from triton_invariance.cli import console_main


def test_the_console_script_is_console_main() -> None:
    (script,) = importlib.metadata.entry_points(group="console_scripts", name="triton-invariance")
    assert script.value == "triton_invariance.cli:console_main"


def test_console_main_runs_main_then_freezes_the_heap(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.argv", ["triton-invariance", "--help"])
    gc.unfreeze()
    try:
        assert console_main() == 0
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()  # the objects go back to the collector for the tests after this one
    assert "Usage: triton-invariance" in capsys.readouterr().out
