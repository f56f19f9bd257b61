"""The `triton-invariance` command: inspect and check committed baselines.

Exit codes (`toolkit_core.errors.ExitCode`): 0 ok, 1 a check failed (mismatch, missing baseline;
`diff`: the files differ), 2 usage error or an unusable baseline file (one line naming the file
and the problem), 130 interrupted (Ctrl-C: one line, no traceback).
None of these commands imports Triton: they read JSON.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import click

from toolkit_core.cli import run_cli, version_option
from toolkit_core.errors import ExitCode
from triton_invariance.errors import BaselineError, InvarianceUsageError
from triton_invariance.storage import (
    BASELINE_DIR_ENV,
    Baseline,
    get_baselines_dir,
    list_baselines,
    read_baseline_file,
)

EXIT_OK = ExitCode.OK
EXIT_FAILED = ExitCode.RUN_FAILED
EXIT_USAGE = ExitCode.USAGE

_DIR_OPTION = click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help=f"Baseline directory [default: ${BASELINE_DIR_ENV} or ./baselines/numerical_invariance].",
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@version_option("triton-invariance", "triton-invariance")
def cli() -> None:
    """Numerical-invariance fingerprints of compiled Triton kernels.

    Fingerprint the TTGIR of every compiled kernel variant, store the autotuner winner's
    fingerprint as a baseline and fail when a later compile differs.
    """


def _resolve(ref: str, directory: Path | None) -> list[Path]:
    """A baseline reference: a file path, a `kernel_sighash` stem or a kernel name."""
    as_path = Path(ref)
    if as_path.suffix == ".json" or as_path.exists():
        return [as_path]
    base = get_baselines_dir(directory)
    paths = list_baselines(base)
    exact = [p for p in paths if p.stem == ref]
    if exact:
        return exact
    by_kernel = [p for p in paths if p.stem.rsplit("_", 1)[0] == ref]
    if by_kernel:
        return by_kernel
    known = sorted({p.stem.rsplit("_", 1)[0] for p in paths})
    listing = ", ".join(known) if known else "none"
    raise InvarianceUsageError(f"no baseline for {ref!r} in {base} (kernels there: {listing})")


def _summary(b: Baseline) -> str:
    config = ", ".join(f"{k}={v}" for k, v in {**b.specialization, **b.config}.items())
    return (
        f"{b.kernel_name}_{b.signature_hash}  fingerprint {b.invariance.fingerprint[:16]}  "
        f"target {b.invariance.hw_config.target}  [{config}]"
    )


@cli.command("list")
@_DIR_OPTION
def list_command(directory: Path | None) -> int:
    """List the committed baselines (exit 2 after the list when a file is unusable)."""
    base = get_baselines_dir(directory)
    paths = list_baselines(base)
    if not paths:
        click.echo(f"no baselines in {base}")
        return EXIT_OK
    unusable = 0
    for path in paths:
        try:
            click.echo(_summary(read_baseline_file(path)))
        except BaselineError as exc:
            # One bad file must not hide the good ones: list them all, then fail.
            unusable += 1
            click.echo(f"triton-invariance: error: {exc}", err=True)
    if unusable:
        click.echo(
            f"triton-invariance: {unusable} of {len(paths)} baseline files in {base} are unusable",
            err=True,
        )
        return EXIT_USAGE
    return EXIT_OK


@cli.command("show")
@click.argument("kernel")
@_DIR_OPTION
def show_command(kernel: str, directory: Path | None) -> None:
    """Show every component of a baseline (KERNEL: name, name_sighash or file)."""
    for path in _resolve(kernel, directory):
        b = read_baseline_file(path)
        inv = b.invariance
        click.echo(f"{path}")
        click.echo(f"  kernel            {b.kernel_name}")
        click.echo(f"  signature_hash    {b.signature_hash}")
        click.echo(f"  config_hash       {b.config_hash}")
        for key, value in b.config.items():
            click.echo(f"    {key:<16} {value}")
        if b.specialization:
            click.echo("  specialization")
            for key, value in b.specialization.items():
                click.echo(f"    {key:<16} {value}")
        click.echo(f"  fingerprint       {inv.fingerprint}")
        for name, digest in inv.component_hashes().items():
            label = name if name.endswith("_hash") else f"{name}_hash"
            click.echo(f"  {label:<22} {digest}")
        click.echo(f"  dtype_signature   {inv.dtype_signature}")
        for key, value in inv.hw_config.to_dict().items():
            click.echo(f"  hw.{key:<14} {value}")
        if inv.compile_options is None:
            click.echo("  compile options   not recorded")
        for key, value in inv.compile_options or ():
            click.echo(f"  option.{key:<30} {value}")
        for key, value in inv.compile_env:
            click.echo(f"  env.{key:<33} {value}")
        click.echo(f"  ops ({len(inv.ops)}):")
        for i, (op, refs) in enumerate(zip(inv.ops, inv.op_layouts, strict=True)):
            suffix = f"  [{refs}]" if refs else ""
            click.echo(f"    {i:>4} {op}{suffix}")
        click.echo(f"  layouts ({len(inv.layouts)}):")
        for i, layout in enumerate(inv.layouts):
            click.echo(f"    #{i} {layout}")


def _single(ref: str, directory: Path | None) -> Path:
    paths = _resolve(ref, directory)
    if len(paths) > 1:
        names = ", ".join(p.stem for p in paths)
        raise InvarianceUsageError(f"{ref!r} matches several baselines ({names}); name one")
    return paths[0]


@cli.command("diff")
@click.argument("a")
@click.argument("b")
@_DIR_OPTION
def diff_command(a: str, b: str, directory: Path | None) -> int:
    """Compare two baselines (A is "before"); exit 1 when they differ."""
    before = read_baseline_file(_single(a, directory))
    after = read_baseline_file(_single(b, directory))
    click.echo(before.invariance.diff_report(after.invariance))
    if before.config_hash != after.config_hash:
        click.echo(f"  config: {dict(before.config)} -> {dict(after.config)}")
    return EXIT_OK if before.invariance.matches(after.invariance) else EXIT_FAILED


@cli.command("check")
@click.argument("current", type=click.Path(file_okay=False, path_type=Path))
@_DIR_OPTION
@click.option(
    "--strict",
    is_flag=True,
    help="Also fail when a committed baseline has no current fingerprint (a kernel that "
    "disappeared or was not compiled).",
)
def check_command(current: Path, directory: Path | None, strict: bool) -> int:
    """Check the fingerprints in CURRENT against the baselines (for CI).

    CURRENT is a directory written by a run with TRITON_INVARIANCE_COMMIT=1 and
    TRITON_INVARIANCE_BASELINE_DIR=CURRENT. Every file there must have a baseline with the
    same name and the same fingerprint; exit 1 (with the diff reports) otherwise. A baseline
    with no current counterpart is reported (a warning; a failure under --strict).
    """
    if not current.is_dir():
        raise InvarianceUsageError(f"{current}: no such directory of current fingerprints")
    base = get_baselines_dir(directory)
    paths = list_baselines(current)
    if not paths:
        raise InvarianceUsageError(f"{current}: holds no fingerprint files (*.json)")
    failures = 0
    for path in paths:
        now = read_baseline_file(path)
        baseline_file = base / path.name
        if not baseline_file.exists():
            failures += 1
            click.echo(f"MISSING {path.stem}: no baseline {baseline_file}")
            continue
        then = read_baseline_file(baseline_file)
        if then.invariance.matches(now.invariance):
            click.echo(f"ok      {path.stem}")
            for note in then.invariance.comparison_notes(now.invariance):
                click.echo(f"        {note}")
            continue
        failures += 1
        click.echo(f"MISMATCH {path.stem} (baseline {baseline_file})")
        click.echo(then.invariance.diff_report(now.invariance))
        if then.config_hash != now.config_hash:
            click.echo(f"  config: {dict(then.config)} -> {dict(now.config)}")
    current_names = {p.name for p in paths}
    gone = [p for p in list_baselines(base) if p.name not in current_names]
    label = "GONE   " if strict else "warning:"
    for path in gone:
        click.echo(f"{label} {path.stem}: committed baseline {path} has no current fingerprint")
    failed = failures > 0 or (strict and bool(gone))
    summary = f"check {'FAILED' if failed else 'passed'}: {len(paths) - failures}/{len(paths)} "
    summary += f"kernels match {base}"
    if gone:
        summary += f"; {len(gone)} committed baseline(s) not seen in {current}"
    click.echo(summary)
    return EXIT_FAILED if failed else EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI and map outcomes to exit codes (`toolkit_core.cli.run_cli`)."""
    return run_cli(cli, argv, "triton-invariance")


if __name__ == "__main__":
    sys.exit(main())
