"""Pure checks of `submit`'s flags: `--array-subset`, `--chain` and `--local`."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from oellm_autoexp.errors import AutoexpUsageError

_ITEM = r"^(\d+)(?:-(\d+))?$"  # compiled by `re` on first use (only --array-subset)


def parse_subset(text: str, indices: Sequence[int]) -> list[int]:
    """Job indices of ``3,5-7`` (the plan's ``#`` column), checked against the plan's `indices`.

    A malformed item, a descending range or an index the plan does not have is a usage error
    naming it.
    """
    known = set(indices)
    chosen: set[int] = set()
    for item in text.split(","):
        match = re.match(_ITEM, item.strip())
        if match is None:
            raise AutoexpUsageError(
                f"--array-subset: {item.strip()!r} is not an index or a range like 5-7 "
                f"(expected e.g. 3,5-7)"
            )
        low = int(match.group(1))
        high = int(match.group(2)) if match.group(2) else low
        if high < low:
            raise AutoexpUsageError(f"--array-subset: range {item.strip()} runs backwards")
        wanted = set(range(low, high + 1))
        missing = sorted(wanted - known)
        if missing:
            span = f"{min(known)}-{max(known)}" if known else "none"
            raise AutoexpUsageError(
                f"--array-subset: job {missing[0]} is not in the plan (its jobs: {span})"
            )
        chosen |= wanted
    return sorted(chosen)


def check_chain(links: int) -> int:
    """`--chain N`: at least 1 submission."""
    if links < 1:
        raise AutoexpUsageError(f"--chain: expected a number of submissions >= 1, got {links}")
    return links


def check_local(config: Mapping[str, Any], *, monitor: bool, dry_run: bool) -> None:
    """`--local` runs the jobs as children of this process, without SLURM (slurm.local)."""
    if dry_run:
        raise AutoexpUsageError("--local and --dry-run exclude each other")
    if not monitor:
        raise AutoexpUsageError(
            "--local runs the jobs inside this command: it cannot return before they end "
            "(drop --no-monitor)"
        )
    if (config.get("slurm") or {}).get("use_srun", True):
        raise AutoexpUsageError(
            "--local runs the scripts without SLURM, but they call srun (slurm.use_srun is "
            "true); add the override slurm.use_srun=false"
        )


def describe_selection(only: Sequence[int] | None, links: int) -> str | None:
    """What `--array-subset` / `--chain` change about the plan's sbatch calls (for --dry-run)."""
    parts = []
    if only is not None:
        from oellm_autoexp.monitor.submission import array_spec

        parts.append(f"--array-subset: only jobs {array_spec(only)} are submitted")
    if links > 1:
        parts.append(
            f"--chain {links}: {links} submissions, each with --dependency=afterany on the one "
            "before"
        )
    return "; ".join(parts) or None
