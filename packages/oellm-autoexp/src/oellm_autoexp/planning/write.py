"""Writing a plan: scripts, plan.json, sweep.json, config.yaml, then the script checks.

Layout: ``<plan_dir>/{config.yaml, sweep.json, plan.json, scripts/*.sbatch}`` (sweep.json
unless `sweep.store_sweep_json` is false), plus the backend's `plan_artifacts` (Megatron:
``megatron_schema.json``, what restarts are validated with where Megatron is missing). The
plan id is a hash of the resolved config, so re-planning the same config rewrites identical
files and a changed config gets a new directory: an earlier plan is never overwritten.

`write_stream` writes a `PlanStream` script by script: plan.json and sweep.json are written as
the jobs arrive (one JSON object per line, each replacing its file atomically at the end), so
memory holds one script's jobs, not the plan's. `write_plan` writes an in-memory `PlanResult`
the same way.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import stat
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Protocol

from oellm_autoexp.atomic import open_text_atomic, write_text_atomic
from oellm_autoexp.errors import ConfigError
from oellm_autoexp.json_encode import reusable_encoder
from oellm_autoexp.plan import JobPlan, Plan, ScriptPlan
from oellm_autoexp.planning.build import JobRow, PlanResult, PlanStream, ScriptChunk
from oellm_autoexp.planning.collector import rare_collections

# How many scripts go through bash -n / sbatch --test-only. All scripts come from one
# template with quoted values, so the first few represent the rest.
CHECKED_SCRIPTS = 8
# One encoder for every line: `json.dumps` with options builds a new encoder per call.
_ENCODE = reusable_encoder()
# How many jobs a streamed write keeps for its caller (the CLI's summary shows 20).
KEPT_JOBS = 20


@dataclass(frozen=True)
class WrittenPlan:
    """What `write_stream` wrote: the plan with every script but only the first jobs."""

    plan: Plan  # `plan.jobs`: the first KEPT_JOBS jobs
    jobs: int  # how many jobs the plan has
    combinations: int  # sweep combinations before `sweep.filter`
    config: dict[str, Any]
    notes: list[str]
    sbatch_counts: Mapping[tuple[tuple[str, str], ...], int]  # jobs per distinct directive set
    staged: bool  # whether any job belongs to a stage


def write_stream(stream: PlanStream, *, test_only: str = "auto") -> WrittenPlan:
    """Decide and write the plan of `stream` script by script; returns a summary."""
    kept: list[JobPlan] = []
    counts: dict[tuple[tuple[str, str], ...], int] = {}
    staged = False

    def keep(chunk: ScriptChunk) -> None:
        nonlocal staged
        if len(kept) < KEPT_JOBS:
            kept.extend(chunk.jobs(KEPT_JOBS - len(kept)))
        shape = tuple(sorted(chunk.sbatch.items()))
        counts[shape] = counts.get(shape, 0) + len(chunk.rows)
        staged = staged or chunk.rows[0].stage is not None

    with rare_collections():
        scripts = _write_all(stream, _observed(stream.chunks(), keep))
    notes = check_scripts(scripts, stream.submit_cmd, test_only)
    return WrittenPlan(
        plan=stream.header(kept, scripts),
        jobs=stream.jobs,
        combinations=stream.combinations,
        config=stream.dumped,
        notes=notes,
        sbatch_counts=counts,
        staged=staged,
    )


def write_plan(result: PlanResult, *, test_only: str = "auto") -> list[str]:
    """Write an in-memory plan's artifacts atomically and check the scripts; notes for the user."""
    plan = result.plan
    texts = result.scripts
    by_script: dict[Path, list[JobPlan]] = {}
    for job in plan.jobs:
        by_script.setdefault(job.script, []).append(job)
    chunks = (
        ScriptChunk.of_jobs(script, texts[script.path], by_script.get(script.path, ()))
        for script in plan.scripts
    )
    target = _Written(
        root=plan.output_root,
        plan_dir=plan.plan_dir,
        project=plan.project,
        plan_id=plan.plan_id,
        submit_cmd=plan.submit_cmd,
        dumped=result.config,
        store_sweep_json=result.store_sweep_json,
        artifacts=result.artifacts,
        checked_by=plan.validation,
    )
    scripts = _write_all(target, chunks)
    return check_scripts(scripts, plan.submit_cmd, test_only)


class PlanTarget(Protocol):
    """What `_write_all` needs to know besides the scripts: a `PlanStream` or an in-memory plan."""

    root: Path
    plan_dir: Path
    project: str
    plan_id: str
    submit_cmd: str
    dumped: dict[str, Any]
    store_sweep_json: bool

    @property
    def artifacts(self) -> Mapping[str, str]:
        """Backend files kept in the plan directory, by name."""

    def validation(self) -> Mapping[str, Any]:
        """What validated the backend arguments."""


@dataclass
class _Written:
    """An in-memory plan as a `PlanTarget`."""

    root: Path
    plan_dir: Path
    project: str
    plan_id: str
    submit_cmd: str
    dumped: dict[str, Any]
    store_sweep_json: bool
    artifacts: Mapping[str, str]
    checked_by: Mapping[str, Any]

    def validation(self) -> Mapping[str, Any]:
        """The plan's validation record."""
        return self.checked_by


def _observed(
    chunks: Iterable[ScriptChunk], see: Callable[[ScriptChunk], None]
) -> Iterator[ScriptChunk]:
    for chunk in chunks:
        see(chunk)
        yield chunk


def _write_all(target: PlanTarget, chunks: Iterable[ScriptChunk]) -> list[ScriptPlan]:
    """Scripts as they come (one sync for all), then sweep.json, config.yaml and plan.json.

    plan.json is the last file to replace its predecessor (fsynced): a plan directory with a
    plan.json is complete. Returns the scripts written.
    """
    pending = iter(chunks)
    # Most config errors surface with the first script: found before anything is created.
    first = next(pending, None)
    made = _Created(target.root)
    try:
        scripts = _write_files(target, itertools.chain([first] if first else [], pending), made)
    except BaseException:
        made.undo()  # a plan rejected part-way writes nothing either
        raise
    return scripts


def _write_files(
    target: PlanTarget, chunks: Iterable[ScriptChunk], made: _Created
) -> list[ScriptPlan]:
    from oellm_autoexp.config.yaml_text import dump_text
    from oellm_autoexp.safe_paths import check_no_links
    from oellm_autoexp.slurm.validate import check_script

    root, plan_dir = target.root, target.plan_dir
    # plans/ is owner-only: scripts and config.yaml may hold secrets from ``${oc.env:...}``.
    made.dirs(plan_dir / "scripts", mode=0o700)
    log_dirs: set[str] = set()
    jobs_dir = root / "jobs"
    check_no_links(jobs_dir, root)
    jobs_exist = os.path.lexists(jobs_dir)  # else no job directory below it can exist
    scripts: list[ScriptPlan] = []
    with ExitStack() as files:
        plan_json = files.enter_context(open_text_atomic(plan_dir / "plan.json"))
        sweep_json: IO[str] | None = None
        if target.store_sweep_json:
            sweep_json = files.enter_context(open_text_atomic(plan_dir / "sweep.json"))
            sweep_json.write(_head({"project": target.project, "plan_id": target.plan_id}, "jobs"))
        plan_json.write(_head(_plan_head(target), "jobs"))
        separator = ""
        job_lines = _JobLines()
        for chunk in chunks:
            path = chunk.script.path
            check_script(
                path, chunk.text, job_name=chunk.script.job_name, array_spec=chunk.script.array_spec
            )
            made.file(path, chunk.text)
            scripts.append(chunk.script)
            if not chunk.rows:
                continue
            log_dir = chunk.log_path.rpartition("/")[0]
            if log_dir not in log_dirs:
                # SLURM does not create --output's directory; a missing one kills the job.
                made.dirs(Path(log_dir))
                log_dirs.add(log_dir)
            job_lines.start(chunk)
            for task_index, row in enumerate(chunk.rows):
                if jobs_exist:
                    _check_job_dir(row.output_dir, root)
                entry, line = job_lines(row, task_index)
                plan_json.write(separator + line)
                if sweep_json is not None:
                    sweep_json.write(separator + entry)
                separator = ",\n"
        os.sync()  # the scripts, written without one fsync each
        if sweep_json is not None:
            sweep_json.write("\n]}\n")
        plan_json.write(_tail(target, scripts))
        for name, text in target.artifacts.items():
            write_text_atomic(plan_dir / name, text)
        write_text_atomic(plan_dir / "config.yaml", dump_text(target.dumped))
    return scripts


class _Created:
    """Directories and scripts one write created, so that a failed write can remove them."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.paths: list[Path] = []  # in creation order

    def dirs(self, path: Path, *, mode: int = 0o777) -> None:
        """`make_dirs_inside(path)`, remembering the directories that did not exist."""
        from oellm_autoexp.safe_paths import make_dirs_inside

        missing = []
        here = path
        while not os.path.lexists(here) and here != here.parent:
            missing.append(here)
            here = here.parent
        make_dirs_inside(path, self.root, mode=mode)
        self.paths.extend(reversed(missing))

    def file(self, path: Path, text: str) -> None:
        """An executable script written atomically (synced once for all, by the caller)."""
        existed = os.path.lexists(path)
        write_text_atomic(path, text, mode=0o700, fsync=False)
        if not existed:
            self.paths.append(path)

    def undo(self) -> None:
        """Remove what was created, newest first; a directory someone else filled stays."""
        for path in reversed(self.paths):
            with contextlib.suppress(OSError):
                if path.is_dir() and not path.is_symlink():
                    path.rmdir()
                else:
                    path.unlink()


class _JobLines:
    """Jobs' sweep.json entries and plan.json lines (`JobPlan.to_dict`), as JSON text.

    The plan line starts with the sweep entry's four keys, so their (largest) part, the
    params, is encoded once for both files; `command`, `env` and `output_dir` are encoded in
    one call; `log_path`, `script`, `sbatch` and the array name, the same for every job of a
    script, once per script (`start`). `tests/plan/test_job_lines.py` holds the text equal to
    ``json.dumps(job.to_dict())``.
    """

    def __init__(self) -> None:
        self._shared = ""
        self._array_name: str | None = None

    def start(self, chunk: ScriptChunk) -> None:
        """Encode what the jobs of `chunk` share."""
        script = chunk.script
        self._shared = (
            f'"log_path": {_ENCODE(chunk.log_path)}, "script": {_ENCODE(str(script.path))}, '
            f'"sbatch": {_ENCODE(dict(chunk.sbatch))}, "array": '
        )
        self._array_name = None if script.array_spec is None else _ENCODE(script.job_name)

    def __call__(self, row: JobRow, task_index: int) -> tuple[str, str]:
        """(sweep.json entry, plan.json line) of array task `task_index` of the script."""
        # `sweep_entry` of the job, without building the JobPlan
        entry = _ENCODE(
            {"job_id": row.job_id, "name": row.name, "index": row.sweep_index, "params": row.params}
        )
        env = row.env if isinstance(row.env, dict) else dict(row.env)
        launch = _ENCODE({"command": row.command, "env": env, "output_dir": row.output_dir})
        where = (
            "null"
            if self._array_name is None
            else f'{{"array_name": {self._array_name}, "task_index": {task_index:d}}}'
        )
        stage = "" if row.stage is None else f', "stage": {_ENCODE(row.stage.to_dict())}'
        return entry, f"{entry[:-1]}, {launch[1:-1]}, {self._shared}{where}{stage}}}"


def _check_job_dir(path: str, root: Path) -> None:
    """jobs/<name> is created by the job; an existing one must be a real directory."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        from oellm_autoexp.safe_paths import check_no_links

        check_no_links(Path(path), root)  # raises with the full message


def _plan_head(target: PlanTarget) -> dict[str, Any]:
    return {
        "project": target.project,
        "output_root": str(target.root),
        "plan_dir": str(target.plan_dir),
        "plan_id": target.plan_id,
        "submit_cmd": target.submit_cmd,
    }


def _head(head: dict[str, Any], key: str) -> str:
    """The start of a JSON object whose last key `key` is a list written one item per line."""
    return json.dumps(head, allow_nan=False)[:-1] + f", {json.dumps(key)}: [\n"


def _tail(target: PlanTarget, scripts: Sequence[ScriptPlan]) -> str:
    """The rest of plan.json after its jobs (the same keys as `Plan.to_dict`)."""
    rest = {
        "scripts": [script.to_dict() for script in scripts],
        "warnings": [],
        "validation": dict(target.validation()),
    }
    return "\n], " + json.dumps(rest, allow_nan=False)[1:] + "\n"


def check_scripts(scripts: Sequence[ScriptPlan], submit_cmd: str, test_only: str) -> list[str]:
    """`bash -n` and (per `test_only`) ``sbatch --test-only`` on the first scripts; notes."""
    from oellm_autoexp.errors import AutoexpRunError
    from oellm_autoexp.slurm.validate import bash_syntax_check, sbatch_available, sbatch_test_only

    checked = [script.path for script in scripts[:CHECKED_SCRIPTS]]
    bash_syntax_check(checked)
    notes: list[str] = []
    if test_only == "never":
        return notes
    if sbatch_available(submit_cmd) is None:
        if test_only == "always":
            raise ConfigError(f"slurm.test_only is 'always' but {submit_cmd!r} is not on PATH")
        notes.append("sbatch not on PATH: skipped sbatch --test-only")
        return notes
    # "auto" is best effort (sbatch may exist without a reachable controller): a rejection is
    # reported as a warning. "always" makes it fatal.
    for path in checked:
        try:
            sbatch_test_only(path, submit_cmd=submit_cmd)
        except AutoexpRunError as exc:
            if test_only == "always":
                raise
            notes.append(f"warning: {exc}")
            return notes
    notes.append(f"sbatch --test-only accepted {len(checked)} of {len(scripts)} script(s)")
    return notes
