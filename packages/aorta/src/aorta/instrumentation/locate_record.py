"""The `first_nonfinite` record of a trial: where its first non-finite value appeared.

Pure data and reading; no torch. The locator (`aorta.instrumentation.locate`) produces a
`Location`; a command workload's processes each write one *process record* into the trial's
locate directory (`AORTA_LOCATE_DIR`), and `read_locate_dir` merges them into the trial's
record. The record is a JSON object, one of

- `{"located": true, "step", "module", "phase", "tensor", "shape", "dtype"}`, or
- `{"located": false, "reason": ...}` with a reason from `NOT_LOCATED_REASONS`.

Files in a run directory are shared, so a process record is validated like any other input:
a malformed one is skipped and counted, never trusted.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Protocol

LOCATE_DIR_VAR: Final = "AORTA_LOCATE_DIR"
"""Set by aorta for one trial: the start-up hook locates in every Python process that sees it."""

PHASES: Final = ("forward", "backward", "optimizer")
TENSORS: Final = ("output", "grad", "param")

NO_TORCH: Final = "no torch"
NONE_SEEN: Final = "no non-finite value seen"
NO_RECORD: Final = "no record written"
UNREADABLE: Final = "unreadable record"
NOT_LOCATED_REASONS: Final = (NO_TORCH, NONE_SEEN, NO_RECORD, UNREADABLE)

# Bounds on what is read back from a trial's locate directory (one file per Python process).
_MAX_FILES: Final = 256
_MAX_FILE_BYTES: Final = 64 * 1024


@dataclass(frozen=True)
class Location:
    """The first non-finite tensor the locator saw.

    `module` is the fully qualified module name (wrapper segments such as FSDP1's
    `_fsdp_wrapped_module` removed); `parameter` names the module's parameter when the tensor
    is a parameter's gradient or the parameter itself (`weight`), else None. `step` counts
    from 0.
    """

    step: int
    module: str
    phase: str
    tensor: str
    shape: tuple[int, ...]
    dtype: str
    parameter: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON form, with `located: true`."""
        return {
            "located": True,
            "step": self.step,
            "module": self.module,
            "phase": self.phase,
            "tensor": self.tensor,
            "shape": list(self.shape),
            "dtype": self.dtype,
            "parameter": self.parameter,
        }

    @classmethod
    def from_dict(cls, data: object) -> Location:
        """Read a location back; `ValueError` naming the key that is wrong."""
        if not isinstance(data, Mapping):
            raise ValueError("expected an object")
        step, module = data.get("step"), data.get("module")
        phase, tensor = data.get("phase"), data.get("tensor")
        shape, dtype = data.get("shape"), data.get("dtype")
        if not isinstance(step, int) or isinstance(step, bool) or step < 0:
            raise ValueError("step: expected an integer >= 0")
        if not isinstance(module, str) or not module or len(module) > 1000:
            raise ValueError("module: expected a non-empty name")
        if phase not in PHASES:
            raise ValueError(f"phase: expected one of {', '.join(PHASES)}")
        if tensor not in TENSORS:
            raise ValueError(f"tensor: expected one of {', '.join(TENSORS)}")
        if not isinstance(shape, list) or len(shape) > 64:
            raise ValueError("shape: expected a list of at most 64 sizes")
        if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape):
            raise ValueError("shape: expected sizes >= 0")
        if not isinstance(dtype, str) or len(dtype) > 64:
            raise ValueError("dtype: expected a dtype name")
        parameter = data.get("parameter")
        if parameter is not None and (not isinstance(parameter, str) or len(parameter) > 200):
            raise ValueError("parameter: expected a parameter name or null")
        return cls(step, module, str(phase), str(tensor), tuple(shape), dtype, parameter)


def not_located(reason: str) -> dict[str, Any]:
    """The record of a trial whose first non-finite value was not located."""
    return {"located": False, "reason": reason}


def location_label(record: Mapping[str, Any] | None) -> str | None:
    """One line for a report: `"blocks.1.mlp_out backward"`, `"not located (no torch)"`;
    None when the trial did not ask for locating."""
    if record is None:
        return None
    if record.get("located"):
        return f"{record.get('module')} {record.get('phase')}"
    return f"not located ({record.get('reason', NO_RECORD)})"


def process_record(*, imported_torch: bool, location: Location | None) -> dict[str, Any]:
    """What one Python process of a command trial writes into the locate directory."""
    return {
        "torch": imported_torch,
        "first_nonfinite": None if location is None else location.to_dict(),
    }


def merge_process_records(
    records: Sequence[Mapping[str, Any]], unreadable: int = 0
) -> dict[str, Any]:
    """The trial's record from its processes' records.

    The earliest location (smallest step) wins: under a launcher every rank locates on its
    own, and the first step any rank went non-finite is where the failure starts. Without a
    location: `NONE_SEEN` if some process used torch, else `NO_TORCH`; no record at all is
    `NO_RECORD` (the process was killed, or its interpreter has no aorta installed), or
    `UNREADABLE` when only malformed files were there.
    """
    located = [r["first_nonfinite"] for r in records if r.get("first_nonfinite")]
    if located:
        return dict(min(located, key=lambda loc: loc["step"]))
    if any(r.get("torch") for r in records):
        return not_located(NONE_SEEN)
    if records:
        return not_located(NO_TORCH)
    return not_located(UNREADABLE if unreadable else NO_RECORD)


def _read_process_record(path: Path) -> dict[str, Any] | None:
    """One process record, validated; None when it is malformed or too large."""
    try:
        with path.open("rb") as handle:
            raw = handle.read(_MAX_FILE_BYTES + 1)
        data = json.loads(raw) if len(raw) <= _MAX_FILE_BYTES else None
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("torch"), bool):
        return None
    found = data.get("first_nonfinite")
    if found is None:
        return {"torch": data["torch"], "first_nonfinite": None}
    try:
        location = Location.from_dict(found)
    except ValueError:
        return None
    return {"torch": data["torch"], "first_nonfinite": location.to_dict()}


def read_locate_dir(directory: Path) -> dict[str, Any]:
    """The trial's `first_nonfinite` from the process records in `directory`."""
    try:
        paths = sorted(p for p in directory.glob("process_*.json") if not p.is_symlink())
    except OSError:
        paths = []
    records: list[dict[str, Any]] = []
    unreadable = 0
    for path in paths[:_MAX_FILES]:
        record = _read_process_record(path)
        if record is None:
            unreadable += 1
        else:
            records.append(record)
    return merge_process_records(records, unreadable)


class _HasFound(Protocol):
    found: Location | None


def trial_record(locator: _HasFound | None) -> dict[str, Any]:
    """An in-process trial's record from its locator (None: torch was not importable)."""
    if locator is None:
        return not_located(NO_TORCH)
    if locator.found is None:
        return not_located(NONE_SEEN)
    return locator.found.to_dict()
