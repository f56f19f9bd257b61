"""`RunDir`: every path of a triage run directory, spelled once.

    <run_dir>/
        run.json                      the run's manifest (`aorta.triage.run.manifest`)
        recipe.resolved.yaml          the recipe as executed (+ its signature)
        host_env.json                 the host probe
        environments/<env>/env.json   each environment's probe
        environments/<env>/image.json a docker environment's image digest
        cells/<cell>/trial_<id>.json  one trial record each (+ error.txt when the cell errored)
        matrix.json  matrix.md  matrix.png
        previous/<timestamp>/         matrix files a later write replaced
        slurm/                        the SLURM executor's submissions and sessions
        .triage.lock                  held while one aorta process works here

A leaf: paths only, no reading or writing, so every layer (the report writer, the executors,
the lifecycle) can ask it where a file goes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePosixPath

MANIFEST_NAME = "run.json"
RESOLVED_NAME = "recipe.resolved.yaml"
HOST_ENV_NAME = "host_env.json"
ENV_NAME = "env.json"
IMAGE_NAME = "image.json"
ERROR_NAME = "error.txt"
MARKDOWN_NAME = "matrix.md"
JSON_NAME = "matrix.json"
PLOT_NAME = "matrix.png"
LOCK_NAME = ".triage.lock"
MATRIX_NAMES = (MARKDOWN_NAME, JSON_NAME, PLOT_NAME)
_CELLS = "cells"
_ENVIRONMENTS = "environments"


def trial_name(trial_id: int) -> str:
    """`trial_<id>.json`: one trial's record in its cell directory."""
    return f"trial_{trial_id}.json"


def relative_trial_path(cell_name: str, trial_id: int) -> str:
    """`cells/<cell>/trial_<id>.json`, '/'-separated: matrix.json stays valid when the run
    directory is moved or copied to another machine."""
    return str(PurePosixPath(_CELLS, cell_name, trial_name(trial_id)))


@dataclass(frozen=True)
class RunDir:
    """The paths of one run directory (`path`); nothing is created by asking."""

    path: Path

    @property
    def manifest(self) -> Path:
        """`run.json`."""
        return self.path / MANIFEST_NAME

    @property
    def resolved_recipe(self) -> Path:
        """`recipe.resolved.yaml`."""
        return self.path / RESOLVED_NAME

    @property
    def host_env(self) -> Path:
        """`host_env.json`."""
        return self.path / HOST_ENV_NAME

    @property
    def environments(self) -> Path:
        """`environments/`."""
        return self.path / _ENVIRONMENTS

    def env_json(self, environment: str) -> Path:
        """`environments/<env>/env.json`."""
        return self.environments / environment / ENV_NAME

    def image_json(self, environment: str) -> Path:
        """`environments/<env>/image.json`."""
        return self.environments / environment / IMAGE_NAME

    def env_jsons(self) -> list[Path]:
        """Every `environments/*/env.json` there is, sorted."""
        return sorted(self.environments.glob(f"*/{ENV_NAME}"))

    def image_jsons(self) -> list[Path]:
        """Every `environments/*/image.json` there is, sorted."""
        return sorted(self.environments.glob(f"*/{IMAGE_NAME}"))

    @property
    def cells(self) -> Path:
        """`cells/`."""
        return self.path / _CELLS

    def cell(self, cell_name: str) -> Path:
        """`cells/<cell>`: the cell's trial records."""
        return self.cells / cell_name

    def trial(self, cell_name: str, trial_id: int) -> Path:
        """`cells/<cell>/trial_<id>.json`."""
        return self.cell(cell_name) / trial_name(trial_id)

    def error_file(self, cell_name: str) -> Path:
        """`cells/<cell>/error.txt`: why the cell errored."""
        return self.cell(cell_name) / ERROR_NAME

    @property
    def matrix_json(self) -> Path:
        """`matrix.json`."""
        return self.path / JSON_NAME

    @property
    def matrix_md(self) -> Path:
        """`matrix.md`."""
        return self.path / MARKDOWN_NAME

    @property
    def matrix_png(self) -> Path:
        """`matrix.png`."""
        return self.path / PLOT_NAME

    @property
    def previous(self) -> Path:
        """`previous/`: one `<timestamp>/` per matrix a later write replaced."""
        return self.path / "previous"

    @property
    def slurm(self) -> Path:
        """`slurm/`: the SLURM executor's files."""
        return self.path / "slurm"

    @property
    def lock(self) -> Path:
        """`.triage.lock`."""
        return self.path / LOCK_NAME
