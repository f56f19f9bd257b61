"""The library's plan entry points (`oellm_autoexp.api` re-exports them).

`plan` keeps the whole plan in memory (what `submit` needs); `plan_streamed` decides and
writes it one script at a time (what `oellm-autoexp plan` runs, at any size). Both load the
config, write the artifacts and provenance.json, and turn write failures into one line.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from oellm_autoexp.errors import AutoexpUsageError

if TYPE_CHECKING:
    from oellm_autoexp.config.schema import RootConfig
    from oellm_autoexp.plan import Plan
    from oellm_autoexp.planning import PlanResult, WrittenPlan
    from oellm_autoexp.reporting import Reporter


def plan(
    config: str | Path | RootConfig,
    overrides: Sequence[str] = (),
    *,
    config_dir: Path | None = None,
    test_only: str | None = None,
    reporter: Reporter | None = None,
) -> PlanResult:
    """Load `config` (a YAML path, a config name, or a parsed `RootConfig`), plan, write artifacts.

    `test_only` overrides `slurm.test_only` ("auto", "always", "never"). The plan's notes (e.g.
    the `sbatch --test-only` verdict) go to `reporter`. A config given by path or name also
    gets ``provenance.json`` (the file as given, git state, versions); a `RootConfig` object
    has no file to record, so it gets none.
    """
    from oellm_autoexp.planning import build_plan, write_plan

    def make(root: RootConfig, test: str) -> tuple[PlanResult, list[str], Plan, dict[str, Any]]:
        result = build_plan(root)
        return result, write_plan(result, test_only=test), result.plan, result.config

    return _planned(make, config, overrides, config_dir, test_only, reporter)


def plan_streamed(
    config: str | Path | RootConfig,
    overrides: Sequence[str] = (),
    *,
    config_dir: Path | None = None,
    test_only: str | None = None,
    reporter: Reporter | None = None,
) -> WrittenPlan:
    """`plan` at any size: jobs are decided and written one script at a time.

    Memory holds one script's jobs, not the plan's; the result has every script but only the
    first jobs (`WrittenPlan`), with the job count and cost. What `oellm-autoexp plan` runs.
    """
    from oellm_autoexp.planning import plan_stream, write_stream

    def make(root: RootConfig, test: str) -> tuple[WrittenPlan, list[str], Plan, dict[str, Any]]:
        written = write_stream(plan_stream(root), test_only=test)
        return written, written.notes, written.plan, written.config

    return _planned(make, config, overrides, config_dir, test_only, reporter)


_Made = TypeVar("_Made")


def _planned(
    make: Callable[[RootConfig, str], tuple[_Made, list[str], Plan, dict[str, Any]]],
    config: str | Path | RootConfig,
    overrides: Sequence[str],
    config_dir: Path | None,
    test_only: str | None,
    reporter: Reporter | None,
) -> _Made:
    """Load, plan and write with `make`, then provenance.json and the notes (see `plan`)."""
    from oellm_autoexp.config.schema import RootConfig
    from oellm_autoexp.errors import ConfigError

    if reporter is None:  # `reporting` only for callers that pass none (the CLI passes its own)
        from oellm_autoexp.reporting import NullReporter

        reporter = NullReporter()
    source: str | None = None
    if isinstance(config, RootConfig):
        root = config
    else:
        from oellm_autoexp.config.loader import load_config

        loaded = load_config(str(config), list(overrides), config_dir=config_dir)
        root, source = loaded.root, str(loaded.source)
    try:
        made, notes, the_plan, dumped = make(root, test_only or root.slurm.test_only)
    except ConfigError as exc:  # name the config it came from, unless it names its own file
        raise (exc.with_file(source) if source else exc) from None
    except OSError as exc:  # e.g. base_output_dir=/dev/null/x, a full disk: one line, exit 2
        raise _write_error(exc, root.project.base_output_dir) from None
    if source is not None:  # provenance.json next to plan.json: where this plan came from
        from oellm_autoexp.provenance import ConfigSource, collect_provenance, write_provenance

        given = ConfigSource(source, tuple(overrides), str(config_dir) if config_dir else None)
        record = collect_provenance(
            given, dumped, plan_id=the_plan.plan_id, submit_cmd=the_plan.submit_cmd
        )
        try:
            write_provenance(the_plan.plan_dir, record)
        except OSError as exc:
            raise _write_error(exc, root.project.base_output_dir) from None
    for note in notes:
        (reporter.warning if note.startswith("warning") else reporter.info)(note)
    return made


def _write_error(exc: OSError, output_dir: object) -> AutoexpUsageError:
    """A failed plan write as one line naming the path and the reason (no traceback)."""
    where = exc.filename if exc.filename is not None else output_dir
    return AutoexpUsageError(
        f"cannot write the plan: {where}: {exc.strerror or exc} "
        f"(project.base_output_dir is {output_dir})"
    )
