"""Entry point of the `aorta` command.

Exit codes (`toolkit_core.errors.ExitCode`): 0 ok, 1 the run failed (e.g. a trial failed),
2 usage or configuration error, 130 interrupted. User mistakes are one line on stderr, never a
traceback. Nothing imported here may import torch or triton: `aorta --help` must stay fast.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import click

from aorta.cli.env import env_group
from aorta.cli.run import run_command
from aorta.cli.triage import triage_group
from aorta.text_safety import terminal_text
from toolkit_core.cli import console_exit, run_cli, version_option
from toolkit_core.text import shorten


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@version_option("aorta", "aorta")
def cli() -> None:
    """Triage numerical failures in GPU training.

    Run a workload under mitigations and environments, count failures and step times.
    """


cli.add_command(run_command)
cli.add_command(env_group)
cli.add_command(triage_group)


def _clean(text: str) -> str:
    # Errors quote file names and log text: no control characters or bidi overrides reach
    # the terminal (`text_safety`), and a huge value is cut.
    return shorten(terminal_text(text))


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI and map outcomes to exit codes (`toolkit_core.cli.run_cli`)."""
    return run_cli(cli, argv, "aorta", clean=_clean)


def console_main() -> int:
    """The `aorta` console script: `main`, then exit without a final walk of every object."""
    return console_exit(main)


if __name__ == "__main__":
    sys.exit(console_main())
