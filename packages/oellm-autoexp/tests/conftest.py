"""Shared fixtures of the oellm-autoexp tests.

The real-SLURM fixtures (`slurm_cluster`, `slurm_accounting_cluster`, `slurm_spare_node_cluster`)
come from the `pytest11` plugin `oellm_autoexp.testing.pytest_plugin`, installed with the package.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest


def _load_helper(stem: str) -> ModuleType:
    # The tests run under --import-mode=importlib, where test directories are not packages on
    # sys.path; load helpers by file so every test tree can use them.
    name = f"oellm_autoexp_tests_{stem}"
    if name in sys.modules:
        return sys.modules[name]
    path = Path(__file__).with_name("integration") / f"{stem}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


scenario_helpers = _load_helper("scenario_helpers")


@pytest.fixture
def make_session() -> Any:
    """`scenario_helpers.make_session`: a saved session of N planned jobs (see there)."""
    return scenario_helpers.make_session
