"""Excluded nodes of a project: kept across its sessions, and pushed into queued jobs.

A session decides which nodes to avoid (`node_health`); this module makes the decision last and
reach the jobs already waiting:

- `<state_dir>/excluded_nodes.json` holds the project's list (every session of the project
  shares its `monitoring_state` directory). It is updated under a file lock (two monitors of
  the project may add nodes at once) and written atomically; a later session starts from it,
  so a node found bad yesterday is avoided by today's first submission.
- `queued_job_ids` picks the jobs SLURM still holds in its queue; the controller asks the client
  to set their excluded nodes (`scontrol update JobId=<id> ExcNodeList=<nodes>`, upstream issue
  #55), since an ``--exclude`` given to later submissions does not reach them.

A damaged file is an error naming it (never silently an empty list: that would send jobs back to
nodes known to be bad).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path

from oellm_autoexp.atomic import write_text_atomic
from oellm_autoexp.errors import AutoexpUsageError
from oellm_autoexp.persistence.session import JobRecord
from oellm_autoexp.persistence.states import MonitorState
from toolkit_core.locks import hold_lock

EXCLUSIONS_FILE = "excluded_nodes.json"
_FORMAT = "oellm-autoexp/excluded-nodes/1"
LOCK_TIMEOUT_S = 30.0


class ExclusionsCorruptError(AutoexpUsageError):
    """The project's excluded-nodes file is not one this tool wrote (exit 2)."""


def exclusions_path(state_dir: Path) -> Path:
    """Where a project's excluded nodes are kept."""
    return Path(state_dir) / EXCLUSIONS_FILE


def load_project_exclusions(state_dir: Path) -> list[str]:
    """The project's excluded nodes, in the order they were added ([] when none yet)."""
    path = exclusions_path(state_dir)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ExclusionsCorruptError(
            f"{path}: not valid JSON ({exc.msg}); fix or remove it"
        ) from None
    nodes = data.get("nodes") if isinstance(data, dict) else None
    if data.get("format") != _FORMAT if isinstance(data, dict) else True:
        raise ExclusionsCorruptError(f"{path}: format: expected {_FORMAT!r}; fix or remove it")
    if not isinstance(nodes, list) or not all(isinstance(n, str) and n for n in nodes):
        raise ExclusionsCorruptError(f"{path}: nodes: expected a list of node names")
    return list(nodes)


def add_project_exclusions(state_dir: Path, nodes: Iterable[str]) -> list[str]:
    """Add `nodes` to the project's list (locked, atomic); return the whole list after it."""
    path = exclusions_path(state_dir)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with hold_lock(path.with_suffix(".lock"), timeout_s=LOCK_TIMEOUT_S):
        current = load_project_exclusions(state_dir)
        merged = current + [n for n in dict.fromkeys(nodes) if n not in current]
        if merged != current:
            document = {"format": _FORMAT, "nodes": merged}
            write_text_atomic(
                path, json.dumps(document, indent=2) + "\n", overwrite=True, mode=0o600
            )
    return merged


def merged_nodes(*lists: Sequence[str]) -> list[str]:
    """The union of node lists, first occurrence first."""
    return list(dict.fromkeys(n for nodes in lists for n in nodes))


def queued_job_ids(jobs: Iterable[JobRecord]) -> list[str]:
    """SLURM ids of the jobs still waiting in the queue (submitted, not started)."""
    return [
        job.job_id
        for job in jobs
        if job.job_id and job.state == MonitorState.PENDING and job.slurm_state in (None, "PENDING")
    ]
