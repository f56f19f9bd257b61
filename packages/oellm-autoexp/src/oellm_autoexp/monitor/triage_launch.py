"""The `triage:` log-signal action, I/O part: read the template, start aorta, find its run.

`launch_triage` writes the generated recipe into ``<job output>/triage/<attempt>/`` (created
exclusively: one triage per attempt, even across monitors) and starts ``aorta triage run``
there as a separate process in its own session, so the monitor neither waits for it nor takes
it down with a Ctrl-C. aorta is never imported (DESIGN.md): it is an executable found through
``$AUTOEXP_AORTA``, on PATH, or next to this interpreter.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

import yaml

from oellm_autoexp.atomic import write_text_atomic
from oellm_autoexp.config.yaml_text import load_text, read_config_text, yaml_error
from oellm_autoexp.errors import AutoexpError, ConfigError
from oellm_autoexp.monitor.triage_recipe import JobCommand, check_template, triage_recipe
from oellm_autoexp.persistence.session import TriageEvent
from oellm_autoexp.safe_paths import make_dirs_inside

AORTA_ENV = "AUTOEXP_AORTA"  # the aorta executable to use (a path or a name on PATH)
RECIPE_NAME = "recipe.yaml"
LOG_NAME = "aorta.log"
LAUNCH_NAME = "launch.json"
OUTPUT_NAME = "runs"
# aorta's dry run of a recipe takes well under a second; a minute means something is stuck.
CHECK_TIMEOUT_S = 60.0
# The triages this process started. Kept so each is reaped once it ended (`poll`), at the next
# start, instead of warning when its handle is garbage-collected while it still runs.
_STARTED: list[subprocess.Popen[bytes]] = []
NO_COMMAND = "no planned command for this job (a watched log, or an unreadable plan entry)"


@dataclass(frozen=True)
class TriageRequest:
    """One signal match that asks for a triage: the job, its attempt, its command."""

    attempt: str
    signal: str
    line: str
    at: float
    template: str
    job_output_dir: str
    output_root: str  # the session's base output dir: nothing below it is followed as a link
    command: JobCommand | None


def load_template(path: Path, *, key: str) -> dict[str, object]:
    """The checked template at `path`; a `ConfigError` naming `key` and the file otherwise."""
    if not path.is_file():
        why = "is not a regular file" if path.exists() else "does not exist"
        raise ConfigError(f"triage recipe template {path} {why}", key=key)
    try:
        data = load_text(read_config_text(path))
    except yaml.YAMLError as exc:
        error = yaml_error(exc, path)
        raise ConfigError(error.detail, key=key, file=error.file) from None
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc.detail}", key=key) from None
    return check_template(data, where=str(path), key=key)


def find_aorta() -> str | None:
    """The aorta executable: ``$AUTOEXP_AORTA``, else on PATH, else next to this Python."""
    named = os.environ.get(AORTA_ENV)
    if named:
        return shutil.which(named)
    found = shutil.which("aorta")
    if found:
        return found
    beside = Path(sys.executable).parent / "aorta"
    return str(beside) if os.access(beside, os.X_OK) else None


def check_with_aorta(template: dict[str, object], *, path: Path, key: str) -> None:
    """Let aorta validate `template` in full (cells, mitigations, executor, ...) at plan time.

    A recipe that aorta would refuse must fail the plan, not the monitor days later when the
    failure signal fires. oellm-autoexp never imports aorta and keeps no copy of its schema, so
    the generated recipe (with this interpreter as a stand-in command: the real one is the
    failing job's) goes through ``aorta triage run --dry-run``, which writes nothing. aorta's
    one-line error comes back as a `ConfigError` naming `path` and `key`.
    """
    aorta = find_aorta()
    if aorta is None:
        hint = os.environ.get(AORTA_ENV) or "aorta"
        raise ConfigError(
            f"{path}: the triage: action needs aorta, but {hint!r} was not found: pip install "
            f"aorta next to oellm-autoexp, or set {AORTA_ENV} to its path",
            key=key,
        )
    stand_in = JobCommand((sys.executable, "-c", "pass"), {}, "")
    with tempfile.TemporaryDirectory(prefix="autoexp-triage-check-") as scratch:
        recipe_path = Path(scratch) / RECIPE_NAME
        recipe_path.write_text(yaml.safe_dump(triage_recipe(template, stand_in), sort_keys=False))
        try:
            checked = subprocess.run(  # argv, never a shell
                [aorta, "triage", "run", "--recipe", str(recipe_path), "--dry-run"],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=CHECK_TIMEOUT_S,
                cwd=scratch,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise ConfigError(
                f"{path}: aorta did not check the template within {CHECK_TIMEOUT_S:.0f} s",
                key=key,
            ) from None
        except OSError as exc:
            raise ConfigError(
                f"{path}: could not run {aorta}: {exc.strerror or exc}", key=key
            ) from None
    if checked.returncode != 0:
        raise ConfigError(
            f"aorta refuses the template: {_refusal(checked, recipe_path, path)}", key=key
        )


def _refusal(checked: subprocess.CompletedProcess[str], checked_path: Path, path: Path) -> str:
    """aorta's first error line about the checked copy, told of the template, + how many more."""
    prefix = "aorta: error: "
    lines = [line for line in checked.stderr.splitlines() if line.strip()]
    errors = [line.removeprefix(prefix) for line in lines if line.startswith(prefix)]
    why = errors[0] if errors else (lines[-1] if lines else f"exit {checked.returncode}")
    why = why.replace(str(checked_path), str(path))
    if not why.startswith(str(path)):
        why = f"{path}: {why}"
    return why + (f" (+{len(errors) - 1} more)" if len(errors) > 1 else "")


def launch_triage(request: TriageRequest) -> TriageEvent:
    """Start the triage `request` asks for; the event says what was started or why not.

    Never raises for a problem of the triage itself (a missing aorta, a template that no
    longer reads, a directory that already exists): the monitor records it and goes on.
    """
    event = TriageEvent(
        attempt=request.attempt,
        signal=request.signal,
        line=request.line,
        at=request.at,
        template=request.template,
    )
    if request.command is None:
        return replace(event, error=NO_COMMAND)
    aorta = find_aorta()
    if aorta is None:
        hint = os.environ.get(AORTA_ENV) or "aorta"
        return replace(
            event,
            error=f"{hint!r} not found: pip install aorta next to oellm-autoexp, or set "
            f"{AORTA_ENV} to its path",
        )
    try:
        template = load_template(Path(request.template), key=f"triage of {request.signal}")
        directory = _fresh_directory(request)
    except AutoexpError as exc:
        return replace(event, error=str(exc))
    recipe_path = directory / RECIPE_NAME
    output_dir = directory / OUTPUT_NAME
    log_path = directory / LOG_NAME
    event = replace(
        event,
        directory=str(directory),
        recipe=str(recipe_path),
        output_dir=str(output_dir),
        log=str(log_path),
    )
    recipe = triage_recipe(template, request.command)
    write_text_atomic(
        recipe_path, yaml.safe_dump(recipe, sort_keys=False), overwrite=True, mode=0o600
    )
    argv = [aorta, "triage", "run", "--recipe", str(recipe_path)]
    argv += ["--output-dir", str(output_dir), "--progress", "plain"]
    # The job's environment is the trial's base (the cells' mitigations go on top of it);
    # owner-only, as the session file: it may hold the job's secrets.
    launch = {"argv": argv, "env": dict(request.command.env), "cwd": str(Path.cwd())}
    write_text_atomic(
        directory / LAUNCH_NAME, json.dumps(launch, indent=1) + "\n", mode=0o600, overwrite=True
    )
    try:
        with log_path.open("ab") as log:
            process = subprocess.Popen(  # argv, never a shell
                argv,
                env={**os.environ, **request.command.env},
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
    except OSError as exc:
        return replace(event, error=f"could not start {aorta}: {exc.strerror or exc}")
    _STARTED[:] = [p for p in _STARTED if p.poll() is None]
    _STARTED.append(process)
    return replace(event, pid=process.pid)


def _fresh_directory(request: TriageRequest) -> Path:
    """``<job output>/triage/<attempt>``, created now; an existing one is an error."""
    parent = Path(request.job_output_dir) / "triage"
    root = Path(request.output_root)
    try:
        if _inside(parent, root):  # no planted symlink below the output root is followed
            make_dirs_inside(parent, root)
        else:
            parent.mkdir(parents=True, exist_ok=True)
        directory = parent / request.attempt
        directory.mkdir()
    except FileExistsError:
        raise AutoexpError(
            f"{parent / request.attempt} exists: a triage of attempt {request.attempt} was "
            "already started (by an earlier monitor?); not starting another"
        ) from None
    except OSError as exc:
        raise AutoexpError(f"cannot create {parent}: {exc.strerror or exc}") from None
    return directory


def _inside(path: Path, root: Path) -> bool:
    return Path(os.path.normpath(path)).is_relative_to(os.path.normpath(root))


def find_run_dir(output_dir: str | None) -> Path | None:
    """The run directory aorta created below `output_dir` (the one with its recipe copy)."""
    if not output_dir:
        return None
    found = sorted(Path(output_dir).glob("*/*/*/recipe.resolved.yaml"))
    return found[0].parent if found else None


def describe(event: TriageEvent) -> str:
    """One line for `status`: started (pid, run dir, matrix) or why it was not."""
    head = f"triage of attempt {event.attempt} (signal {event.signal})"
    if event.error is not None:
        return f"{head}: not started: {event.error}"
    run_dir = find_run_dir(event.output_dir)
    if run_dir is None:
        where = f"no run directory yet under {event.output_dir} (log {event.log})"
    elif (run_dir / "matrix.md").is_file():  # aorta writes it last (after matrix.json)
        where = f"run dir {run_dir}, matrix {run_dir / 'matrix.md'}"
    else:
        where = f"run dir {run_dir}, running or stopped before its matrix (log {event.log})"
    return f"{head}: pid {event.pid}, recipe {event.recipe}; {where}"
