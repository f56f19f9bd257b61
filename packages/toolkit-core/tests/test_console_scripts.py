"""Each tool's console script is its `console_main`: the tool's own `main` run through
`toolkit_core.cli.console_exit`, which freezes the heap before exit (issue 26; the freeze itself
is tested in test_run_cli.py). The tools are found through their installed entry points, so
toolkit-core's code still imports none of them."""

from __future__ import annotations

import importlib.metadata
import sys
from collections.abc import Callable

import pytest

# Console script name -> a line its --help prints.
HELP_LINES = {
    "aorta": "Triage numerical failures",
    "oellm-autoexp": "Usage: oellm-autoexp",
    "triton-invariance": "Usage: triton-invariance",
}


@pytest.mark.parametrize("name", sorted(HELP_LINES))
def test_the_console_script_runs_its_tools_main_through_console_exit(
    name: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (script,) = importlib.metadata.entry_points(group="console_scripts", name=name)
    assert script.attr == "console_main"
    console_main = script.load()
    # The module that defines it (a package may re-export it, as `oellm_autoexp.cli` does).
    module = sys.modules[console_main.__module__]
    ran: list[Callable[[], int]] = []

    def console_exit(given: Callable[[], int]) -> int:
        ran.append(given)
        return given()

    monkeypatch.setattr(module, "console_exit", console_exit)
    monkeypatch.setattr("sys.argv", [name, "--help"])
    assert console_main() == 0
    assert ran == [module.main]
    assert HELP_LINES[name] in capsys.readouterr().out
