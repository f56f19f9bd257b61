"""Deterministic job ids and names: same config -> same ids on any machine.

A job id is the blake2b digest of the canonical JSON of the project name and the job's params
(sorted keys, no whitespace, floats in Python's shortest round-trip repr), never Python's
`hash()`, which is salted per process.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any

from oellm_autoexp.errors import ConfigError
from oellm_autoexp.json_encode import reusable_encoder

try:  # hashlib's own blake2b (hashlib re-exports it), without the OpenSSL library that
    # importing hashlib loads: ~2 ms of every plan and dry run, none of it used here.
    from _blake2 import blake2b
except ImportError:  # an interpreter built without the module
    from hashlib import blake2b

ID_HEX_CHARS = 12
# Job names become directory names and SLURM job names: no path separators, no shell syntax.
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+=-]{0,199}")
# One encoder for every id: `json.dumps` with options builds a new encoder per call.
_CANONICAL = reusable_encoder(sort_keys=True, separators=(",", ":"))


def canonical_json(data: Any) -> str:
    """The canonical JSON text hashed for ids (NaN/inf are rejected)."""
    try:
        return _CANONICAL(data)
    except ValueError as exc:  # NaN / inf in a param
        raise ConfigError(f"sweep value is not representable as JSON: {exc}", key="sweep") from None
    except TypeError as exc:
        raise ConfigError(f"sweep value is not plain data: {exc}", key="sweep") from None


def job_id(project: str, params: Mapping[str, Any]) -> str:
    """12 hex chars of blake2b over the canonical JSON of (project, params)."""
    plain = params if isinstance(params, dict) else dict(params)
    # The text of canonical_json({"project": project, "params": plain}) (sorted keys put
    # "params" first), without one more level of dict for the encoder to sort and walk.
    text = f'{{"params":{canonical_json(plain)},"project":{canonical_json(project)}}}'
    return hex_digest(text.encode("ascii"), ID_HEX_CHARS // 2)


def hex_digest(data: bytes, size: int) -> str:
    """blake2b of `data`, `size` bytes, as hex: job ids and plan ids."""
    return blake2b(data, digest_size=size).hexdigest()


def job_name(template: str, fields: Mapping[str, Any], *, index: int) -> str:
    """Render `template` for one job and check the result is a safe name."""
    try:
        _checked_template(template)  # no attribute access, no giant widths
        name = template.format_map(fields)
    except (KeyError, AttributeError, IndexError, ValueError) as exc:
        raise ConfigError(
            f"cannot render {template!r} for job {index}: {type(exc).__name__} {exc}",
            key="sweep.name_template",
        ) from None
    check_name(name, key="sweep.name_template", what=f"job name of job {index}")
    return name


def check_name(name: str, *, key: str, what: str) -> None:
    """A name that becomes a path component or SLURM job name must be plain and safe."""
    if not NAME_PATTERN.fullmatch(name) or name in (".", ".."):
        raise ConfigError(
            f"{what} {name!r} is not a safe name (start with a letter or digit; then letters, "
            "digits, '.', '_', '-', '+', '='; at most 200 characters)",
            key=key,
        )


@functools.cache
def _checked_template(template: str) -> None:
    """`template_fields` once per template (a sweep names every job with the same one)."""
    from oellm_autoexp.backends.command import template_fields

    template_fields(template)
