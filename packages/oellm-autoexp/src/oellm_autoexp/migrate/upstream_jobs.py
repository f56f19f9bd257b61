"""Upstream's jobs of one experiment config: compose it, expand its sweep, resolve each job.

Upstream composes its Hydra tree once per job with the job's sweep values as ``++key=value``
overrides (a value naming a config group, ``backend/megatron: x``, selects that option), then
resolves the whole config. This module does the same with OmegaConf and our resolvers (which
give upstream's values, `config.resolvers_text`): `UpstreamJob.value(key)` is what upstream's
job config holds at `key`. Upstream's own code is never imported.
"""

from __future__ import annotations

import copy
import re
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from oellm_autoexp.config.yaml_text import read_yaml
from oellm_autoexp.errors import ConfigError, one_line
from oellm_autoexp.migrate.upstream_sweep import UpstreamPoint, expand_upstream_sweep

TREE_MARKER = "autoexp.yaml"  # the top of upstream's config tree
_SIBLING = re.compile(r"\$\{sibling\.([^.}]+)\.")


class UnresolvedError(Exception):
    """A key of an upstream job that cannot be resolved here (one line in `str()`)."""


@dataclass
class UpstreamJob:
    """One job as upstream would plan it: its sweep point and its composed config."""

    index: int  # upstream's point index (before filtering), which `${index}` reads
    point: UpstreamPoint
    cfg: Any  # omegaconf.DictConfig

    def value(self, key: str) -> Any:
        """The resolved plain value at dotted `key` (None when absent)."""
        from omegaconf import OmegaConf
        from omegaconf.errors import OmegaConfBaseException

        try:
            node = OmegaConf.select(self.cfg, key, throw_on_missing=True)
            if OmegaConf.is_config(node):
                return OmegaConf.to_container(node, resolve=True, throw_on_missing=True)
            return node
        except OmegaConfBaseException as exc:
            raise UnresolvedError(one_line(_first_line(exc))) from None

    def raw(self, key: str) -> Any:
        """The unresolved value at `key` (interpolations as text; None when absent)."""
        from omegaconf import OmegaConf

        value: Any = OmegaConf.to_container(self.cfg, resolve=False)
        for part in key.split("."):
            if not isinstance(value, Mapping) or part not in value:
                return None
            value = value[part]
        return value


@dataclass(frozen=True)
class UpstreamExperiment:
    """The expanded experiment: every point, which ones wait on a sibling stage, the tree."""

    source: Path
    config_dir: Path | None
    jobs: list[UpstreamJob]
    dependent: list[tuple[int, tuple[str, ...]]]  # (point index, sibling stages it reads)


def find_tree(path: Path) -> Path | None:
    """The nearest directory above `path` holding upstream's ``autoexp.yaml``."""
    for parent in path.resolve().parents:
        if (parent / TREE_MARKER).is_file():
            return parent
    return None


def load_experiment(path: Path, config_dir: Path | None = None) -> UpstreamExperiment:
    """Compose `path`, expand its sweep and build each job's config (not yet resolved)."""
    from oellm_autoexp.config.resolvers import register_resolvers

    register_resolvers()
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    raw = read_yaml(path)
    if not isinstance(raw, dict):
        raise ConfigError("expected a mapping at the top level", file=str(path))
    tree = config_dir or (find_tree(path) if "defaults" in raw else None)
    if "defaults" in raw and tree is None:
        raise ConfigError(
            f"has a defaults list but no upstream config tree ({TREE_MARKER}) is above it; "
            "pass --config-dir UPSTREAM/config",
            key="defaults",
            file=str(path),
        )
    composer = _Composer(path, tree, raw)
    base = composer.compose(())
    sweep = _resolved_sweep(base, path)
    try:
        points = expand_upstream_sweep(sweep)
    except ConfigError as exc:
        raise exc.with_file(str(path)) from None
    jobs: list[UpstreamJob] = []
    dependent: list[tuple[int, tuple[str, ...]]] = []
    for index, point in enumerate(points):
        stages = sorted(set(_siblings(point.params)))
        if stages:
            dependent.append((index, tuple(stages)))
            continue
        group_choices = tuple(
            (k, _override_value(v)) for k, v in point.params.items() if _is_group(k, tree)
        )
        cfg = copy.deepcopy(composer.compose(group_choices))
        _apply(cfg, index, {k: v for k, v in point.params.items() if not _is_group(k, tree)})
        jobs.append(UpstreamJob(index=index, point=point, cfg=cfg))
    return UpstreamExperiment(source=path, config_dir=tree, jobs=jobs, dependent=dependent)


class _Composer:
    """Composes the experiment once per distinct set of config-group choices."""

    def __init__(self, path: Path, tree: Path | None, raw: dict[str, Any]) -> None:
        self.path, self.tree, self.raw = path, tree, raw
        self.cache: dict[tuple[tuple[str, str], ...], Any] = {}

    def compose(self, choices: tuple[tuple[str, str], ...]) -> Any:
        if choices not in self.cache:
            self.cache[choices] = self._compose(choices)
        return self.cache[choices]

    def _compose(self, choices: tuple[tuple[str, str], ...]) -> Any:
        from omegaconf import OmegaConf
        from omegaconf.errors import OmegaConfBaseException

        if self.tree is None:
            if choices:
                raise ConfigError(
                    f"the sweep picks config group option(s) ({choices[0][0]}={choices[0][1]}), "
                    "which need upstream's config tree; pass --config-dir UPSTREAM/config",
                    key="sweep",
                    file=str(self.path),
                )
            try:
                cfg = OmegaConf.create(self.raw)
            except OmegaConfBaseException as exc:
                raise ConfigError(one_line(_first_line(exc)), file=str(self.path)) from None
            return cfg
        from hydra import compose, initialize_config_dir
        from hydra.errors import HydraException

        try:
            name = self.path.resolve().relative_to(self.tree.resolve()).with_suffix("")
        except ValueError:
            raise ConfigError(
                f"is not inside the config tree {self.tree}", file=str(self.path)
            ) from None
        overrides = [f"{key}={value}" for key, value in choices]
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                with initialize_config_dir(config_dir=str(self.tree.resolve()), version_base=None):
                    cfg = compose(config_name=name.as_posix(), overrides=overrides)
        except (HydraException, OmegaConfBaseException, ValueError) as exc:
            where = f" (with {', '.join(overrides)})" if overrides else ""
            raise ConfigError(
                f"upstream's tree does not compose it{where}: {one_line(_first_line(exc))}",
                file=str(self.path),
            ) from None
        OmegaConf.set_struct(cfg, False)
        if "hydra" in cfg:
            del cfg["hydra"]
        return cfg


def _resolved_sweep(cfg: Any, path: Path) -> Mapping[str, Any] | None:
    """The sweep section resolved once, as upstream does: ``\\${...}`` becomes ``${...}``."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    node = cfg.get("sweep")
    if node is None or not OmegaConf.is_config(node):
        return None
    try:
        sweep = OmegaConf.to_container(node, resolve=True)
    except OmegaConfBaseException as exc:
        key = getattr(exc, "full_key", None) or "sweep"
        raise ConfigError(one_line(_first_line(exc)), key=str(key), file=str(path)) from None
    return {str(k): v for k, v in sweep.items()} if isinstance(sweep, Mapping) else None


def _apply(cfg: Any, index: int, params: Mapping[str, Any]) -> None:
    from omegaconf import OmegaConf

    OmegaConf.update(cfg, "index", index, force_add=True)
    for key, value in params.items():
        OmegaConf.update(cfg, key, value, merge=True, force_add=True)


def _is_group(key: str, tree: Path | None) -> bool:
    """A sweep key that picks a config group option (upstream: it has a '/' or names a dir)."""
    return "/" in key or (tree is not None and (tree / key).is_dir())


def _override_value(value: Any) -> str:
    if isinstance(value, list):
        return "[" + ",".join(str(v) for v in value) + "]"
    return str(value)


def _siblings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield from _SIBLING.findall(value)
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _siblings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _siblings(item)


def _first_line(exc: object) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
