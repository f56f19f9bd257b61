"""Flaky nodes: which nodes a session's restarts should avoid (`sbatch --exclude`).

Pure decision logic; the controller applies it. An attempt counts against its nodes only when it
failed with a node-level error (`NODE_ERROR_TYPES`: SLURM's NODE_FAIL/BOOT_FAIL, an NCCL error,
a GPU hardware error such as an Xid or ECC report in the log). A node is excluded once that many
node-level failures (`after`, counted over every job of the session) ran on it. The list is
bounded (`limit`): once full, no node is added (and none dropped: re-admitting a bad node to make
room would defeat the list), and the monitor says so.

A multi-node attempt counts against each of its nodes (SLURM does not say which one failed), so
a bad node among healthy ones is found as the attempts move between nodes.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# Classification error types that blame the hardware or the fabric, not the job.
NODE_ERROR_TYPES = frozenset({"node_failure", "nccl", "gpu_hardware"})

_RANGE = re.compile(r"^(\d+)-(\d+)$")


def expand_hostlist(text: str) -> list[str]:
    """Node names of a SLURM hostlist: ``gpu[01-03,07],login1`` -> gpu01 gpu02 gpu03 gpu07 login1.

    Covers the forms squeue and sacct print (one bracket group per name, zero-padded ranges).
    ``None assigned`` and the empty string (a job that never started) have no nodes.
    """
    text = text.strip()
    if not text or text.lower().startswith("none"):
        return []
    names: list[str] = []
    for item in re.findall(r"[^,\[]+(?:\[[^\]]*\])?[^,]*", text):
        head, bracket, rest = item.partition("[")
        if not bracket:
            names.append(item)
            continue
        body, _, tail = rest.partition("]")
        for part in body.split(","):
            match = _RANGE.match(part)
            if match is None:
                names.append(f"{head}{part}{tail}")
                continue
            low, high = match.group(1), match.group(2)
            width = len(low)
            names.extend(f"{head}{n:0{width}d}{tail}" for n in range(int(low), int(high) + 1))
    return names


def node_level_failure(metadata: Mapping[str, Any]) -> bool:
    """Whether an attempt's classification blames its node (see `NODE_ERROR_TYPES`)."""
    return metadata.get("error_type") in NODE_ERROR_TYPES


@dataclass(frozen=True)
class ExclusionDecision:
    """The session's excluded nodes after a failure, what was added, and what did not fit."""

    nodes: list[str]
    added: list[str]
    over_limit: list[str]


def decide_exclusions(
    failures: Iterable[Mapping[str, Any]],
    current: Sequence[str],
    *,
    after: int,
    limit: int,
) -> ExclusionDecision:
    """The excluded-node list given every finished attempt's metadata of a session.

    `failures` are the attempts' classification metadata (``error_type``, ``nodes``); `current`
    the list so far (kept as is: an exclusion is never undone by this function). `after` is the
    number of node-level failures on one node that excludes it (0: never exclude); `limit` the
    most nodes the list may hold.
    """
    nodes = list(current)
    if after <= 0:
        return ExclusionDecision(nodes, [], [])
    counts: Counter[str] = Counter()
    for meta in failures:
        if node_level_failure(meta):
            counts.update(set(expand_hostlist(str(meta.get("nodes") or ""))))
    due = sorted(n for n, c in counts.items() if c >= after and n not in nodes)
    room = max(limit - len(nodes), 0)
    added, over = due[:room], due[room:]
    return ExclusionDecision(nodes + added, added, over)


def exclude_argument(user_exclude: Any, auto: Sequence[str]) -> str | None:
    """The ``--exclude=`` value for a restart: the config's own exclusions plus `auto`.

    The command-line option replaces a script's ``#SBATCH --exclude``, so the user's list from
    ``slurm.sbatch.exclude`` is kept in front. None when there is nothing to add.
    """
    if not auto:
        return None
    given = [n for n in str(user_exclude or "").split(",") if n.strip()]
    merged = given + [n for n in auto if n not in given]
    return ",".join(merged)
