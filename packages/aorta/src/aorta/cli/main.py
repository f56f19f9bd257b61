"""Entry point of the `aorta` command.

Exit codes: 0 ok, 1 the run failed (e.g. a trial failed), 2 usage or configuration error,
130 interrupted. User mistakes are one line on stderr, never a traceback. Nothing imported
here may import torch or triton: `aorta --help` must stay fast.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import click

from aorta import __version__
from aorta.cli.env import env_group
from aorta.cli.run import run_command
from aorta.cli.triage import triage_group
from aorta.errors import AortaError, AortaUsageError
from aorta.text_safety import terminal_text

EXIT_OK = 0
EXIT_RUN_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", "-V", prog_name="aorta")
def cli() -> None:
    """Triage numerical failures in GPU training.

    Run a workload under mitigations and environments, count failures and step times.
    """


cli.add_command(run_command)
cli.add_command(env_group)
cli.add_command(triage_group)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI and map outcomes to exit codes (see module docstring)."""
    try:
        result = cli.main(args=list(argv) if argv is not None else None, standalone_mode=False)
    except (KeyboardInterrupt, click.exceptions.Abort):  # Abort: Ctrl-C inside a click prompt
        click.echo("aorta: interrupted", err=True)
        return EXIT_INTERRUPTED
    except click.exceptions.Exit as exc:  # --help, --version
        return exc.exit_code
    except click.ClickException as exc:  # a bad flag or value: one line, not click's usage block
        ctx = exc.ctx if isinstance(exc, click.UsageError) else None
        hint = f" (see {ctx.command_path} --help)" if ctx else ""
        message = terminal_text(exc.format_message())
        click.echo(f"aorta: error: {message}{hint}", err=True)
        return EXIT_USAGE
    except AortaUsageError as exc:
        # Several problems (a recipe with many mistakes) come one per line, each prefixed.
        for line in str(exc).splitlines() or [""]:
            click.echo(f"aorta: error: {terminal_text(line)}", err=True)
        return EXIT_USAGE
    except AortaError as exc:  # the run could not happen (e.g. environment unavailable)
        click.echo(f"aorta: error: {terminal_text(str(exc))}", err=True)
        return EXIT_RUN_FAILED
    return result if isinstance(result, int) else EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
