"""Every schema rule, fed through `aorta triage run --recipe ... --dry-run`: one line, exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from aorta.cli.main import main

BASE = {"schema_version": 1, "workload": "fsdp", "trials": 2, "steps": 3}
CELL = {"name": "a", "mitigations": ["none"], "environment": "local"}


def _with(**changes: object) -> dict[str, object]:
    data: dict[str, object] = {**BASE, "cells": [CELL]}
    for key, value in changes.items():
        if value is None:
            data.pop(key)
        else:
            data[key] = value
    return data


def _cells(*cells: dict[str, object]) -> dict[str, object]:
    return _with(cells=list(cells))


CASES = {
    "missing version": (_with(schema_version=None), "schema_version: required key is missing"),
    "unknown version": (_with(schema_version=7), "schema_version: unsupported version"),
    "unknown top key": (_with(colour="red"), "colour: unknown key 'colour' in the recipe"),
    "missing workload": (_with(workload=None), "workload: required key is missing"),
    "unknown workload": (_with(workload="fsdq"), "workload: unknown workload 'fsdq'; did you"),
    "trials not int": (_with(trials="many"), "trials: expected a positive integer, got 'many'"),
    "steps zero": (_with(steps=0), "steps: expected a positive integer, got 0"),
    "bad threshold": (
        _with(confound={"threshold": "fast"}),
        "confound.threshold: expected a finite number",
    ),
    "unknown baseline": (
        _with(confound={"baseline_cell": "zzz"}),
        "confound.baseline_cell: expected the name of a cell (a), got 'zzz'",
    ),
    "ambiguous baseline": (
        _cells(
            {**CELL, "mitigations": ["xnack"]},
            {**CELL, "name": "b"} | {"mitigations": ["tf32_off"]},
        ),
        "confound.baseline_cell: required",
    ),
    "no cells": (_with(cells=[]), "cells: expected a non-empty list of cells"),
    "cell without name": (
        _cells({"mitigations": ["none"], "environment": "local"}),
        "cells[0].name: required",
    ),
    "duplicate names": (
        _cells(CELL, {**CELL, "mitigations": ["xnack"]}),
        "cells[1].name: expected a unique",
    ),
    "empty mitigations": (
        _cells({**CELL, "mitigations": []}),
        "cells[0].mitigations: expected a non-empty list",
    ),
    "mitigations not list": (
        _cells({**CELL, "mitigations": "none"}),
        "cells[0].mitigations: expected",
    ),
    "unknown mitigation": (
        _cells({**CELL, "mitigations": ["none", "tf32of"]}),
        "cells[0].mitigations[1]: unknown mitigation 'tf32of'; did you mean 'tf32_off'?",
    ),
    "unknown environment": (
        _cells({**CELL, "environment": "locl"}),
        "cells[0].environment: unknown environment 'locl'; did you mean 'local'?",
    ),
    "inline extra key": (
        _cells({**CELL, "environment": {"docker": "busybox:1", "name": "x"}}),
        "cells[0].environment.name: unknown key 'name' in an inline environment",
    ),
    "bad image ref": (
        _cells({**CELL, "environment": {"docker": "Bad Image"}}),
        "cells[0].environment.docker: expected a docker image reference",
    ),
    "bad extra_env name": (
        _cells({**CELL, "extra_env": {"1X": "v"}}),
        "cells[0].extra_env.1X: expected a variable name",
    ),
    "extra_env not string": (
        _cells({**CELL, "extra_env": {"X": 1}}),
        "cells[0].extra_env.X: expected a string value (quote it in YAML), got 1",
    ),
    "bad cell override": (
        _cells({**CELL, "trials": -1}),
        "cells[0].trials: expected a positive integer",
    ),
    "unsafe ticket": (_with(ticket="../../etc"), "ticket: expected letters, digits"),
    "unsafe cell name": (
        _cells({**CELL, "name": "a/b"}),
        "cells[0].name: expected letters, digits",
    ),
    "unknown cell key": (_cells({**CELL, "colour": 1}), "cells[0].colour: unknown key 'colour'"),
}


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_schema_rule_is_one_line_naming_file_key_and_expectation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str, suffix: str
) -> None:
    data, expected = CASES[case]
    path = tmp_path / f"bad{suffix}"
    path.write_text(json.dumps(data) if suffix == ".json" else yaml.safe_dump(data))
    assert main(["triage", "run", "--recipe", str(path), "--dry-run"]) == 2
    out, err = capsys.readouterr()
    (line,) = err.strip().splitlines()
    assert line.startswith(f"aorta: error: {path}: ")
    assert expected in line
    assert out == ""


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("bad.yaml", "schema_version: 1\nworkload: fsdp: x\n", "line 2"),
        ("bad.json", '{"schema_version": 1,\n "workload": }\n', "line 2"),
        ("bad.toml", "schema_version = 1\n", ".toml"),
    ],
)
def test_syntax_errors_name_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, text: str, expected: str
) -> None:
    path = tmp_path / name
    path.write_text(text)
    assert main(["triage", "run", "--recipe", str(path), "--dry-run"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert str(path) in line and expected in line


def test_missing_recipe_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope.yaml"
    assert main(["triage", "run", "--recipe", str(missing), "--dry-run"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert str(missing) in line


def test_dry_run_reports_every_problem_at_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.yaml"
    data = {
        **BASE,
        "colour": "red",
        "trials": 0,
        "cells": [
            {"name": "a", "mitigations": ["tf32_of"], "environment": "local"},
            {"name": "../b", "mitigations": ["none"], "environment": "nowhere"},
            {"name": "c", "mitigations": ["none"], "environment": "local",
             "extra_env": {"1BAD": "x"}},
        ],
    }  # fmt: skip
    path.write_text(yaml.safe_dump(data))
    assert main(["triage", "run", "--recipe", str(path), "--dry-run"]) == 2
    out, err = capsys.readouterr()
    assert out == ""  # nothing is described when the recipe is bad
    lines = err.strip().splitlines()
    assert all(line.startswith(f"aorta: error: {path}: ") for line in lines), lines
    found = [line.removeprefix(f"aorta: error: {path}: ") for line in lines]
    expected = [
        "colour: unknown key",
        "trials: expected a positive integer, got 0",
        "cells[0].mitigations[0]: unknown mitigation 'tf32_of'; did you mean 'tf32_off'",
        "cells[1].name: expected letters",
        "cells[1].environment: unknown environment 'nowhere'",
        "cells[2].extra_env.1BAD: expected a variable name",
    ]
    assert len(found) == len(expected), found
    for line, start in zip(found, expected, strict=True):
        assert line.startswith(start), (line, start)
