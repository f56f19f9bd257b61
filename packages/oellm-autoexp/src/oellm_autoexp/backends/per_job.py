"""The backend instance each job was planned with: `backend.*` sweep params applied.

Shared by planning (`planning.build_plan`) and the monitor's restart hook
(`monitor.restart_command`), which rebuilds a job's backend from the session's config; it lives
below both so the monitor never imports the planner.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

from oellm_autoexp.backends.base import (
    BackendConfig,
    BackendInterface,
    JobContext,
    instantiate_backend,
)
from oellm_autoexp.errors import ConfigError
from oellm_autoexp.sweep.ids import canonical_json

BACKEND_PREFIX = "backend."


def per_job_backends(
    base_config: BackendConfig, default: BackendInterface, contexts: Sequence[JobContext]
) -> list[BackendInterface]:
    """The backend instance of each job: `backend.*` sweep params applied to the config.

    Overrides are type-checked through compoconf once per distinct (key, value), and backends
    are cached per distinct override set.
    """
    from compoconf import parse_config

    from oellm_autoexp.config.loader import translate_parse_error

    if not any(_sweeps_backend(tuple(ctx.params)) for ctx in contexts):
        return [default] * len(contexts)
    base_data = _dump(base_config)
    checked: set[tuple[str, str]] = set()
    cache: dict[str, BackendInterface] = {}
    result = []
    for ctx in contexts:
        overrides = {
            k[len(BACKEND_PREFIX) :]: v
            for k, v in ctx.params.items()
            if k.startswith(BACKEND_PREFIX)
        }
        if not overrides:
            result.append(default)
            continue
        cache_key = canonical_json(overrides)
        backend = cache.get(cache_key)
        if backend is None:
            for key, value in overrides.items():
                marker = (key, canonical_json(value))
                if marker in checked:
                    continue
                checked.add(marker)
                data = _set_path(base_data, key, value)
                try:
                    parse_config(
                        type(base_config),
                        data,
                        strict=True,
                        strict_types=True,
                        key_history="backend",
                    )
                except (ValueError, KeyError, TypeError) as exc:
                    error = translate_parse_error(exc, None)
                    raise ConfigError(
                        f"{error.detail} (set by the sweep in job {ctx.index})",
                        key=error.key or f"backend.{key}",
                    ) from None
            data = base_data
            for key, value in overrides.items():
                data = _set_path(data, key, value)
            job_config = parse_config(type(base_config), data, strict=True, strict_types=True)
            backend = instantiate_backend(job_config)
            cache[cache_key] = backend
        result.append(backend)
    return result


def backend_for_job(config: BackendConfig, ctx: JobContext) -> BackendInterface:
    """The backend instance `ctx` was planned with (its `backend.*` sweep params applied)."""
    return per_job_backends(config, instantiate_backend(config), [ctx])[0]


def _dump(config: BackendConfig) -> dict[str, Any]:
    from compoconf import dump_config

    data = dump_config(config)
    assert isinstance(data, dict)
    return data


def _set_path(data: Mapping[str, Any], dotted: str, value: Any) -> dict[str, Any]:
    """A copy of `data` with `dotted` (``a.b.c``) set to `value`."""
    head, _, rest = dotted.partition(".")
    copy = dict(data)
    if rest:
        inner = copy.get(head)
        copy[head] = _set_path(inner if isinstance(inner, Mapping) else {}, rest, value)
    else:
        copy[head] = value
    return copy


@functools.lru_cache(maxsize=256)
def _sweeps_backend(keys: tuple[str, ...]) -> bool:
    """Whether params with these keys change the backend (jobs of a sweep share their keys)."""
    return any(k.startswith(BACKEND_PREFIX) for k in keys)
