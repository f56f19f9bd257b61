"""The recipe's fields are declared once (`recipe.fields`); every reader agrees with it.

Each test here fails when a field is added to one reader (the file reader, flag mode, the
resolved writer/reader, the data model) without being declared, or declared without the
reader that should expose it.
"""

from __future__ import annotations

import dataclasses
import inspect
import sys
from pathlib import Path
from typing import Any

import click
import pytest
import yaml

from aorta.cli.triage import run_command
from aorta.runner.command.flags import COMMAND_FLAGS, CommandFlag, FlagError, command_mapping
from aorta.triage.errors import RecipeSchemaError
from aorta.triage.recipe import (
    Cell,
    ConfoundSettings,
    Recipe,
    load_recipe,
    recipe_from_flags,
    recipe_from_resolved,
    resolved_recipe_dict,
)
from aorta.triage.recipe.executor import SLURM_KEYS, _checks
from aorta.triage.recipe.fields import (
    CELL_FIELDS,
    CONFOUND_FIELDS,
    TOP_FIELDS,
    Field,
    flag_fields,
    keys,
    recipe_flags,
)

# Recipe attributes that no reader reads as a key of their own: derived while reading
# (`baseline` from confound.baseline_cell, `workload_source_package` and `command` from the
# workload) or set by the reader (`resolved`).
_DERIVED_RECIPE_ATTRIBUTES = {"baseline", "workload_source_package", "command", "resolved"}
# Run-command options that are not recipe fields: how to run, not what.
_RUN_OPTIONS = {
    "recipe_path",
    "resume_dir",
    "mode",
    "output_dir",
    "dry_run",
    "trust_environments",
    "progress",
    "executor",
    "slurm_config",
    "detach",
    "allow_shared_writable",
    "command",
}


def _command_recipe(tmp_path: Path) -> Recipe:
    """A recipe file using every declared file key, read by the file reader."""
    path = tmp_path / "recipe.yaml"
    data: dict[str, Any] = {
        "schema_version": 1,
        "ticket": "FIELDS-1",
        "workload": {"command": [sys.executable, "-c", "pass"]},
        "trials": 3,
        "steps": 4,
        "order": "sequential",
        "order_seed": 7,
        "stop_after": {"failures": 2},
        "confound": {"threshold": 1.3, "baseline_cell": "baseline-local", "alpha": 0.01},
        "cells": [
            {
                "name": "baseline-local",
                "mitigations": ["none"],
                "environment": "local",
                "trials": 2,
                "steps": 5,
                "stop_after": None,
                "extra_env": {"A_VAR": "1"},
                "command_args": ["--seed", "{seed}"],
            }
        ],
        "fingerprint_kernels": False,
        "locate": False,
        "executor": "local",
        "adaptive": None,  # on, it would conflict with this recipe's order and stop_after
    }
    assert set(data) == set(keys(TOP_FIELDS, "file"))
    assert set(data["cells"][0]) == set(keys(CELL_FIELDS, "file"))
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return load_recipe(path)


def test_the_resolved_writer_writes_exactly_the_declared_keys(tmp_path: Path) -> None:
    written: dict[str, Any] = resolved_recipe_dict(_command_recipe(tmp_path))
    assert set(written) == set(keys(TOP_FIELDS, "resolved"))
    assert set(written["confound"]) == set(keys(CONFOUND_FIELDS, "resolved"))
    (cell,) = written["cells"]
    assert set(cell) == set(keys(CELL_FIELDS, "resolved"))


def test_what_the_writer_writes_the_reader_reads_back(tmp_path: Path) -> None:
    recipe = _command_recipe(tmp_path)
    again = recipe_from_resolved(resolved_recipe_dict(recipe), label="recipe.resolved.yaml")
    for field in ("ticket", "trials", "steps", "order", "order_seed", "fingerprint_kernels"):
        assert getattr(again, field) == getattr(recipe, field), field
    assert again.confound == recipe.confound
    assert again.cells[0].stop_after_failures is None and again.cells[0].trials == 2
    assert again.cells[0].command_args == ("--seed", "{seed}")


@pytest.mark.parametrize(
    ("fields", "prefix", "data"),
    [
        (TOP_FIELDS, "", {}),
        (CONFOUND_FIELDS, "confound.", {"confound": {}}),
    ],
)
def test_the_file_reader_names_the_declared_keys_for_an_unknown_one(
    tmp_path: Path, fields: tuple[Field, ...], prefix: str, data: dict[str, object]
) -> None:
    base: dict[str, Any] = {"schema_version": 1, "workload": "fsdp", "trials": 1, "steps": 1}
    base.update(data)
    target = base["confound"] if prefix else base
    target["surprise"] = 1
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(base))
    with pytest.raises(RecipeSchemaError) as info:
        load_recipe(path)
    assert f"{prefix}surprise: unknown key 'surprise'" in str(info.value)
    assert f"(allowed: {', '.join(keys(fields, 'file'))})" in str(info.value)


def test_the_model_holds_every_declared_field_and_nothing_undeclared() -> None:
    recipe_attributes = {field.name for field in dataclasses.fields(Recipe)}
    declared = {f.key for f in TOP_FIELDS} - {"origin", "stop_after"}  # a run's; per cell
    assert declared <= recipe_attributes
    assert recipe_attributes - declared == _DERIVED_RECIPE_ATTRIBUTES
    cell_attributes = {field.name for field in dataclasses.fields(Cell)} - {"mitigation_entries"}
    assert cell_attributes == set(keys(CELL_FIELDS, "resolved"))
    confound_attributes = {field.name for field in dataclasses.fields(ConfoundSettings)}
    assert confound_attributes == set(keys(CONFOUND_FIELDS, "file"))


def test_every_flag_sets_a_declared_file_field() -> None:
    file_keys = set(keys(TOP_FIELDS, "file")) | {
        f"confound.{key}" for key in keys(CONFOUND_FIELDS, "file")
    }
    for flag, key in flag_fields():
        assert key in file_keys, flag.name


def test_flag_mode_takes_every_declared_flag_with_its_declared_default() -> None:
    parameters = inspect.signature(recipe_from_flags).parameters
    params = {flag.param for flag in recipe_flags()}
    # --max-trials is the CLI's spelling of `trials` with --stop-after-failures.
    assert params - {"max_trials"} == set(parameters) - {"command"}
    # Where the builder has a default of its own (library callers), it is the declared one.
    for flag in recipe_flags():
        default = parameters[flag.param].default if flag.param in parameters else None
        if flag.default is not None and default is not inspect.Parameter.empty:
            assert default == flag.default, flag.name


def test_the_run_command_options_are_declared_flags_or_run_options() -> None:
    params = {param.name for param in run_command.params if param.name is not None}
    declared = {flag.param for flag in recipe_flags()} | {flag.param for flag in COMMAND_FLAGS}
    assert params - _RUN_OPTIONS == declared
    defaults = {p.name: p.default for p in run_command.params if isinstance(p, click.Option)}
    for flag in recipe_flags():
        assert defaults[flag.param] == flag.default, flag.name


@pytest.mark.parametrize("flag", COMMAND_FLAGS, ids=lambda flag: flag.name)
def test_each_command_flag_sets_its_declared_key(flag: CommandFlag) -> None:
    value: object = ("a",) if flag.kind == "repeat" else "1"
    if flag.key == "step_time":
        value = "hf"
    with pytest.raises(FlagError, match=f"^{flag.name}: only for a command workload"):
        command_mapping((), **{flag.param: value})
    given = {flag.param: value}
    if flag.key == "step_time.unit":  # only with a --step-time regex
        given["step_time"] = "(?P<time>\\d+)"
    mapping = command_mapping(("true",), **given)
    assert mapping is not None and flag.key.split(".")[0] in mapping


def test_every_slurm_setting_has_a_check() -> None:
    assert set(_checks()) == set(SLURM_KEYS)


@pytest.mark.parametrize("rule", ["curtailment", "alpha-spending"])
def test_the_adaptive_rule_is_written_and_read_back(tmp_path: Path, rule: str) -> None:
    path = tmp_path / "recipe.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "schema_version": 1,
                "workload": {"command": [sys.executable, "-c", "pass"]},
                "steps": 1,
                "adaptive": {"max_trials": 6, "rule": rule},
                "cells": [
                    {"name": "baseline-local", "mitigations": ["none"], "environment": "local"}
                ],
            }
        )
    )
    recipe = load_recipe(path)
    assert recipe.adaptive is not None and recipe.adaptive.rule == rule
    written = resolved_recipe_dict(recipe)
    assert written["adaptive"] == {"max_trials": 6, "rule": rule}
    again = recipe_from_resolved(written, label="recipe.resolved.yaml")
    assert again.adaptive == recipe.adaptive
    # A run recorded before the choice existed reads as the default rule.
    older = recipe_from_resolved({**written, "adaptive": {"max_trials": 6}}, label="old")
    assert older.adaptive is not None and older.adaptive.rule == "curtailment"
