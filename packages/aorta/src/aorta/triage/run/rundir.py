"""A triage run directory on disk: its recipe as executed, its trials, its matrix files.

The lifecycle's operations on a run directory (`aorta.triage.layout.RunDir` says where each
file lies): the recipe read back from `recipe.resolved.yaml` (so today's registry plays no
part in a resume or a re-analysis), the trials on disk, the probes' partial scopes, the lock,
and the archive that keeps a replaced matrix under `previous/<timestamp>/`.
"""

from __future__ import annotations

import contextlib
import os
import shlex
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from aorta.atomic import create_run_dir, write_text_atomic
from aorta.errors import AortaUsageError, OutputWriteError
from aorta.runner.models import TrialResult
from aorta.triage.layout import MATRIX_NAMES, RESOLVED_NAME, RunDir
from aorta.triage.recipe import Cell, Recipe, dump_resolved_yaml, recipe_from_resolved
from aorta.triage.recipe.signature import recipe_digest, sign_run_recipe
from aorta.triage.recipe.text import parse_recipe_text, read_regular_file
from aorta.triage.run.inflight import busy_message
from toolkit_core.locks import LockBusyError, hold_lock
from toolkit_core.timestamps import dir_stamp


def load_file(path: Path) -> Any:
    """A JSON or YAML file of a run directory; unreadable -> one-line `AortaUsageError`.

    Read with the recipe loader's guards (regular files only, size, nesting, aliases): a run
    directory received from someone else is as untrusted as a recipe.
    """
    return _parse_run_file(path, read_regular_file(str(path), path, what="run file"))


def _parse_run_file(path: Path, raw: bytes) -> Any:
    label = f"{path}: cannot read it as a triage run file"
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise AortaUsageError(f"{label}: expected UTF-8 text ({exc.reason})") from None
    return parse_recipe_text(label, text, json_format=path.suffix == ".json")


def load_mapping(path: Path) -> dict[str, Any]:
    """`load_file` for files whose top level must be a mapping (valid JSON of another type is
    refused in one line, not a traceback further on)."""
    data = load_file(path)
    if not isinstance(data, dict):
        kind = type(data).__name__
        raise AortaUsageError(f"{path}: <top>: expected a mapping, got a {kind}")
    return data


def load_run_recipe(
    run_dir: Path, *, threshold: float | None = None, alpha: float | None = None
) -> Recipe:
    """The recipe `run_dir` executed; `AortaUsageError` if `run_dir` is not a triage run."""
    return read_run_recipe(run_dir, threshold=threshold, alpha=alpha)[0]


def read_run_recipe(
    run_dir: Path, *, threshold: float | None = None, alpha: float | None = None
) -> tuple[Recipe, str]:
    """`load_run_recipe`, with the SHA-256 of the very bytes the recipe was parsed from (what
    `recipe.signature` checks: a file swapped after the read cannot pass for the one read)."""
    resolved = RunDir(run_dir).resolved_recipe
    if not resolved.is_file():
        raise AortaUsageError(f"{run_dir}: not a triage run directory (no {RESOLVED_NAME})")
    raw = read_regular_file(str(resolved), resolved, what="run file")
    try:
        recipe = recipe_from_resolved(
            _parse_run_file(resolved, raw), label=str(resolved), threshold=threshold, alpha=alpha
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise AortaUsageError(f"{resolved}: not a {RESOLVED_NAME} aorta wrote: {exc}") from None
    return recipe, recipe_digest(raw)


def write_run_recipe(run_dir: Path, recipe: Recipe) -> None:
    """Write `recipe.resolved.yaml` of a run being started, and sign it as this user's
    (`recipe.signature`: the printed `--resume` then needs no `--trust-environments`)."""
    text = dump_resolved_yaml(recipe)
    write_text_atomic(RunDir(run_dir).resolved_recipe, text)
    sign_run_recipe(run_dir, text.encode("utf-8"))


def resume_command(run_dir: Path) -> str:
    """The command that finishes `run_dir`, with `--trust-environments` only when the resume
    would refuse without it (not this user's signed recipe, and something to vouch for)."""
    from aorta.triage.recipe.trust import resume_needs_trust

    recipe, digest = read_run_recipe(run_dir)
    flag = " --trust-environments" if resume_needs_trust(recipe, run_dir, digest) else ""
    return f"aorta triage run --resume {shlex.quote(str(run_dir))}{flag}"


def trials_on_disk(
    run_dir: Path, cell: Cell, parsed: dict[Path, TrialResult] | None = None
) -> list[TrialResult]:
    """The cell's finished trials, by trial id (trial files are written atomically: whole).

    Files whose id lies outside the cell's `0..trials-1` are not this recipe's and are left out.
    A file that does not parse as a trial record is a one-line `AortaUsageError`. `parsed`
    keeps the records already read, for a caller that polls (the SLURM driver): a trial file
    is written once and never replaced, so each is parsed once, not on every poll.
    """
    results = []
    for path in RunDir(run_dir).cell(cell.name).glob("trial_*.json"):
        result = parsed.get(path) if parsed is not None else None
        if result is None:
            result = _read_trial(path)
            if parsed is not None:
                parsed[path] = result
        if 0 <= result.trial_id < cell.trials:
            results.append(result)
    return sorted(results, key=lambda r: r.trial_id)


def _read_trial(path: Path) -> TrialResult:
    try:
        result = TrialResult.from_dict(load_mapping(path))
        if not isinstance(result.trial_id, int) or isinstance(result.trial_id, bool):
            raise TypeError(f"trial_id: expected an integer, got {result.trial_id!r:.80}")
    except (KeyError, TypeError, ValueError) as exc:
        reason = " ".join(str(exc).split())[:300]
        raise AortaUsageError(f"{path}: not a trial record aorta wrote: {reason}") from None
    return result


def image_digests(run_dir: Path) -> dict[str, str]:
    """The recorded image digest of each docker environment (`environments/<env>/image.json`)."""
    digests = {}
    for path in RunDir(run_dir).image_jsons():
        data = load_file(path)
        digest = data.get("digest") if isinstance(data, dict) else None
        if not isinstance(digest, str):
            raise AortaUsageError(f"{path}: digest: expected a string, got {digest!r}")
        digests[path.parent.name] = digest
    return digests


def partial_scopes(run_dir: Path) -> tuple[str, ...]:
    """The probe scopes whose snapshot on disk is marked partial."""
    scopes = []
    run = RunDir(run_dir)
    if run.host_env.exists() and load_mapping(run.host_env).get("partial"):
        scopes.append("host")
    for env_file in run.env_jsons():
        if load_mapping(env_file).get("partial"):
            scopes.append(f"environment {env_file.parent.name}")
    return tuple(scopes)


def archive_matrix(run_dir: Path, moment: datetime) -> Path | None:
    """Keep the current matrix files in a fresh `previous/<timestamp>/`; None if there are none.

    Hard links, not moves: the current files stay in place until the new ones atomically
    replace them, so a write that fails (a full disk) never leaves the run without a matrix.
    """
    existing = [run_dir / name for name in MATRIX_NAMES if (run_dir / name).exists()]
    if not existing:
        return None
    archive = create_run_dir(RunDir(run_dir).previous, dir_stamp(moment))
    for path in existing:
        os.link(path, archive / path.name)
    return archive


def refuse_planted_symlinks(run_dir: Path) -> None:
    """One-line `AortaUsageError` if the run directory holds a symbolic link anywhere.

    aorta never writes one, so a link (`cells/<name> -> elsewhere`) was planted: resuming
    would read and write through it.
    """
    for here, dirs, files in os.walk(run_dir, followlinks=False):
        for name in (*dirs, *files):
            entry = Path(here) / name
            if entry.is_symlink():
                raise AortaUsageError(
                    f"{entry}: a symbolic link in a run directory;"
                    " refusing to read or write through it (remove it)"
                )


def _write_holder(fd: int, path: Path) -> None:
    """Write our PID (for the message a second process gets) into the lock file `fd`.

    Unbuffered: on a full disk the error comes here, as one `OutputWriteError`, not again
    when the file is closed.
    """
    try:
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
    except OSError as exc:
        raise OutputWriteError(f"{path}: cannot write: {exc.strerror or exc}") from None


@contextlib.contextmanager
def run_dir_lock(run_dir: Path) -> Iterator[None]:
    """Hold `run_dir` for one triage process; a second one gets a one-line `AortaUsageError`.

    Two processes filling the same run directory (a resume started while the run is still
    going) would race for the same trial files and archive each other's matrix. The lock file
    is removed when the holder is done, so a finished run directory holds results only.
    """
    path = RunDir(run_dir).lock
    held = contextlib.ExitStack()
    try:
        # Refuses a link planted at .triage.lock; removed while still held when we are done.
        fd = held.enter_context(hold_lock(path, remove=True))
    except LockBusyError:
        raise AortaUsageError(busy_message(run_dir, path)) from None
    except OSError as exc:
        raise AortaUsageError(f"{path}: cannot create the run lock: {exc.strerror}") from None
    with held:
        _write_holder(fd, path)
        refuse_planted_symlinks(run_dir)
        yield
