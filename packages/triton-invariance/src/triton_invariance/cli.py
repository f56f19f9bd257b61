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

from toolkit_core.cli import console_exit, run_cli, version_option
from toolkit_core.errors import ExitCode
from triton_invariance.data import InvarianceData
from triton_invariance.errors import BaselineError, InvarianceUsageError
from triton_invariance.nearest import nearest_baseline
from triton_invariance.storage import (
    BASELINE_DIR_ENV,
    Baseline,
    family_baselines,
    find_baseline,
    get_baselines_dir,
    list_baselines,
    read_baseline_file,
    recorded_fallbacks,
    usable_baselines,
)
from triton_invariance.trust import ALLOW_ENV, ALLOW_FLAG, refuse_shared_baselines
from triton_invariance.verdict import identical_code_note

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
        _echo_fingerprint(inv, "not recorded")
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
    """Compare two baselines, or two TTGIR files (A is "before"); exit 1 when they differ.

    A and B are baseline references (name, name_sighash or .json file) or TTGIR dumps
    (`.ttgir` / `.mlir`, custom or generic syntax), fingerprinted on the spot.
    """
    if _is_ir(a) and _is_ir(b):
        then, now = _fingerprint_file(Path(a), None), _fingerprint_file(Path(b), None)
        click.echo(then.diff_report(now))
        return EXIT_OK if then.matches(now) else EXIT_FAILED
    before = read_baseline_file(_single(a, directory))
    after = read_baseline_file(_single(b, directory))
    click.echo(before.invariance.diff_report(after.invariance))
    if before.config_hash != after.config_hash:
        click.echo(f"  config: {dict(before.config)} -> {dict(after.config)}")
    return EXIT_OK if before.invariance.matches(after.invariance) else EXIT_FAILED


_IR_SUFFIXES = (".ttgir", ".mlir")


def _is_ir(ref: str) -> bool:
    return ref.endswith(_IR_SUFFIXES)


def _fingerprint_file(path: Path, options_json: Path | None) -> InvarianceData:
    """Fingerprint a TTGIR file; `options_json` is a compiled kernel's metadata (Triton's
    cache `<kernel>.json`), for the compile-options component."""
    import dataclasses
    import json

    from triton_invariance.fingerprint import InvalidTTGIRError, compute_invariance

    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvarianceUsageError(f"{path}: cannot read ({exc})") from None
    metadata = None
    if options_json is not None:
        try:
            metadata = json.loads(options_json.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise InvarianceUsageError(
                f"{options_json}: not a readable JSON file ({exc})"
            ) from None
        if not isinstance(metadata, dict):
            raise InvarianceUsageError(f"{options_json}: expected a JSON object of compile options")
    try:
        inv = compute_invariance(text, metadata=metadata)
    except InvalidTTGIRError as exc:
        raise InvarianceUsageError(f"{path}: {exc}") from None
    # This shell's TRITON_* variables say nothing about how the dump was compiled.
    return dataclasses.replace(inv, compile_env=())


@cli.command("fingerprint")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--options-json",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="The kernel's compile metadata (Triton's cache <kernel>.json) for the options "
    "component [default: not recorded].",
)
def fingerprint_command(file: Path, options_json: Path | None) -> None:
    """Print the fingerprint and its components of a TTGIR file (custom or generic syntax)."""
    inv = _fingerprint_file(file, options_json)
    click.echo(f"{file}")
    click.echo(f"  kernel            {inv.kernel_name}")
    _echo_fingerprint(inv, "not recorded (give --options-json)")


def _echo_fingerprint(inv: InvarianceData, no_options: str) -> None:
    """The fingerprint, its component hashes, dtype signature and hardware config of `inv`
    (`no_options`: what to say when its compile options were not recorded)."""
    click.echo(f"  fingerprint       {inv.fingerprint}")
    for name, digest in inv.component_hashes().items():
        label = name if name.endswith("_hash") else f"{name}_hash"
        click.echo(f"  {label:<22} {digest}")
    click.echo(f"  dtype_signature   {inv.dtype_signature}")
    for key, value in inv.hw_config.to_dict().items():
        click.echo(f"  hw.{key:<14} {value}")
    if inv.compile_options is None:
        click.echo(f"  compile options   {no_options}")


def _check_file(path: Path, base: Path) -> tuple[bool, str | None]:
    """Check one current fingerprint file; (failed, the baseline file name it was compared
    with, if any)."""
    now = read_baseline_file(path)
    baseline_file = base / path.name
    family = now.recorded.get("family")
    if not baseline_file.exists() and isinstance(family, str):
        others = family_baselines(now.kernel_name, family, base)
        if others:
            key = now.recorded.get("autotune_key") or {}
            shown = ", ".join(f"{k}={v}" for k, v in key.items())
            click.echo(
                f"new     {path.stem}: new autotune key ({shown}); {len(others)} other "
                f"key(s) of this signature committed"
            )
            return False, None
    # The hooks' lookup: a baseline filed under an older key is read, with a note.
    found = find_baseline(now.kernel_name, now.signature_hash, recorded_fallbacks(now), base)
    if found is None:
        click.echo(f"MISSING {path.stem}: no baseline {baseline_file}")
        near = nearest_baseline(
            now.invariance, now.config, now.specialization, usable_baselines(list_baselines(base))
        )
        if near is not None:
            click.echo(f"  {near.describe()}")
            click.echo(near.baseline.invariance.diff_report(now.invariance))
        return True, None
    then = found.baseline
    same_code = identical_code_note(
        then.invariance,
        then.recorded.get("asm_digest"),
        now.invariance,
        now.recorded.get("asm_digest"),
    )
    notes = [found.note] if found.note else []
    if then.invariance.matches(now.invariance) or same_code is not None:
        click.echo(f"ok      {path.stem}")
        notes += then.invariance.comparison_notes(now.invariance)
        for note in notes + ([same_code] if same_code else []):
            click.echo(f"        {note}")
        return False, found.path.name
    click.echo(f"MISMATCH {path.stem} (baseline {found.path})")
    for note in notes:
        click.echo(f"        {note}")
    click.echo(then.invariance.diff_report(now.invariance))
    if then.config_hash != now.config_hash:
        click.echo(f"  config: {dict(then.config)} -> {dict(now.config)}")
    return True, found.path.name


@cli.command("check")
@click.argument("current", type=click.Path(file_okay=False, path_type=Path))
@_DIR_OPTION
@click.option(
    "--strict",
    is_flag=True,
    help="Also fail when a committed baseline has no current fingerprint (a kernel that "
    "disappeared or was not compiled).",
)
@click.option(
    ALLOW_FLAG,
    "allow_shared_writable",
    is_flag=True,
    help="Compare against baselines another user owns or group/others can write "
    f"(as {ALLOW_ENV}=1; see docs/security.md).",
)
def check_command(
    current: Path, directory: Path | None, strict: bool, allow_shared_writable: bool
) -> int:
    """Check the fingerprints in CURRENT against the baselines (for CI).

    CURRENT is a directory written by a run with TRITON_INVARIANCE_COMMIT=1 and
    TRITON_INVARIANCE_BASELINE_DIR=CURRENT. Every file there must have a baseline with the
    same name and the same fingerprint; exit 1 (with the diff reports) otherwise. A winner for an
    autotune key with no baseline while other keys of its signature have one is `new` (not a
    failure). A baseline filed under an older key (one file for every autotune key, or keyed by
    argument names) is compared as the hooks compare it, with a note on how to re-key it. A
    baseline with no current counterpart is reported (a warning; a failure under --strict).
    """
    if not current.is_dir():
        raise InvarianceUsageError(f"{current}: no such directory of current fingerprints")
    base = get_baselines_dir(directory)
    paths = list_baselines(current)
    if not paths:
        raise InvarianceUsageError(f"{current}: holds no fingerprint files (*.json)")
    if allow_shared_writable:
        click.echo(f"triton-invariance: {ALLOW_FLAG}: ownership of {base} not checked", err=True)
    else:
        refuse_shared_baselines(base, list_baselines(base))
    failures = 0
    used: set[str] = set()  # baseline files a current fingerprint was compared with
    for path in paths:
        failed_one, baseline_name = _check_file(path, base)
        failures += failed_one
        if baseline_name is not None:
            used.add(baseline_name)
    current_names = {p.name for p in paths} | used
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


@cli.command("rekey")
@click.argument("current", type=click.Path(file_okay=False, path_type=Path))
@_DIR_OPTION
@click.option("--write", is_flag=True, help="Write the re-keyed files [default: only list them].")
@click.option(
    "--remove-old",
    is_flag=True,
    help="With --write: delete each old file once every file re-keyed from it is written "
    "[default: keep them].",
)
def rekey_command(current: Path, directory: Path | None, write: bool, remove_old: bool) -> int:
    """File baselines committed under an older key under the key compiles use now.

    CURRENT is a directory a TRITON_INVARIANCE_COMMIT=1 run wrote (as for `check`): its files
    name the new keys and the old keys they replace (an old file holds neither the argument
    types nor the autotune key its new name is made of). Lists what it would write; --write
    writes each file atomically, never over an existing (newer) baseline, and keeps the old
    files unless --remove-old. The committed fingerprints are kept, not the current run's.
    """
    from triton_invariance.rekey import plan_rekeys
    from triton_invariance.storage import write_new_baseline

    if remove_old and not write:
        raise InvarianceUsageError("--remove-old deletes files; it needs --write")
    if not current.is_dir():
        raise InvarianceUsageError(f"{current}: no such directory of current fingerprints")
    base = get_baselines_dir(directory)
    current_files = list_baselines(current)
    plan = plan_rekeys([read_baseline_file(p) for p in current_files], base)
    if not plan.writes and not plan.superseded:
        click.echo(f"rekey: nothing to re-key in {base}")
        return EXIT_OK
    verb = "wrote" if write else "would write"
    left: dict[Path, int] = {}  # old file -> files re-keyed from it that are not written
    for item in plan.writes:
        # A dry run counts each file as written, to list the old files a --write would free.
        written = write_new_baseline(item.baseline, base) if write else True
        left[item.source] = left.get(item.source, 0) + (0 if written else 1)
        if not written:
            click.echo(f"kept    {item.target.name}: a baseline is already there (not replaced)")
            continue
        click.echo(f"{verb} {item.target.name} from {item.source.name} ({item.why})")
    names = {p.name for p in current_files}
    done = {old for old, n in left.items() if n == 0 and old.name not in names}
    old_files = sorted(done | set(plan.superseded))
    if not write:
        click.echo(
            f"rekey (dry run): {len(plan.writes)} file(s) to write, {len(old_files)} old "
            f"file(s) to delete in {base}; run with --write (and --remove-old)"
        )
    elif remove_old:
        for old in old_files:
            old.unlink(missing_ok=True)
            click.echo(f"removed {old.name}")
    elif old_files:
        shown = ", ".join(p.name for p in old_files)
        click.echo(f"old files kept: {shown} (delete them, or rerun with --remove-old)")
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI and map outcomes to exit codes (`toolkit_core.cli.run_cli`)."""
    return run_cli(cli, argv, "triton-invariance")


def console_main() -> int:
    """The `triton-invariance` console script: `main`, then exit without a final walk of every
    object (`toolkit_core.cli.console_exit`)."""
    return console_exit(main)


if __name__ == "__main__":
    sys.exit(console_main())
