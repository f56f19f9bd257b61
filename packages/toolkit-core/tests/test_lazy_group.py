"""`LazyGroup`: a subcommand's module is imported when the command runs or a listing names it."""

from __future__ import annotations

import sys
from pathlib import Path

import click
import pytest

from toolkit_core.cli import LazyGroup, run_cli

MODULE = "toolkit_lazy_group_probe"


@pytest.fixture
def probe_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A module defining a `greet` command, importable but not yet imported."""
    (tmp_path / f"{MODULE}.py").write_text(
        "import click\n\n"
        "@click.command('greet')\n"
        "def greet() -> int:\n"
        "    '''Say hello.'''\n"
        "    click.echo('hello')\n"
        "    return 0\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, MODULE, raising=False)
    return MODULE


def _group(module: str) -> click.Group:
    @click.group(cls=LazyGroup, lazy={"greet": f"{module}:greet"})
    def tool() -> None:
        """A toy tool."""

    @tool.command()
    def eager() -> int:
        """Defined in place."""
        return 0

    return tool


def test_another_command_does_not_import_the_lazy_one(probe_module: str) -> None:
    assert run_cli(_group(probe_module), ["eager"], "tool") == 0
    assert probe_module not in sys.modules


def test_the_lazy_command_runs_and_help_lists_it_in_order(
    probe_module: str, capsys: pytest.CaptureFixture[str]
) -> None:
    tool = _group(probe_module)
    assert run_cli(tool, ["greet"], "tool") == 0
    assert capsys.readouterr().out == "hello\n"
    assert run_cli(_group(probe_module), ["--help"], "tool") == 0
    listing = capsys.readouterr().out.split("Commands:")[1].split()
    assert listing == ["eager", "Defined", "in", "place.", "greet", "Say", "hello."]
