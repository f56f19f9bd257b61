"""Sweep points -> `JobContext`s with deterministic ids and safe, unique names, one at a time.

Without `stages:` the sweep is expanded lazily: memory holds each axis and the ids and names
seen so far (for the uniqueness checks), never the product of the axes. With `stages:` the
points are kept, because every stage's jobs come before the next stage's.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from oellm_autoexp.backends.base import JobContext
from oellm_autoexp.config.schema import RootConfig
from oellm_autoexp.errors import ConfigError
from oellm_autoexp.planning.preflight import check_job_count, check_param_keys
from oellm_autoexp.slurm.topology import WorldSizes
from oellm_autoexp.sweep.expand import checked_kinds, iter_points, param_keys
from oellm_autoexp.sweep.filter import compile_filters, filtered
from oellm_autoexp.sweep.ids import check_name, job_id, job_name
from oellm_autoexp.sweep.stages import StageJob

Planned = tuple[JobContext, StageJob | None]


class JobContexts:
    """The jobs of a config, in plan order; `combinations` is known once they are consumed."""

    def __init__(self, config: RootConfig, root: Path, dumped: dict[str, Any]) -> None:
        self.config = config
        self.root = root
        self.dumped = dumped
        self.jobs_dir = root / "jobs"
        # Names are single safe path components (`check_name`): "<jobs_dir>/<name>" is the
        # normal form of the job's directory, without a `Path` per job (see `JobContext`).
        self._jobs_text = str(self.jobs_dir)
        self.combinations = 0  # sweep combinations before `sweep.filter`
        self._seen_ids: dict[str, int] = {}
        self._seen_names: dict[str, int] = {}
        self._checked_keys: set[str] = set()  # param keys `check_param_keys` accepted
        self._world = WorldSizes(config.slurm)

    def __iter__(self) -> Iterator[Planned]:
        points = self._kept_points()
        if self.config.stages:
            yield from self._staged(list(points))
            return
        for index, params in points:
            identifier, name = self._identify(index, params)
            yield self._context(index, identifier, name, params), None

    def _kept_points(self) -> Iterator[tuple[int, dict[str, Any]]]:
        """(index among the kept points, params) of the combinations `sweep.filter` keeps."""
        config = self.config
        base = dict(config.sweep.base)
        filters = compile_filters(config.sweep.filter, set(base) | param_keys(config.sweep.axes))
        points = checked_kinds({**base, **point} for point in iter_points(config.sweep.axes))
        yield from enumerate(filtered(filters, self._counted(points)))

    def _counted(self, points: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        for point in points:
            self.combinations += 1
            yield point

    def _identify(self, index: int, params: dict[str, Any]) -> tuple[str, str]:
        """The point's job id and name, both checked unique among the points so far."""
        config = self.config
        project = config.project.name
        if not self._checked_keys.issuperset(params):
            check_param_keys(params, where="sweep param")
            self._checked_keys.update(params)
        identifier = job_id(project, params)
        earlier = self._seen_ids.setdefault(identifier, index)
        if earlier != index:
            raise ConfigError(
                f"jobs {earlier} and {index} have identical params {params!r}", key="sweep.axes"
            )
        fields: dict[str, Any] = {"project": project, "job_id": identifier, "index": index}
        for key, value in params.items():
            fields[key.replace(".", "_") if "." in key else key] = value
        name = job_name(config.sweep.name_template, fields, index=index)
        earlier = self._seen_names.setdefault(name, index)
        if earlier != index:
            raise ConfigError(
                f"jobs {earlier} and {index} both get the name {name!r}; add a "
                "distinguishing param or {job_id} to the template",
                key="sweep.name_template",
            )
        return identifier, name

    def _context(
        self, index: int, identifier: str, name: str, params: dict[str, Any]
    ) -> JobContext:
        derived = _derived(self.config, self.dumped, params, name) if self.config.derived else {}
        job_params = {**params, **derived} if derived else params
        return JobContext(  # positional: a million of them
            identifier,
            name,
            index,
            job_params,
            f"{self._jobs_text}/{name}",
            self.config.project.name,
            self._world.of(job_params),
            self._world.env,
        )

    def _staged(self, points: list[tuple[int, dict[str, Any]]]) -> Iterator[Planned]:
        """One job per stage and point, stage by stage (see `sweep.stages`)."""
        from oellm_autoexp.sweep.stages import Identity, expand_point, order_stages

        config = self.config
        check_job_count(len(points), len(config.stages))
        ordered = order_stages(config.stages)
        for declared, stage in ordered:
            check_param_keys(stage.params, where=f"stages[{declared}].params")
        project = config.project.name
        jobs_dir = self.jobs_dir
        per_point = []
        for index, params in points:
            _identifier, base_name = self._identify(index, params)

            def identify(
                stage: str, point: dict[str, Any] = params, base: str = base_name
            ) -> Identity:
                stage_name = f"{base}_{stage}"
                check_name(stage_name, key="stages", what=f"job name of stage {stage}")
                stage_id = job_id(project, {**point, "@stage": stage})
                return Identity(stage_id, stage_name, jobs_dir / stage_name)

            def fields_of(who: Identity, job_params: Mapping[str, Any], at: int = index) -> Any:
                return JobContext(
                    who.job_id, who.name, at, job_params, who.output_dir, project
                ).format_fields()

            per_point.append(expand_point(ordered, params, identify, fields_of))
        index = 0
        for position in range(len(ordered)):
            for staged in per_point:
                job = staged[position]
                who = job.identity
                yield self._context(index, who.job_id, who.name, dict(job.params)), job
                index += 1


def _derived(
    config: RootConfig, dumped: dict[str, Any], params: Mapping[str, Any], name: str
) -> dict[str, Any]:
    """The job's `config.derived` values, resolved after its id and name are fixed."""
    if not config.derived:
        return {}
    from oellm_autoexp.config.derived import resolve_for_job

    return dict(resolve_for_job(dumped, config.derived, dict(params), job=name))
