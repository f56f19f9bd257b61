"""`RunManifest`: a run's own state, written atomically as `run.json`.

What a resume or a re-analysis needs to know of the attempts before it: when the run started
and was resumed, which executor runs it, the interleaved rounds and their shuffle seed,
whether the last attempt was interrupted and which cells it never reached, and why a cell
errored. Before `run.json` existed that state was read back from `matrix.json` (a report);
a run directory written then has no manifest, and one is derived from its matrix once
(`manifest_from_matrix`), so old run directories still resume and re-analyse.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from aorta.atomic import write_json_atomic
from aorta.errors import AortaUsageError
from aorta.triage.layout import RunDir
from aorta.triage.run.rundir import load_mapping

ExecutorName = Literal["local", "slurm"]
MANIFEST_VERSION = 1
_EXECUTORS = ("local", "slurm")


@dataclass(frozen=True)
class RunManifest:
    """The state of one run directory across its attempts."""

    run_timestamp: str  # ISO UTC of the first attempt
    executor: ExecutorName
    order_seed: int | None = None  # interleaved order's shuffle seed; None for sequential
    resumed_at: tuple[str, ...] = ()  # ISO UTC of each `--resume`
    rounds: tuple[tuple[str, ...], ...] = ()  # cells run per interleaved round, all attempts
    interrupted: bool = False  # the last attempt stopped early (Ctrl-C, a crash)
    cells_not_run: tuple[str, ...] = ()  # cells the last attempt never reached
    cell_errors: Mapping[str, str] = field(default_factory=dict)  # why a cell errored

    def resumed(self, moment: str) -> RunManifest:
        """This manifest with one more resume at `moment`."""
        return dataclasses.replace(self, resumed_at=(*self.resumed_at, moment))

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (`run.json`)."""
        return {
            "version": MANIFEST_VERSION,
            "run_timestamp": self.run_timestamp,
            "executor": self.executor,
            "order_seed": self.order_seed,
            "resumed_at": list(self.resumed_at),
            "rounds": [list(names) for names in self.rounds],
            "interrupted": self.interrupted,
            "cells_not_run": list(self.cells_not_run),
            "cell_errors": dict(self.cell_errors),
        }


def write_manifest(run: RunDir, manifest: RunManifest) -> None:
    """Write `run.json` atomically (it replaces the one before: it is state, not a record)."""
    write_json_atomic(run.manifest, manifest.to_dict(), overwrite=True)


def read_manifest(
    run: RunDir, *, executor: ExecutorName, fallback_timestamp: str
) -> RunManifest | None:
    """`run.json`; for a run directory from before it, one derived from `matrix.json`; None
    when the run has neither yet (it died before its first matrix). `executor`: what the
    derived manifest records (a run of that time says so only through its `slurm/` folder);
    `fallback_timestamp`: its start time when its matrix lacks one. Anything malformed is a
    one-line `AortaUsageError` naming the file and key.
    """
    if run.manifest.exists():
        return _parse(load_mapping(run.manifest), str(run.manifest))
    if run.matrix_json.exists():
        data = load_mapping(run.matrix_json)
        return manifest_from_matrix(data, executor, str(run.matrix_json), fallback_timestamp)
    return None


def manifest_from_matrix(
    data: Mapping[str, Any], executor: ExecutorName, label: str, fallback_timestamp: str
) -> RunManifest:
    """The manifest a run directory without `run.json` implies, read from its `matrix.json`
    (`label`: its path, for errors)."""
    order = data.get("order")
    order = order if isinstance(order, Mapping) else {}
    cells = data.get("cells")
    errors = {}
    for cell in cells if isinstance(cells, list) else ():
        if isinstance(cell, Mapping) and cell.get("error"):
            errors[_text(label, "cells[].name", cell.get("name"))] = str(cell["error"])
    return _parse(
        {
            "run_timestamp": data.get("run_timestamp") or fallback_timestamp,
            "executor": executor,
            "order_seed": order.get("seed"),
            "resumed_at": data.get("resumed_at", []),
            "rounds": order.get("rounds", []),
            "interrupted": bool(data.get("interrupted")),
            "cells_not_run": data.get("cells_not_run", []),
            "cell_errors": errors,
        },
        label,
    )


def _parse(data: Mapping[str, Any], label: str) -> RunManifest:
    executor = data.get("executor")
    if executor not in _EXECUTORS:
        raise AortaUsageError(f"{label}: executor: expected one of local, slurm, got {executor!r}")
    seed = data.get("order_seed")
    if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
        raise AortaUsageError(f"{label}: order_seed: expected an integer, got {seed!r:.80}")
    rounds = data.get("rounds", [])
    if not isinstance(rounds, list):
        raise AortaUsageError(f"{label}: rounds: expected a list, got {rounds!r:.80}")
    errors = data.get("cell_errors", {})
    if not isinstance(errors, Mapping):
        raise AortaUsageError(f"{label}: cell_errors: expected a mapping, got {errors!r:.80}")
    return RunManifest(
        run_timestamp=_text(label, "run_timestamp", data.get("run_timestamp")),
        executor=executor,
        order_seed=seed,
        resumed_at=_texts(label, "resumed_at", data.get("resumed_at", [])),
        rounds=tuple(_texts(label, f"rounds[{i}]", r) for i, r in enumerate(rounds)),
        interrupted=data.get("interrupted") is True,
        cells_not_run=_texts(label, "cells_not_run", data.get("cells_not_run", [])),
        cell_errors={_text(label, "cell_errors", k): str(v) for k, v in errors.items()},
    )


def _text(label: str, key: str, value: object) -> str:
    if not isinstance(value, str):
        raise AortaUsageError(f"{label}: {key}: expected a string, got {value!r:.80}")
    return value


def _texts(label: str, key: str, value: object) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise AortaUsageError(f"{label}: {key}: expected a list of strings, got {value!r:.80}")
    return tuple(_text(label, f"{key}[{i}]", item) for i, item in enumerate(value))
