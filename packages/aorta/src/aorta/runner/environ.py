"""Apply a trial's environment variables and put the process environment back afterwards."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Final

from aorta.errors import AortaUsageError
from aorta.registry.models import Mitigation

# Every trial also carries its seed in these variables (besides `{seed}` in a command's argv and
# `TrialContext.seed`): a script that hard-codes its seed reads it with one line, and trials that
# ignore their seed are found as copies by the matrix (`aorta.triage.analysis.independence`).
SEED_VARIABLE: Final = "AORTA_SEED"
HASH_SEED_VARIABLE: Final = "PYTHONHASHSEED"
# Python refuses to start when PYTHONHASHSEED is outside 0..2**32-1.
_HASH_SEED_RANGE: Final = 2**32


def seed_env(seed: int) -> dict[str, str]:
    """The seed variables of a trial seeded with `seed`: `AORTA_SEED` and `PYTHONHASHSEED`.

    `PYTHONHASHSEED` is the seed modulo 2**32, the range Python accepts.
    """
    return {SEED_VARIABLE: str(seed), HASH_SEED_VARIABLE: str(seed % _HASH_SEED_RANGE)}


def with_seed(env: Mapping[str, str], seed: int) -> dict[str, str]:
    """A trial's variables: its seed variables (`seed_env`), then the cell's `env` on top.

    A cell that sets `AORTA_SEED` or `PYTHONHASHSEED` itself (a mitigation or `extra_env`)
    keeps its value: it is an explicit choice, such as a cell that pins one seed on purpose.
    Its trials then all see that value; if that makes them copies, the matrix says so.
    """
    return {**seed_env(seed), **env}


class MitigationConflictError(AortaUsageError):
    """Two mitigations of one request set the same variable to different values."""


def merge_env(mitigations: Sequence[Mitigation], extra_env: Mapping[str, str]) -> dict[str, str]:
    """Union the mitigations' env bundles in order, then apply `extra_env` on top.

    Two mitigations that set one variable to different values are a contradiction, not a
    stacking: that raises `MitigationConflictError`. `extra_env` may override anything: it is
    the explicit per-experiment knob.
    """
    merged: dict[str, str] = {}
    owner: dict[str, str] = {}
    for mitigation in mitigations:
        for key, value in mitigation.env.items():
            if key in merged and merged[key] != value:
                raise MitigationConflictError(
                    f"mitigations {owner[key]!r} and {mitigation.name!r} both set {key} "
                    f"({merged[key]!r} vs {value!r})"
                )
            merged[key] = value
            owner[key] = mitigation.name
    merged.update(extra_env)
    return merged


@contextmanager
def applied_environ(env: Mapping[str, str]) -> Iterator[None]:
    """Set `env` in `os.environ` for the duration of the block, then restore exactly.

    Variables that did not exist before are removed again; the restore also runs when the
    block raises (including KeyboardInterrupt).
    """
    saved = {key: os.environ.get(key) for key in env}
    try:
        os.environ.update(env)
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
