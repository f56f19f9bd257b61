"""The `oellm-autoexp` command (skeleton: plan/submit/monitor arrive with the autoexp issues)."""

from __future__ import annotations

import sys

import click

from oellm_autoexp import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", "-V", prog_name="oellm-autoexp")
def cli() -> None:
    """One YAML config to SLURM job arrays.

    Expand a sweep, render SBATCH scripts, submit them, monitor the jobs and restart them by
    policy, with resumable session state. SLURM does the scheduling.
    """


def main() -> int:
    """Run the CLI; returns the exit code (0 ok, 2 usage error)."""
    return cli.main(standalone_mode=True)  # type: ignore[no-any-return]


if __name__ == "__main__":
    sys.exit(main())
