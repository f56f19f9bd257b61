"""`locate: true` in a recipe and `--locate` in flag mode: validated, recorded, resumed."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from aorta.cli.main import main
from aorta.triage.errors import RecipeSchemaError
from aorta.triage.recipe import dump_resolved_yaml, load_recipe

RECIPE = (
    "schema_version: 1\nworkload: fsdp\ntrials: 2\nsteps: 3\n{extra}cells:\n"
    "  - {{name: baseline, mitigations: [none], environment: local}}\n"
)


def _load(tmp_path: Path, extra: str) -> object:
    path = tmp_path / "r.yaml"
    path.write_text(RECIPE.format(extra=extra))
    return load_recipe(path)


def test_locate_is_off_unless_asked_and_is_recorded_in_the_resolved_recipe(
    tmp_path: Path,
) -> None:
    assert _load(tmp_path, "").locate is False  # type: ignore[attr-defined]
    recipe = _load(tmp_path, "locate: true\n")
    assert recipe.locate is True  # type: ignore[attr-defined]
    # The resolved recipe (what --resume runs) keeps it, so a resumed run locates too.
    resolved = yaml.safe_load(dump_resolved_yaml(recipe))  # type: ignore[arg-type]
    assert resolved["locate"] is True


def test_a_locate_that_is_not_a_boolean_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(RecipeSchemaError, match="locate") as info:
        _load(tmp_path, "locate: 'yes'\n")
    assert "\n" not in str(info.value).strip()


def test_the_locate_flag_belongs_to_flag_mode(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "r.yaml"
    path.write_text(RECIPE.format(extra=""))
    assert main(["triage", "run", "--recipe", str(path), "--locate", "--dry-run"]) == 2
    assert "--locate" in capsys.readouterr().err
