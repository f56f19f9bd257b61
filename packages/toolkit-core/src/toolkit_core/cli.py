"""`run_cli`: the one `main()` of every command of the three tools.

It runs a click group in non-standalone mode and maps every outcome to an `ExitCode`, so the
three commands behave alike: a bad flag is one line naming the command's ``--help`` (not click's
multi-line usage block), a `UsageError` is one line per problem on stderr with exit 2, another
`ToolkitError` exit 1, Ctrl-C a one-word note and exit 130, never a traceback.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import click

from toolkit_core.errors import ExitCode, ToolkitError
from toolkit_core.text import one_line

__all__ = [
    "ExitCode",
    "LazyGroup",
    "console_exit",
    "distribution_version",
    "lazy_exports",
    "run_cli",
    "version_option",
]

F = TypeVar("F", bound=Callable[..., Any])


def distribution_version(name: str) -> str:
    """The installed version of distribution `name`; "0.0.0+unknown" from a bare source tree.

    For a package's lazy ``__version__``: reading the installed distributions' metadata
    (importlib.metadata pulls in email, zipfile, inspect) costs tens of milliseconds, more than
    a command's whole ``--help`` budget allows, so no module does it at import.
    """
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return "0.0.0+unknown"


def version_option(distribution: str, prog_name: str) -> Callable[[F], F]:
    """``-V/--version`` for a command; the version is looked up only when the flag is used."""
    return click.version_option(
        None, "--version", "-V", package_name=distribution, prog_name=prog_name
    )


def run_cli(
    group: click.Command,
    argv: Sequence[str] | None,
    prog_name: str,
    *,
    clean: Callable[[str], str] = one_line,
) -> int:
    """Run `group` on `argv` (None: the process's arguments) and return its exit code.

    Each error line goes through `clean` first (default `one_line`); a tool whose messages
    quote untrusted text passes a stricter one (aorta: no terminal control characters).
    """

    def say(line: str) -> None:
        click.echo(f"{prog_name}: error: {clean(line)}", err=True)

    try:
        result = group.main(
            args=list(argv) if argv is not None else None,
            prog_name=prog_name,
            standalone_mode=False,
        )
    except (KeyboardInterrupt, click.exceptions.Abort):  # Abort: Ctrl-C inside a click prompt
        click.echo(f"{prog_name}: interrupted", err=True)
        return ExitCode.INTERRUPTED
    except click.exceptions.Exit as exc:  # --help, --version
        return exc.exit_code
    except click.ClickException as exc:  # a bad flag or value: one line, not the usage block
        ctx = exc.ctx if isinstance(exc, click.UsageError) else None
        hint = f" (see {ctx.command_path} --help)" if ctx else ""
        say(f"{exc.format_message()}{hint}")
        return ExitCode.USAGE
    except ToolkitError as exc:
        if exc.multiline:  # several problems (a recipe with many mistakes): one line each
            for line in str(exc).splitlines() or [""]:
                say(line)
        else:
            say(str(exc))
        return exc.exit_code
    return result if isinstance(result, int) else ExitCode.OK


def console_exit(main: Callable[[], int]) -> int:
    """Run a console script's `main`, then freeze every object before the process exits.

    `gc.freeze` spares the interpreter's final collection a walk over every object the imports
    and the run made (a process about to end need not free its cycles; the OS takes the memory
    back): ~33-38 M instructions of a dry run or a one-trial triage. Objects in such cycles are
    then not finalized at exit, which CPython does not promise either; streams are still
    flushed and atexit hooks still run. In-process callers (tests, library users) call `main`
    itself, which leaves the collector alone.
    """
    import gc

    code = main()
    gc.freeze()
    return code


def lazy_exports(package: str, exports: dict[str, str]) -> Callable[[str], Any]:
    """A module `__getattr__` (PEP 562) that imports `exports[name]` (a module) on first use.

    For packages whose ``__init__`` re-exports from submodules: importing the package (which
    every submodule import does) then costs nothing, and a command's ``--help`` pays only for
    what it uses.
    """

    def getattr_(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        import importlib

        return getattr(importlib.import_module(module), name)

    return getattr_


class LazyGroup(click.Group):
    """A click group whose `lazy` subcommands (name -> ``"module:attribute"``) load on first use.

    A command's module, with what it imports, is imported only when that command runs or a
    listing (``--help``) names it, so the other commands do not pay for it at start-up.
    """

    def __init__(self, *args: Any, lazy: Mapping[str, str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = dict(lazy or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        """Every command's name, the lazy ones included, sorted as click sorts them."""
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """The command `cmd_name`, importing its module first when it is a lazy one."""
        target = self.lazy.pop(cmd_name, None)
        if target is not None:
            import importlib

            module, _, attribute = target.partition(":")
            self.add_command(getattr(importlib.import_module(module), attribute), cmd_name)
        return super().get_command(ctx, cmd_name)
