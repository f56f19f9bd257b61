"""The `first_nonfinite` record: a command trial's process records, merged and validated."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aorta.instrumentation.locate_record import (
    NO_RECORD,
    NO_TORCH,
    NONE_SEEN,
    UNREADABLE,
    Location,
    location_label,
    merge_process_records,
    process_record,
    read_locate_dir,
)
from aorta.instrumentation.locate_startup import PTH_LINE

FC2 = Location(5, "layers.1.mlp.fc2", "backward", "grad", (8, 64), "float32")
EMB = Location(3, "tok_emb", "forward", "output", (8, 64, 64), "bfloat16")


def test_the_earliest_step_over_all_processes_wins() -> None:
    records = [
        process_record(imported_torch=True, location=FC2),
        process_record(imported_torch=False, location=None),
        process_record(imported_torch=True, location=EMB),
    ]
    assert merge_process_records(records) == EMB.to_dict()


@pytest.mark.parametrize(
    ("records", "unreadable", "reason"),
    [
        ([process_record(imported_torch=True, location=None)], 0, NONE_SEEN),
        ([process_record(imported_torch=False, location=None)], 0, NO_TORCH),
        ([], 0, NO_RECORD),
        ([], 2, UNREADABLE),
    ],
)
def test_without_a_location_the_reason_says_why(
    records: list[dict[str, object]], unreadable: int, reason: str
) -> None:
    assert merge_process_records(records, unreadable) == {"located": False, "reason": reason}


def test_labels() -> None:
    assert location_label(FC2.to_dict()) == "layers.1.mlp.fc2 backward"
    assert location_label({"located": False, "reason": NO_TORCH}) == "not located (no torch)"
    assert location_label(None) is None


def _write(directory: Path, name: str, data: object) -> None:
    (directory / name).write_text(json.dumps(data))


def test_read_locate_dir_skips_malformed_and_planted_records(tmp_path: Path) -> None:
    _write(tmp_path, "process_1.json", process_record(imported_torch=True, location=FC2))
    bad = FC2.to_dict() | {"phase": "sideways"}
    _write(tmp_path, "process_2.json", {"torch": True, "first_nonfinite": bad})
    _write(tmp_path, "process_3.json", ["not", "an", "object"])
    (tmp_path / "process_4.json").write_text("{half a file")
    # A symlink planted in the directory is not followed (it could point anywhere).
    target = tmp_path.parent / "elsewhere.json"
    _write(target.parent, target.name, process_record(imported_torch=True, location=EMB))
    (tmp_path / "process_5.json").symlink_to(target)
    assert read_locate_dir(tmp_path) == FC2.to_dict()


def test_read_locate_dir_of_only_malformed_records_is_unreadable(tmp_path: Path) -> None:
    _write(tmp_path, "process_1.json", {"torch": "yes"})
    assert read_locate_dir(tmp_path) == {"located": False, "reason": UNREADABLE}
    assert read_locate_dir(tmp_path / "missing") == {"located": False, "reason": NO_RECORD}


@pytest.mark.parametrize(
    ("key", "value"),
    [("step", -1), ("step", True), ("module", ""), ("tensor", "weight"), ("shape", [1, -2])],
)
def test_a_location_is_validated_key_by_key(key: str, value: object) -> None:
    with pytest.raises(ValueError, match=key):
        Location.from_dict(FC2.to_dict() | {key: value})


def test_the_shipped_pth_file_is_the_documented_line() -> None:
    import aorta

    pth = Path(aorta.__file__).parents[1] / "aorta_locate_startup.pth"
    assert pth.read_text().strip() == PTH_LINE
