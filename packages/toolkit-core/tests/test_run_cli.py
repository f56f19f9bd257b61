"""`run_cli`: every command's outcomes as exit codes and single lines, never a traceback."""

from __future__ import annotations

import gc

import click
import pytest

from toolkit_core.cli import console_exit, run_cli
from toolkit_core.errors import ExitCode, ToolkitError, UsageError
from toolkit_core.text import one_line


class _OneLineError(UsageError):
    multiline = False


@click.group()
def _cli() -> None:
    """A toy group standing for the tools' commands."""


@_cli.command()
@click.option("--count", type=int, default=1)
def ok(count: int) -> int:
    return ExitCode.OK if count else ExitCode.RUN_FAILED


@_cli.command()
@click.argument("kind")
def fail(kind: str) -> None:
    if kind == "usage":
        raise UsageError("recipe.yaml: cells[0]: bad\nrecipe.yaml: cells[1]: bad too")
    if kind == "one-line":
        raise _OneLineError("value 'a\nb' is bad")
    if kind == "run":
        raise ToolkitError("the run failed")
    if kind == "interrupt":
        raise KeyboardInterrupt
    raise click.Abort


def test_a_command_s_own_return_value_is_its_exit_code() -> None:
    assert run_cli(_cli, ["ok"], "tool") == ExitCode.OK
    assert run_cli(_cli, ["ok", "--count", "0"], "tool") == ExitCode.RUN_FAILED


def test_a_bad_flag_is_one_line_naming_the_help_not_the_usage_block(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert run_cli(_cli, ["ok", "--count", "many"], "tool") == ExitCode.USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("tool: error: ")
    assert "(see tool ok --help)" in err and "Usage:" not in err


def test_usage_errors_print_one_line_per_problem_or_one_line_in_all(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert run_cli(_cli, ["fail", "usage"], "tool") == ExitCode.USAGE
    assert capsys.readouterr().err.splitlines() == [
        "tool: error: recipe.yaml: cells[0]: bad",
        "tool: error: recipe.yaml: cells[1]: bad too",
    ]
    assert run_cli(_cli, ["fail", "one-line"], "tool") == ExitCode.USAGE
    assert capsys.readouterr().err == "tool: error: value 'a\\nb' is bad\n"
    assert run_cli(_cli, ["fail", "run"], "tool") == ExitCode.RUN_FAILED


@pytest.mark.parametrize("kind", ["interrupt", "abort"])
def test_ctrl_c_is_exit_130_and_one_line_without_a_traceback(
    kind: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(_cli, ["fail", kind], "tool") == ExitCode.INTERRUPTED
    # click itself ends the interrupted line first (a bare newline), then ours follows.
    assert capsys.readouterr().err.strip() == "tool: interrupted"


def test_help_exits_zero() -> None:
    assert run_cli(_cli, ["--help"], "tool") == ExitCode.OK


def test_a_long_value_is_cut_in_the_middle() -> None:
    line = one_line("x" * 5000, limit=100)
    assert len(line) < 200 and "characters cut" in line


def test_console_exit_runs_main_then_freezes_the_heap() -> None:
    calls: list[str] = []

    def main() -> int:
        calls.append("main")
        assert gc.get_freeze_count() == 0  # main itself runs with the collector as it was
        return 3

    gc.unfreeze()
    try:
        assert console_exit(main) == 3
        assert calls == ["main"]
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()  # the objects go back to the collector for the tests after this one
