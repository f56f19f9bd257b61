"""Registry entries: what a mitigation, an environment and a workload are."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

from aorta.workloads.contract import WorkloadEntry, WorkloadValidator

EnvironmentKind = Literal["local", "docker", "venv"]

# POSIX portable environment variable names (upper/lower letters, digits, underscore).
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# Registry names become directory and cell names: keep them boring. A leading underscore is
# allowed for generated names such as inline docker environments (`_inline_<hash>`).
_ENTRY_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]*\Z")


def check_entry_name(name: str) -> str:
    """Return `name` if it is a valid registry name, else raise ValueError."""
    if not _ENTRY_NAME.match(name):
        raise ValueError(
            f"invalid registry name {name!r}: expected letters, digits and '_.+-', "
            "starting with a letter, digit or '_'"
        )
    return name


def check_env_var_name(name: str) -> str:
    """Return `name` if it is a valid environment variable name, else raise ValueError."""
    if not _ENV_NAME.match(name):
        raise ValueError(
            f"invalid environment variable name {name!r}: expected [A-Za-z_][A-Za-z0-9_]*"
        )
    return name


def _frozen_env(env: Mapping[str, str]) -> Mapping[str, str]:
    for key, value in env.items():
        check_env_var_name(key)
        if not isinstance(value, str):
            raise ValueError(f"environment variable {key}: value must be a string, got {value!r}")
    return MappingProxyType(dict(env))


@dataclass(frozen=True)
class Mitigation:
    """A named bundle of environment variables applied to a trial.

    `process_scoped` marks variables that a runtime reads once when it initialises (GPU
    runtime, math libraries): setting them in a running interpreter does nothing, so trials
    with such a mitigation run in a fresh child process.
    """

    name: str
    env: Mapping[str, str]
    description: str
    source_package: str = "aorta"
    process_scoped: bool = False

    def __post_init__(self) -> None:
        check_entry_name(self.name)
        object.__setattr__(self, "env", _frozen_env(self.env))


@dataclass(frozen=True)
class Environment:
    """Where trials run: this interpreter, a docker image, or another Python interpreter."""

    name: str
    kind: EnvironmentKind
    description: str
    source_package: str = "aorta"
    image: str | None = None  # docker: image reference
    python: str | None = None  # venv: path of the interpreter
    rocm: bool = False  # docker: pass AMD GPU devices (/dev/kfd, /dev/dri) instead of NVIDIA ones
    env: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_entry_name(self.name)
        if self.kind not in ("local", "docker", "venv"):
            raise ValueError(f"environment {self.name!r}: unknown kind {self.kind!r}")
        if self.kind == "docker" and not self.image:
            raise ValueError(f"environment {self.name!r}: kind 'docker' needs an image reference")
        if self.kind == "venv" and not self.python:
            raise ValueError(
                f"environment {self.name!r}: kind 'venv' needs a python interpreter path"
            )
        object.__setattr__(self, "env", _frozen_env(self.env))


@dataclass(frozen=True)
class Workload:
    """A training (or other) program that runs one trial per call of `entry`."""

    name: str
    entry: WorkloadEntry
    description: str
    source_package: str = "aorta"
    validate: WorkloadValidator | None = None

    def __post_init__(self) -> None:
        check_entry_name(self.name)
        if not callable(self.entry):
            raise ValueError(f"workload {self.name!r}: entry must be callable")
