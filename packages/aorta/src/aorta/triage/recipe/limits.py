"""Documented size limits of a recipe, checked before anything is allocated.

Recipes are shared between colleagues and run as service accounts, so a hostile or mistyped
file must fail with one line instead of exhausting memory or hanging. Each count limit can be
raised for one run through its environment variable:

| limit                          | default    | variable              |
|--------------------------------|------------|-----------------------|
| trials per cell                | 10,000     | `AORTA_MAX_TRIALS`    |
| steps per trial                | 10,000,000 | `AORTA_MAX_STEPS`     |

Fixed bounds (a legitimate recipe is far below them): recipe files of at most 16 MiB,
nesting of at most 64 levels, at most 100,000 values once YAML aliases are expanded.
"""

from __future__ import annotations

import os

MAX_RECIPE_BYTES = 16 * 1024 * 1024
MAX_NESTING = 64
MAX_EXPANDED_NODES = 100_000

_COUNT_LIMITS: dict[str, tuple[str, int]] = {
    "trials": ("AORTA_MAX_TRIALS", 10_000),
    "steps": ("AORTA_MAX_STEPS", 10_000_000),
}


def count_limit(key: str) -> tuple[int, str] | None:
    """(limit, variable that raises it) for count `key` (`trials`, `steps`), else None.

    A variable that is not a positive integer is ignored (the default applies): a typo in it
    must not lift the limit.
    """
    entry = _COUNT_LIMITS.get(key)
    if entry is None:
        return None
    variable, default = entry
    raw = os.environ.get(variable, "")
    return (int(raw) if raw.isdigit() and int(raw) > 0 else default), variable
