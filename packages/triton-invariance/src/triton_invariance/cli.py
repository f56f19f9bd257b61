"""The `triton-invariance` command (skeleton: the subcommands arrive with the invariance issue)."""

from __future__ import annotations

import click

from triton_invariance import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", "-V", prog_name="triton-invariance")
def cli() -> None:
    """Numerical-invariance fingerprints of compiled Triton kernels.

    Fingerprint the TTGIR of every compiled kernel variant, store the autotuner winner's
    fingerprint as a baseline and fail when a later compile differs.
    """


def main() -> None:
    """Run the CLI; Click exits with 0 on success and 2 on a usage error."""
    cli.main(prog_name="triton-invariance")


if __name__ == "__main__":
    main()
