"""Derived values that follow the sweep: interpolations resolved per job, after its sweep values.

A config value such as ``train_iters: ${oc.divi:1024000,${backend.megatron.global_batch_size}}``
depends on a key the sweep sets. Resolving it once at load time would give every job the base
value (or fail with "Interpolation key not found" when only the sweep sets the key). So the
loader finds such values (`split_derived`): every interpolation that refers, directly or through
another derived value, to a key the sweep sets (``sweep.axes`` or ``sweep.base``). They are
recorded in `RootConfig.derived` (dotted key -> interpolation text) and `resolve_for_job`
resolves them for each job with that job's sweep values applied; the planner adds the results to
the job's params (after its id and name are fixed), so they reach the backend and the `#SBATCH`
directives like any swept value, and restarts rebuild the same command from ``plan.json``.

Only ``backend.*`` and ``slurm.sbatch.*`` values can differ per job; a derived value anywhere
else is an error naming its key.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from oellm_autoexp.errors import ConfigError

PER_JOB_PREFIXES = ("backend.", "slurm.sbatch.")
# A plain absolute reference ``${a.b.c}`` (resolver calls such as ``${oc.env:X}`` have a colon).
_REFERENCE = re.compile(r"\$\{([A-Za-z_][\w-]*(?:\.[\w-]+)*)\}")


@dataclass(frozen=True)
class DerivedSplit:
    """The derived values of a config and the swept keys the base config lacks."""

    derived: dict[str, str]  # dotted key -> interpolation text
    placeholders: dict[str, Any]  # swept keys missing from the config -> a value to load with


def interpolations(data: Any, prefix: str = "") -> dict[str, str]:
    """Every string leaf of `data` (unresolved) that contains an interpolation, by dotted key."""
    found: dict[str, str] = {}
    if isinstance(data, Mapping):
        for key, value in data.items():
            found.update(interpolations(value, f"{prefix}{key}."))
    elif isinstance(data, str) and "${" in data:
        found[prefix.rstrip(".")] = data
    return found


def split_derived(
    unresolved: Mapping[str, Any], points: Iterable[Mapping[str, Any]], *, source: str
) -> DerivedSplit:
    """Which interpolations must be resolved per job, given the sweep's `points`.

    `unresolved` is the config before interpolation, without its `sweep` section. Raises
    ConfigError for a derived value outside `PER_JOB_PREFIXES`.
    """
    first: dict[str, Any] = {}
    swept: set[str] = set()
    for point in points:
        for key, value in point.items():
            swept.add(key)
            first.setdefault(key, value)
    candidates = interpolations(unresolved)
    derived: dict[str, str] = {}
    changed = True
    while changed:  # a value that refers to a derived value is derived too
        changed = False
        for key, text in candidates.items():
            if key in derived:
                continue
            refs = set(_REFERENCE.findall(text))
            if any(_within(ref, swept) or _within(ref, derived) for ref in refs):
                derived[key] = text
                changed = True
    for key, text in derived.items():
        if not key.startswith(PER_JOB_PREFIXES):
            raise ConfigError(
                f"{text!r} refers to a value the sweep sets, but only backend.* and "
                "slurm.sbatch.* values can differ per job",
                key=key,
                file=source,
            )
    placeholders = {key: first[key] for key in swept if not _has(unresolved, key)}
    return DerivedSplit(derived, placeholders)


def _within(ref: str, keys: Iterable[str]) -> bool:
    """Whether `ref` names one of `keys` or something inside / above one of them."""
    return any(ref == key or ref.startswith(key + ".") or key.startswith(ref + ".") for key in keys)


def _has(data: Mapping[str, Any], dotted: str) -> bool:
    node: Any = data
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return False
        node = node[part]
    return True


def resolve_for_job(
    config: Mapping[str, Any],
    derived: Mapping[str, str],
    params: Mapping[str, Any],
    *,
    job: str,
) -> dict[str, Any]:
    """The derived values of one job: `derived` resolved with `params` applied to `config`.

    `config` is the dumped (resolved) base config. A derived key the job's params set
    explicitly keeps that value (it is not returned). Errors name the key and the job.
    """
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    cfg = OmegaConf.create({k: v for k, v in config.items() if k != "derived"})
    for key, value in params.items():
        OmegaConf.update(cfg, key, value, merge=False, force_add=True)
    wanted = [key for key in derived if key not in params]
    for key in wanted:
        OmegaConf.update(cfg, key, derived[key], merge=False, force_add=True)
    values: dict[str, Any] = {}
    for key in wanted:
        try:
            value = OmegaConf.select(cfg, key, throw_on_resolution_failure=True)
            if OmegaConf.is_config(value):
                value = OmegaConf.to_container(value, resolve=True)
        except (OmegaConfBaseException, ValueError, ArithmeticError) as exc:
            message = getattr(exc, "msg", None) or str(exc)
            detail = " ".join(str(message).split())
            raise ConfigError(
                f"cannot resolve {derived[key]!r} for job {job}: {detail}", key=key
            ) from None
        values[key] = value
    return values
