"""The `oellm-autoexp` command (skeleton: plan/submit/monitor arrive with the autoexp issues)."""

from __future__ import annotations

import click

from oellm_autoexp import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", "-V", prog_name="oellm-autoexp")
def cli() -> None:
    """One YAML config to SLURM job arrays.

    Expand a sweep, render SBATCH scripts, submit them, monitor the jobs and restart them by
    policy, with resumable session state. SLURM does the scheduling.
    """


def main() -> None:
    """Run the CLI; Click exits with 0 on success and 2 on a usage error."""
    cli.main(prog_name="oellm-autoexp")


if __name__ == "__main__":
    main()
