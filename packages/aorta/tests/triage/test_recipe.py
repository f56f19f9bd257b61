"""Recipe schema, loader, flag -> recipe builder and the resolved dump."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from aorta.errors import AortaUsageError
from aorta.registry import (
    UnknownEnvironmentError,
    UnknownMitigationError,
    UnknownWorkloadError,
)
from aorta.triage.errors import RecipeCellError, RecipeSchemaError
from aorta.triage.recipe import (
    DEFAULT_CONFOUND_THRESHOLD,
    Recipe,
    dump_resolved_yaml,
    load_recipe,
    recipe_from_flags,
    resolved_recipe_dict,
)

EXAMPLE = Path(__file__).parents[2] / "recipes" / "example-fsdp-smoke.yaml"
NIGHTLY = "rocm/pytorch:nightly"


def _blake(ref: str) -> str:
    return "_inline_" + hashlib.blake2b(ref.encode()).hexdigest()[:8]


def _base(**overrides: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "schema_version": 1,
        "ticket": "EXAMPLE-001",
        "workload": "fsdp",
        "trials": 8,
        "steps": 50,
        "cells": [
            {"name": "baseline-local", "mitigations": ["none"], "environment": "local"},
            {"name": "tf32_off-local", "mitigations": ["tf32_off"], "environment": "local"},
        ],
    }
    data.update(overrides)
    return data


def _write(tmp_path: Path, data: object, suffix: str = ".yaml") -> Path:
    path = tmp_path / f"recipe{suffix}"
    if suffix == ".json":
        path.write_text(json.dumps(data))
    else:
        path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _load(tmp_path: Path, data: object, suffix: str = ".yaml") -> Recipe:
    return load_recipe(_write(tmp_path, data, suffix))


def _fails(
    tmp_path: Path,
    data: object,
    error: type[Exception],
    *fragments: str,
    suffix: str = ".yaml",
) -> str:
    with pytest.raises(error) as info:
        _load(tmp_path, data, suffix)
    message = str(info.value)
    assert "\n" not in message
    assert f"recipe{suffix}" in message
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    return message


# --------------------------------------------------------------------------- happy paths


def test_example_smoke_recipe_loads() -> None:
    recipe = load_recipe(EXAMPLE)
    assert recipe.workload == "fsdp"
    assert (recipe.trials, recipe.steps) == (2, 20)
    assert [c.name for c in recipe.cells] == ["baseline-local", "tf32_off-local", "xnack-local"]
    assert all(c.environment.name == "local" for c in recipe.cells)
    assert recipe.baseline == "baseline-local"
    assert recipe.source == EXAMPLE
    assert recipe.sha256 == hashlib.sha256(EXAMPLE.read_bytes()).hexdigest()


@pytest.mark.parametrize("suffix", [".yaml", ".yml", ".json"])
def test_valid_recipe_in_every_format(tmp_path: Path, suffix: str) -> None:
    recipe = _load(tmp_path, _base(), suffix)
    assert recipe.schema_version == 1
    assert recipe.ticket == "EXAMPLE-001"
    assert recipe.confound.threshold == DEFAULT_CONFOUND_THRESHOLD
    assert recipe.confound.baseline_cell is None
    assert recipe.baseline == "baseline-local"
    tf32 = recipe.cell("tf32_off-local")
    assert tf32.mitigations == ("tf32_off",)
    assert dict(tf32.env) == {"NVIDIA_TF32_OVERRIDE": "0", "HIPBLASLT_ALLOW_TF32": "0"}


def test_recipe_is_frozen(tmp_path: Path) -> None:
    recipe = _load(tmp_path, _base())
    with pytest.raises(AttributeError):
        recipe.trials = 3  # type: ignore[misc]
    with pytest.raises(TypeError):
        recipe.cells[0].env["X"] = "1"  # type: ignore[index]


def test_ticket_is_optional(tmp_path: Path) -> None:
    data = _base()
    del data["ticket"]
    assert _load(tmp_path, data).ticket is None


def test_per_cell_overrides_and_fallback(tmp_path: Path) -> None:
    data = _base()
    data["cells"][1].update(trials=16, steps=8000)
    recipe = _load(tmp_path, data)
    assert (recipe.cells[0].trials, recipe.cells[0].steps) == (8, 50)
    assert (recipe.cells[1].trials, recipe.cells[1].steps) == (16, 8000)


def test_mitigations_stack_in_order(tmp_path: Path) -> None:
    data = _base()
    data["cells"].append(
        {
            "name": "stack-tf32+xnack-local",
            "mitigations": ["tf32_off", "xnack"],
            "environment": "local",
        }
    )
    cell = _load(tmp_path, data).cell("stack-tf32+xnack-local")
    assert list(cell.env) == ["NVIDIA_TF32_OVERRIDE", "HIPBLASLT_ALLOW_TF32", "HSA_XNACK"]


def test_extra_env_overrides_mitigation_and_is_recorded(tmp_path: Path) -> None:
    data = _base()
    data["cells"][1]["extra_env"] = {"NVIDIA_TF32_OVERRIDE": "1", "MY_FLAG": "on"}
    recipe = _load(tmp_path, data)
    cell = recipe.cell("tf32_off-local")
    assert cell.env["NVIDIA_TF32_OVERRIDE"] == "1"
    assert cell.env["MY_FLAG"] == "on"
    assert dict(cell.extra_env) == {"NVIDIA_TF32_OVERRIDE": "1", "MY_FLAG": "on"}
    resolved = resolved_recipe_dict(recipe)
    cells: list[dict[str, Any]] = resolved["cells"]  # type: ignore[assignment]
    assert cells[1]["extra_env"] == {"NVIDIA_TF32_OVERRIDE": "1", "MY_FLAG": "on"}
    assert cells[1]["env"]["NVIDIA_TF32_OVERRIDE"] == "1"


# --------------------------------------------------------------------------- inline docker


def test_inline_docker_is_auto_named_by_blake2b(tmp_path: Path) -> None:
    data = _base()
    data["cells"].append(
        {"name": "try-nightly", "mitigations": ["none"], "environment": {"docker": NIGHTLY}}
    )
    env = _load(tmp_path, data).cell("try-nightly").environment
    assert env.name == _blake(NIGHTLY)
    assert len(env.name) == len("_inline_") + 8
    assert (env.kind, env.image, env.source_package) == ("docker", NIGHTLY, "recipe")


def test_same_ref_same_name_and_flag_mode_agrees(tmp_path: Path) -> None:
    data = _base()
    data["cells"] = [
        {"name": "a", "mitigations": ["none"], "environment": {"docker": NIGHTLY}},
        {"name": "b", "mitigations": ["xnack"], "environment": {"docker": NIGHTLY}},
        {"name": "c", "mitigations": ["xnack"], "environment": {"docker": "rocm/pytorch:latest"}},
    ]
    recipe = _load(tmp_path, data)
    assert recipe.cells[0].environment.name == recipe.cells[1].environment.name
    assert recipe.cells[2].environment.name != recipe.cells[0].environment.name

    flags = recipe_from_flags(
        workload="fsdp",
        mitigation_axis=["none"],
        environment_axis=["local", f"image:{NIGHTLY}"],
        trials=2,
        steps=3,
    )
    assert flags.cells[1].environment == recipe.cells[0].environment
    assert flags.cells[1].name == f"none-{_blake(NIGHTLY)}"
    text = dump_resolved_yaml(flags)
    assert _blake(NIGHTLY) in text
    assert NIGHTLY in text


@pytest.mark.parametrize(
    ("environment", "fragment"),
    [
        ({"docker": NIGHTLY, "name": "x"}, "unknown key 'name'"),
        ({"docker": NIGHTLY, "rocm": True}, "unknown key 'rocm'"),
        ({"docker": 3}, "expected a string"),
        ({}, "required key is missing"),
        ({"docker": "Rocm/PyTorch"}, "docker image reference"),
        ({"docker": "rocm/pytorch:nightly; rm -rf /"}, "docker image reference"),
        ({"docker": "-v/:/host"}, "docker image reference"),
    ],
)
def test_bad_inline_docker(tmp_path: Path, environment: object, fragment: str) -> None:
    data = _base()
    data["cells"][1]["environment"] = environment
    _fails(tmp_path, data, RecipeSchemaError, "cells[1].environment", fragment)


@pytest.mark.parametrize(
    "ref",
    [
        "busybox",
        "rocm/pytorch:nightly",
        "localhost:5000/team/img:1.2.3",
        "ghcr.io/org/repo_name-x:v1@sha256:" + "a" * 64,
        "registry.example.com/a/b@sha256:" + "0" * 64,
    ],
)
def test_good_image_refs(ref: str) -> None:
    recipe = recipe_from_flags(
        workload="fsdp",
        mitigation_axis=["none"],
        environment_axis=[f"image:{ref}"],
        trials=1,
        steps=1,
    )
    assert recipe.cells[0].environment.image == ref


# --------------------------------------------------------------------------- schema errors


def test_missing_file() -> None:
    with pytest.raises(RecipeSchemaError, match=r"nope\.yaml: cannot read recipe"):
        load_recipe(Path("nope.yaml"))


def test_wrong_extension(tmp_path: Path) -> None:
    path = tmp_path / "recipe.toml"
    path.write_text("x")
    with pytest.raises(RecipeSchemaError, match=r"recipe\.toml: expected a recipe file"):
        load_recipe(path)


def test_yaml_syntax_error_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "recipe.yaml"
    path.write_text("schema_version: 1\nworkload: fsdp\ncells: [\n  {name: a\n")
    with pytest.raises(RecipeSchemaError) as info:
        load_recipe(path)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: line ")
    assert "invalid YAML" in message


def test_yaml_duplicate_key_is_rejected_with_line(tmp_path: Path) -> None:
    path = tmp_path / "recipe.yaml"
    path.write_text("schema_version: 1\ntrials: 2\ntrials: 3\n")
    with pytest.raises(RecipeSchemaError, match=r"line 3, column 1: invalid YAML: duplicate key"):
        load_recipe(path)


def test_json_syntax_error_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "recipe.json"
    path.write_text('{\n  "schema_version": 1,\n  "workload": \n}\n')
    with pytest.raises(RecipeSchemaError, match=r"recipe\.json: line 4, column 1: invalid JSON"):
        load_recipe(path)


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_top_level_must_be_a_mapping(tmp_path: Path, suffix: str) -> None:
    _fails(tmp_path, [1, 2], RecipeSchemaError, "expected a mapping", suffix=suffix)


def test_empty_yaml(tmp_path: Path) -> None:
    path = tmp_path / "recipe.yaml"
    path.write_text("")
    with pytest.raises(RecipeSchemaError, match="expected a mapping of recipe keys, got null"):
        load_recipe(path)


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
@pytest.mark.parametrize(
    ("version", "fragment"),
    [(2, "unsupported version (supported: 1), got 2"), ("1", "expected an integer"), (True, "")],
)
def test_schema_version(tmp_path: Path, suffix: str, version: object, fragment: str) -> None:
    _fails(
        tmp_path, _base(schema_version=version), RecipeSchemaError, "schema_version", fragment,
        suffix=suffix,
    )  # fmt: skip


@pytest.mark.parametrize("key", ["schema_version", "workload", "trials", "steps", "cells"])
def test_required_top_level_keys(tmp_path: Path, key: str) -> None:
    data = _base()
    del data[key]
    _fails(tmp_path, data, RecipeSchemaError, f"{key}: required key is missing")


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
@pytest.mark.parametrize("value", ["abc", 0, -1, True, 2.5, None])
def test_trials_must_be_positive_int(tmp_path: Path, suffix: str, value: object) -> None:
    data = _base()
    data["cells"][1]["trials"] = value
    _fails(
        tmp_path, data, RecipeSchemaError, "cells[1].trials: expected a positive integer",
        suffix=suffix,
    )  # fmt: skip


def test_top_level_steps_bad(tmp_path: Path) -> None:
    _fails(
        tmp_path, _base(steps="abc"), RecipeSchemaError,
        "steps: expected a positive integer, got 'abc'",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("where", "key"),
    [("top", "tickets"), ("confound", "threshhold"), ("cell", "extra-env")],
)
def test_unknown_keys_are_named_with_allowed_list(tmp_path: Path, where: str, key: str) -> None:
    data = _base()
    if where == "top":
        data[key] = 1
        path, allowed = key, "schema_version, ticket, workload"
    elif where == "confound":
        data["confound"] = {key: 1.2}
        path, allowed = f"confound.{key}", "threshold, baseline_cell"
    else:
        data["cells"][0][key] = {}
        path, allowed = (
            f"cells[0].{key}",
            "name, mitigations, environment, trials, steps, stop_after, extra_env",
        )
    _fails(tmp_path, data, RecipeSchemaError, f"{path}: unknown key {key!r}", allowed)


@pytest.mark.parametrize("value", [0.5, "1.2", float("inf"), True, -1])
def test_bad_threshold(tmp_path: Path, value: object) -> None:
    _fails(
        tmp_path, _base(confound={"threshold": value}), RecipeSchemaError,
        "confound.threshold: expected a finite number >= 1.0",
    )  # fmt: skip


def test_threshold_accepts_int_and_float(tmp_path: Path) -> None:
    assert _load(tmp_path, _base(confound={"threshold": 1.3})).confound.threshold == 1.3
    assert _load(tmp_path, _base(confound={"threshold": 2})).confound.threshold == 2.0


def test_alpha_is_read_validated_and_recorded(tmp_path: Path) -> None:
    recipe = _load(tmp_path, _base(confound={"alpha": 0.1}))
    assert recipe.confound.alpha == 0.1
    assert resolved_recipe_dict(recipe)["confound"]["alpha"] == 0.1  # type: ignore[index]
    assert _load(tmp_path, _base()).confound.alpha == 0.05
    for bad in (0, 1, "0.05", True):
        _fails(tmp_path, _base(confound={"alpha": bad}), RecipeSchemaError, "confound.alpha")


def test_confound_must_be_a_mapping(tmp_path: Path) -> None:
    _fails(tmp_path, _base(confound=[1]), RecipeSchemaError, "confound: expected a mapping")


@pytest.mark.parametrize("cells", [[], {}, "baseline-local", None])
def test_cells_must_be_a_non_empty_list(tmp_path: Path, cells: object) -> None:
    _fails(tmp_path, _base(cells=cells), RecipeSchemaError, "cells: expected a non-empty list")


def test_cell_must_be_a_mapping(tmp_path: Path) -> None:
    _fails(tmp_path, _base(cells=["a"]), RecipeSchemaError, "cells[0]: expected a mapping")


@pytest.mark.parametrize("key", ["name", "mitigations", "environment"])
def test_required_cell_keys(tmp_path: Path, key: str) -> None:
    data = _base()
    del data["cells"][1][key]
    _fails(tmp_path, data, RecipeSchemaError, f"cells[1].{key}: required key is missing")


def test_duplicate_cell_name(tmp_path: Path) -> None:
    data = _base()
    data["cells"][1]["name"] = "baseline-local"
    _fails(tmp_path, data, RecipeSchemaError, "cells[1].name: expected a unique cell name")


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
@pytest.mark.parametrize("mitigations", [[], "none", None, [1]])
def test_bad_mitigations(tmp_path: Path, suffix: str, mitigations: object) -> None:
    data = _base()
    data["cells"][0]["mitigations"] = mitigations
    _fails(tmp_path, data, RecipeSchemaError, "cells[0].mitigations", "expected", suffix=suffix)


def test_mitigation_listed_twice(tmp_path: Path) -> None:
    data = _base()
    data["cells"][1]["mitigations"] = ["tf32_off", "tf32_off"]
    _fails(tmp_path, data, RecipeSchemaError, "cells[1].mitigations[1]", "once per cell")


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_unknown_mitigation_keeps_type_and_gains_location(tmp_path: Path, suffix: str) -> None:
    data = _base()
    data["cells"][1]["mitigations"] = ["tf32_off", "tf32_of"]
    message = _fails(
        tmp_path, data, UnknownMitigationError, "cells[1].mitigations[1]: unknown mitigation",
        "did you mean 'tf32_off'", suffix=suffix,
    )  # fmt: skip
    assert message.startswith(str(tmp_path / f"recipe{suffix}"))


def test_unknown_environment(tmp_path: Path) -> None:
    data = _base()
    data["cells"][1]["environment"] = "locla"
    with pytest.raises(UnknownEnvironmentError) as info:
        _load(tmp_path, data)
    assert isinstance(info.value, AortaUsageError)
    assert "recipe.yaml: cells[1].environment: unknown environment 'locla'" in str(info.value)
    assert info.value.name == "locla"


def test_unknown_workload(tmp_path: Path) -> None:
    _fails(tmp_path, _base(workload="fsdq"), UnknownWorkloadError, "workload: unknown workload")


def test_environment_wrong_type(tmp_path: Path) -> None:
    data = _base()
    data["cells"][0]["environment"] = ["local"]
    _fails(tmp_path, data, RecipeSchemaError, "cells[0].environment: expected an environment")


def test_mitigation_collision_is_a_cell_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from aorta.registry import Mitigation, load_mitigations
    from aorta.registry.loader import Catalog
    from aorta.triage.recipe import validation as recipe_module

    real = load_mitigations()
    clash = Mitigation(name="tf32_on", env={"NVIDIA_TF32_OVERRIDE": "1"}, description="x")
    entries = {**real.entries, "tf32_on": clash}
    monkeypatch.setattr(recipe_module, "load_mitigations", lambda: Catalog(entries=entries))
    data = _base()
    data["cells"][1]["mitigations"] = ["tf32_off", "tf32_on"]
    message = _fails(
        tmp_path, data, RecipeCellError, "cells[1].mitigations", "NVIDIA_TF32_OVERRIDE"
    )
    assert isinstance(RecipeCellError(message), AortaUsageError)


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        ({"1BAD": "x"}, "cells[0].extra_env.1BAD: expected a variable name"),
        ({"A-B": "x"}, "cells[0].extra_env.A-B: expected a variable name"),
        ({"FOO": 1}, "cells[0].extra_env.FOO: expected a string value (quote it in YAML), got 1"),
        ({"FOO": 1.0}, "expected a string value"),
        ({"FOO": True}, "expected a string value"),
        ({"FOO": None}, "expected a string value"),
        ({"FOO": "a\x00b"}, "without NUL"),
        (["FOO=1"], "cells[0].extra_env: expected a mapping"),
    ],
)
def test_bad_extra_env(tmp_path: Path, extra: object, fragment: str) -> None:
    data = _base()
    data["cells"][0]["extra_env"] = extra
    _fails(tmp_path, data, RecipeSchemaError, fragment)


# --------------------------------------------------------------------------- safe names


@pytest.mark.parametrize(
    "name", ["../x", "/abs", "a/b", "a\\b", "\x07", "", ".hidden", "..", "-rf", "a b", "x" * 101]
)
def test_unsafe_ticket_rejected(tmp_path: Path, name: str) -> None:
    _fails(tmp_path, _base(ticket=name), RecipeSchemaError, "ticket: expected")


@pytest.mark.parametrize("name", ["../x", "/abs", "a/b", "\x07", "a\nb", "."])
def test_unsafe_cell_name_rejected(tmp_path: Path, name: str) -> None:
    data = _base()
    data["cells"][1]["name"] = name
    _fails(tmp_path, data, RecipeSchemaError, "cells[1].name: expected")


@pytest.mark.parametrize("ticket", [2024, "2024-01-01"])
def test_non_string_ticket_says_quote_it(tmp_path: Path, ticket: object) -> None:
    path = tmp_path / "recipe.yaml"
    # An unquoted date or number is not a string in YAML.
    text = yaml.safe_dump(_base(), sort_keys=False).replace("EXAMPLE-001", str(ticket))
    path.write_text(text)
    with pytest.raises(RecipeSchemaError, match=r"ticket: expected a string \(quote it in YAML\)"):
        load_recipe(path)


def test_safe_names_accepted(tmp_path: Path) -> None:
    data = _base(ticket="ROCM-1234_b.v2+x")
    data["cells"][1]["name"] = "stack-tf32+xnack-local_v1.2"
    assert _load(tmp_path, data).cells[1].name == "stack-tf32+xnack-local_v1.2"


# --------------------------------------------------------------------------- baseline


def test_baseline_first_baseline_prefixed_cell(tmp_path: Path) -> None:
    data = _base()
    data["cells"] = [
        {"name": "plain", "mitigations": ["none"], "environment": "local"},
        {"name": "baseline-a", "mitigations": ["xnack"], "environment": "local"},
        {"name": "baseline-b", "mitigations": ["none"], "environment": "local"},
    ]
    assert _load(tmp_path, data).baseline == "baseline-a"


def test_baseline_first_none_cell(tmp_path: Path) -> None:
    data = _base()
    data["cells"] = [
        {"name": "x", "mitigations": ["xnack"], "environment": "local"},
        {"name": "n1", "mitigations": ["none"], "environment": "local"},
        {"name": "n2", "mitigations": ["none"], "environment": "local"},
    ]
    assert _load(tmp_path, data).baseline == "n1"


def test_baseline_single_cell_is_its_own(tmp_path: Path) -> None:
    data = _base(cells=[{"name": "only", "mitigations": ["xnack"], "environment": "local"}])
    assert _load(tmp_path, data).baseline == "only"


def test_baseline_ambiguous_is_an_error(tmp_path: Path) -> None:
    data = _base()
    data["cells"] = [
        {"name": "x", "mitigations": ["xnack"], "environment": "local"},
        {"name": "y", "mitigations": ["tf32_off"], "environment": "local"},
    ]
    _fails(tmp_path, data, RecipeSchemaError, "confound.baseline_cell: required")


def test_explicit_baseline(tmp_path: Path) -> None:
    recipe = _load(tmp_path, _base(confound={"baseline_cell": "tf32_off-local"}))
    assert recipe.baseline == "tf32_off-local"
    assert recipe.confound.baseline_cell == "tf32_off-local"
    assert recipe.baseline_cell.mitigations == ("tf32_off",)


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_unknown_explicit_baseline(tmp_path: Path, suffix: str) -> None:
    _fails(
        tmp_path, _base(confound={"baseline_cell": "nope"}), RecipeSchemaError,
        "confound.baseline_cell: expected the name of a cell (baseline-local, tf32_off-local)",
        "got 'nope'", suffix=suffix,
    )  # fmt: skip


# --------------------------------------------------------------------------- flag mode


def _flags(**overrides: Any) -> Recipe:
    kwargs: dict[str, Any] = {
        "workload": "fsdp",
        "mitigation_axis": ["none", "tf32_off", "xnack"],
        "environment_axis": ["local"],
        "trials": 8,
        "steps": 100,
    }
    kwargs.update(overrides)
    return recipe_from_flags(**kwargs)


def test_flag_mode_product() -> None:
    recipe = _flags()
    assert [c.name for c in recipe.cells] == ["none-local", "tf32_off-local", "xnack-local"]
    assert all((c.trials, c.steps) == (8, 100) for c in recipe.cells)
    assert recipe.baseline == "none-local"
    assert recipe.ticket is None
    assert recipe.source is None
    assert recipe.sha256 is None
    assert recipe.confound.threshold == DEFAULT_CONFOUND_THRESHOLD
    assert resolved_recipe_dict(recipe)["origin"] == "flags"


def test_flag_mode_two_environments() -> None:
    recipe = _flags(environment_axis=["local", f"image:{NIGHTLY}"], ticket="T-1")
    assert len(recipe.cells) == 6
    assert recipe.baseline == "none-local"
    assert recipe.ticket == "T-1"


def test_flag_mode_baseline_uses_first_environment() -> None:
    recipe = _flags(environment_axis=[f"image:{NIGHTLY}", "local"])
    assert recipe.baseline == f"none-{_blake(NIGHTLY)}"


def test_flag_mode_baseline_without_none_is_first_cell() -> None:
    assert _flags(mitigation_axis=["xnack", "tf32_off"]).baseline == "xnack-local"


def test_flag_mode_explicit_baseline_and_threshold() -> None:
    recipe = _flags(baseline_cell="xnack-local", confound_threshold=1.3)
    assert recipe.baseline == "xnack-local"
    assert recipe.confound.threshold == 1.3
    with pytest.raises(RecipeSchemaError, match="--baseline-cell: expected the name of a cell"):
        _flags(baseline_cell="nope")


def test_flag_mode_unknown_names() -> None:
    with pytest.raises(UnknownEnvironmentError, match=r"^--environment-axis\[1\]: unknown"):
        _flags(environment_axis=["local", "nightly"])
    with pytest.raises(UnknownMitigationError, match=r"^--mitigation-axis\[0\]: unknown"):
        _flags(mitigation_axis=["nope"])
    with pytest.raises(UnknownWorkloadError, match=r"^--workload: unknown"):
        _flags(workload="nope")


def test_flag_mode_image_items_never_touch_the_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    from aorta.registry.loader import Catalog
    from aorta.triage.recipe import validation as recipe_module

    # An empty environment registry: only `image:` items can resolve.
    monkeypatch.setattr(recipe_module, "load_environments", lambda: Catalog(entries={}))
    recipe = _flags(environment_axis=[f"image:{NIGHTLY}"])
    assert recipe.cells[0].environment.name == _blake(NIGHTLY)


@pytest.mark.parametrize(
    ("overrides", "fragment"),
    [
        ({"trials": 0}, "--trials: expected a positive integer"),
        ({"steps": True}, "--steps: expected a positive integer"),
        ({"ticket": "../x"}, "--ticket: expected"),
        ({"confound_threshold": 0.9}, "--confound-threshold: expected a finite number"),
        ({"alpha": 1.5}, "--alpha: expected a significance level strictly between 0 and 1"),
        ({"mitigation_axis": []}, "--mitigation-axis: expected at least one"),
        ({"environment_axis": []}, "--environment-axis: expected at least one"),
        ({"mitigation_axis": ["none", "none"]}, "--mitigation-axis[1]: expected each value once"),
        ({"environment_axis": ["image:Bad Ref"]}, "--environment-axis[0]: expected a docker"),
        ({"environment_axis": ["image:"]}, "--environment-axis[0]: expected a non-empty"),
    ],
)
def test_flag_mode_errors(overrides: dict[str, Any], fragment: str) -> None:
    with pytest.raises(RecipeSchemaError) as info:
        _flags(**overrides)
    assert fragment in str(info.value)
    assert "\n" not in str(info.value)


# --------------------------------------------------------------------------- resolved dump


def test_resolved_dict_expands_everything(tmp_path: Path) -> None:
    data = _base(confound={"threshold": 1.2})
    data["cells"][1]["trials"] = 3
    data["cells"].append(
        {"name": "nightly", "mitigations": ["xnack"], "environment": {"docker": NIGHTLY}}
    )
    path = _write(tmp_path, data)
    recipe = load_recipe(path)
    resolved = yaml.safe_load(dump_resolved_yaml(recipe))
    assert resolved == resolved_recipe_dict(recipe)
    assert resolved["source"] == str(path)
    assert resolved["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert resolved["confound"] == {
        "threshold": 1.2,
        "baseline_cell": "baseline-local",
        "alpha": 0.05,
    }
    assert resolved["workload"] == {"name": "fsdp", "source_package": "aorta"}
    tf32 = resolved["cells"][1]
    assert tf32["trials"] == 3
    assert tf32["steps"] == 50
    assert tf32["mitigations"] == [
        {
            "name": "tf32_off",
            "source_package": "aorta",
            "env": {"NVIDIA_TF32_OVERRIDE": "0", "HIPBLASLT_ALLOW_TF32": "0"},
            "process_scoped": True,
        }
    ]
    assert tf32["stop_after_failures"] is None
    assert (resolved["order"], resolved["order_seed"]) == ("interleaved", 0)
    assert tf32["env"] == {"NVIDIA_TF32_OVERRIDE": "0", "HIPBLASLT_ALLOW_TF32": "0"}
    nightly = resolved["cells"][2]["environment"]
    assert nightly["name"] == _blake(NIGHTLY)
    assert (nightly["kind"], nightly["image"], nightly["inline"]) == ("docker", NIGHTLY, True)
    assert resolved["cells"][0]["environment"]["kind"] == "local"


def test_plugin_mitigations_resolve_with_source_package(plugin: Path, tmp_path: Path) -> None:
    data = _base(workload="toy")
    data["cells"][1] = {
        "name": "fix-docker",
        "mitigations": ["plugin_fix"],
        "environment": "plugin_docker",
    }
    recipe = _load(tmp_path, data)
    cell = recipe.cell("fix-docker")
    assert cell.mitigation_entries[0].source_package == "aorta-test-plugin"
    assert cell.environment.image == "busybox:latest"
    resolved = resolved_recipe_dict(recipe)
    assert recipe.workload_source_package == "aorta-test-plugin"
    cells: list[dict[str, Any]] = resolved["cells"]  # type: ignore[assignment]
    assert cells[1]["mitigations"][0]["source_package"] == "aorta-test-plugin"
    assert cells[1]["env"] == {"AORTA_TOY_FIX": "1"}


def test_import_does_not_pull_torch_or_scipy() -> None:
    code = (
        "import sys, aorta.triage.recipe; "
        "print(sorted(m for m in ('torch', 'scipy', 'numpy') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]"


def test_ticket_may_not_take_the_no_ticket_folder_name(tmp_path: Path) -> None:
    path = tmp_path / "r.yaml"
    path.write_text(
        "schema_version: 1\nticket: _no_ticket_\nworkload: fsdp\ntrials: 1\nsteps: 1\n"
        "cells:\n  - {name: a, mitigations: [none], environment: local}\n"
    )
    with pytest.raises(RecipeSchemaError, match=r"r\.yaml: ticket: expected a ticket other than"):
        load_recipe(path)
    with pytest.raises(RecipeSchemaError, match="--ticket: expected a ticket other than"):
        recipe_from_flags(
            workload="fsdp",
            mitigation_axis=["none"],
            environment_axis=["local"],
            trials=1,
            steps=1,
            ticket="_no_ticket_",
        )


def test_hostile_key_in_a_lone_surrogate_error_stays_one_line(tmp_path: Path) -> None:
    # Found by fuzz/loaders.py: the key path echoed a key holding a newline and a lone
    # surrogate verbatim, so the "one line" error had two (and could not be printed).
    path = tmp_path / "r.json"
    path.write_text('{"steps": {"a\\nb\\udb2a": "\\ud800"}}')
    with pytest.raises(RecipeSchemaError) as info:
        load_recipe(path)
    assert str(info.value) == (
        f"{path}: steps.a\\nb\\udb2a: string holds a lone surrogate (invalid Unicode)"
    )
