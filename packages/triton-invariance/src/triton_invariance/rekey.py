"""`triton-invariance rekey`: move baselines filed under an older key to the key compiles use now.

Two older keys are still read (with a note): the argument-name-keyed signature hash of releases
before position keys, and the single per-signature file of releases before per-autotune-key
baselines. Neither file holds what its new key is made of (the kernel's argument types and, for
an autotuned kernel, the autotune key values), so the new keys come from a current run: the files
a `TRITON_INVARIANCE_COMMIT=1` run (or the pytest gate's commit) wrote into another directory,
which record the old keys they supersede (`family`, `legacy_signature`). For each of them whose
baseline is only found under an old key, the old baseline (fingerprint, config, everything
recorded) is written under the new key: the committed fingerprint is kept, never replaced by the
current run's.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from pathlib import Path

from triton_invariance.storage import (
    Baseline,
    baseline_path,
    family_baselines,
    find_baseline,
    recorded_fallbacks,
)

# What a per-key / position-keyed file records about its key; copied from the current file.
_KEY_RECORDS = ("family", "autotune_key", "legacy_signature")


@dataclasses.dataclass(frozen=True)
class Rekey:
    """One re-keyed file: `baseline` (the old content under the new key) goes to `target`."""

    source: Path
    target: Path
    why: str
    baseline: Baseline


@dataclasses.dataclass(frozen=True)
class RekeyPlan:
    """What `rekey` would do: the files to write, and old files no compile reads any more
    (their variant's baseline is already under its own key)."""

    writes: list[Rekey]
    superseded: list[Path]


def plan_rekeys(
    current: Sequence[Baseline], base: str | os.PathLike[str] | None = None
) -> RekeyPlan:
    """The files to write so each of `current` finds its baseline under its own key.

    A current fingerprint that has no baseline at all, or is a new autotune key next to per-key
    baselines of its signature (`check` calls it `new`), needs none.
    """
    names = {f"{b.kernel_name}_{b.signature_hash}.json" for b in current}
    writes: list[Rekey] = []
    superseded: set[Path] = set()
    for now in current:
        target = baseline_path(now.kernel_name, now.signature_hash, base)
        if target.exists():
            for old_hash, _ in recorded_fallbacks(now):
                old = baseline_path(now.kernel_name, old_hash, base)
                if old.exists() and old.name not in names:
                    superseded.add(old)
            continue
        family = now.recorded.get("family")
        if isinstance(family, str) and family_baselines(now.kernel_name, family, base):
            continue
        found = find_baseline(now.kernel_name, now.signature_hash, recorded_fallbacks(now), base)
        if found is None or found.why is None:
            continue
        keys = {k: now.recorded[k] for k in _KEY_RECORDS if k in now.recorded}
        rekeyed = dataclasses.replace(
            found.baseline,
            signature_hash=now.signature_hash,
            recorded={**found.baseline.recorded, **keys},
        )
        writes.append(Rekey(found.path, target, found.why, rekeyed))
    return RekeyPlan(writes, sorted(superseded))
