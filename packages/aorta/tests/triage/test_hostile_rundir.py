"""Run directories from someone else: everything read back is validated, nothing new runs unasked.

Each test plants a hostile `recipe.resolved.yaml` in an otherwise ordinary run directory and
checks that `aorta triage run --resume`, `aorta triage matrix` and `--recipe <resolved>` refuse
it with one line (exit 2) before anything runs or is written.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest
import yaml

from aorta.cli.main import main
from aorta.runner.models import RunRequest
from aorta.triage.recipe import (
    UntrustedRecipeError,
    check_trust,
    load_recipe,
    recipe_from_flags,
    resolved_recipe_dict,
)
from aorta.triage.run import local as triage_runner

pytestmark = pytest.mark.usefixtures("plugin")


def _resolved() -> dict[str, Any]:
    recipe = recipe_from_flags(
        workload="toy",
        mitigation_axis=["none", "plugin_fix"],
        environment_axis=["local"],
        trials=2,
        steps=2,
    )
    return resolved_recipe_dict(recipe)


def _run_dir(tmp_path: Path, data: dict[str, Any]) -> Path:
    run_dir = tmp_path / "received" / "run"
    run_dir.mkdir(parents=True)
    (run_dir / "recipe.resolved.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return run_dir


class _NoTrials:
    """Fails the test if any trial would run."""

    def __call__(self, request: RunRequest, reporter: object = None) -> list[object]:
        raise AssertionError(f"a trial ran for {request.output_dir}")


@pytest.fixture
def no_trials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(triage_runner, "run_trials", _NoTrials())


def _one_line_exit_2(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main(argv) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    return line


@pytest.mark.usefixtures("no_trials")
@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda d: d["cells"][1].update(name="../../escape"), "cells[1].name: expected letters"),
        (lambda d: d["cells"][0].update(name="/etc"), "cells[0].name: expected letters"),
        (lambda d: d.update(ticket="../x"), "ticket: expected letters"),
        (lambda d: d["workload"].update(name="../w"), "workload.name: expected letters"),
        (
            lambda d: d["cells"][0]["environment"].update(name="../env"),
            "cells[0].environment.name: expected",
        ),
        (lambda d: d["cells"][0].update(trials="many"), "cells[0].trials: expected a positive"),
        (lambda d: d["cells"][0].update(trials=10**9 + 0.5), "cells[0].trials: expected"),
        (lambda d: d.update(cells="all"), "cells: expected a non-empty list"),
        (lambda d: d["cells"][0]["extra_env"].update({"A=B": "1"}), "extra_env.A=B: expected"),
        (lambda d: d["cells"][0]["env"].update({"X": 1}), "cells[0].env.X: expected a string"),
        (lambda d: d["confound"].update(threshold=0.5), "confound.threshold: expected a finite"),
        (lambda d: d["confound"].update(baseline_cell="nope"), "confound.baseline_cell"),
        (lambda d: d["cells"][0].update(surprise=1), "unknown key 'surprise'"),
        (lambda d: d["cells"][1].update(name="none-local"), "cells[1]: expected each value once"),
        (
            lambda d: d["cells"][0]["environment"].update(kind="ssh"),
            "cells[0].environment.kind: expected one of local, docker, venv",
        ),
        (
            lambda d: d["cells"][0]["environment"].update(kind="docker", image="UP/Case;rm"),
            "cells[0].environment.image: expected a docker image reference",
        ),
        (
            lambda d: d["cells"][0]["environment"].update(kind="venv", python="python3"),
            "cells[0].environment.python: expected an absolute interpreter path",
        ),
        (lambda d: d.update(schema_version=99), "schema_version: unsupported version"),
        (
            lambda d: d["cells"][0].update(mitigations=[{"name": "m", "env": "X=1"}]),
            "cells[0].mitigations[0].env: expected a mapping",
        ),
    ],
)
def test_malformed_run_directory_is_refused_in_one_line(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    mutate: Any,
    expected: str,
) -> None:
    data = _resolved()
    mutate(data)
    run_dir = _run_dir(tmp_path, data)
    before = sorted(p.name for p in tmp_path.rglob("*"))
    for argv in (
        ["triage", "run", "--resume", str(run_dir)],
        ["triage", "matrix", str(run_dir)],
        ["triage", "run", "--recipe", str(run_dir / "recipe.resolved.yaml")],
    ):
        line = _one_line_exit_2(capsys, argv)
        assert line.startswith(f"aorta: error: {run_dir / 'recipe.resolved.yaml'}: "), line
        assert expected in line, line
    # Nothing was created, inside the run directory or outside it.
    assert sorted(p.name for p in tmp_path.rglob("*")) == before


def _planted_interpreter(tmp_path: Path) -> tuple[Path, Path]:
    marker = tmp_path / "it-ran"
    script = tmp_path / "evil-python"
    script.write_text(f"#!/bin/sh\ntouch {marker}\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script, marker


@pytest.mark.usefixtures("no_trials")
def test_venv_interpreter_from_a_run_directory_needs_trust(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script, marker = _planted_interpreter(tmp_path)
    data = _resolved()
    data["cells"][1]["environment"].update(name="venv1", kind="venv", python=str(script))
    run_dir = _run_dir(tmp_path, data)
    line = _one_line_exit_2(capsys, ["triage", "run", "--resume", str(run_dir)])
    assert f"cell plugin_fix-local: environment venv1 runs interpreter {script}" in line
    assert "pass --trust-environments" in line
    line = _one_line_exit_2(
        capsys, ["triage", "run", "--recipe", str(run_dir / "recipe.resolved.yaml")]
    )
    assert "--trust-environments" in line
    assert not marker.exists()
    # Re-analysis runs nothing, so it needs no trust.
    assert main(["triage", "matrix", str(run_dir)]) == 0


def test_docker_image_and_changed_mitigation_variables_need_trust(tmp_path: Path) -> None:
    data = _resolved()
    data["cells"][0]["environment"].update(name="_inline_x", kind="docker", image="evil/img:1")
    data["cells"][1]["mitigations"][0]["env"] = {"AORTA_TOY_FIX": "1", "LD_PRELOAD": "/x.so"}
    data["cells"][1]["env"]["LD_PRELOAD"] = "/x.so"
    recipe_path = _run_dir(tmp_path, data) / "recipe.resolved.yaml"
    recipe = load_recipe(recipe_path)
    assert recipe.resolved
    with pytest.raises(UntrustedRecipeError) as caught:
        check_trust(recipe, label=str(recipe_path), trusted=False)
    message = str(caught.value)
    assert "cell none-local: environment _inline_x runs docker image evil/img:1" in message
    assert "cell plugin_fix-local: mitigation plugin_fix sets" in message
    assert "(here: {'AORTA_TOY_FIX': '1'})" in message
    assert "cell plugin_fix-local: sets LD_PRELOAD='/x.so'" in message
    # Trusted: the same actions come back to be reported, nothing is raised.
    actions = check_trust(recipe, label=str(recipe_path), trusted=True)
    assert len(actions) == 3


def test_untampered_local_run_directory_needs_no_trust(tmp_path: Path) -> None:
    recipe_path = _run_dir(tmp_path, _resolved()) / "recipe.resolved.yaml"
    recipe = load_recipe(recipe_path)
    assert check_trust(recipe, label=str(recipe_path), trusted=False) == []
    assert os.environ.get("LD_PRELOAD") is None  # nothing leaked into this process
