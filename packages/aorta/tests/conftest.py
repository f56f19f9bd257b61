"""Fixtures shared by aorta's tests."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

PLUGIN_SOURCE = Path(__file__).parent / "plugin"


@pytest.fixture(scope="session")
def plugin_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Install the test plugin distribution for real into a private site directory."""
    target = tmp_path_factory.mktemp("plugin-site")
    subprocess.run(
        [
            sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
            "--no-deps", "--no-build-isolation", "--no-index", "--target", str(target),
            str(PLUGIN_SOURCE),
        ],
        check=True,
        timeout=180,
    )  # fmt: skip
    return target


@pytest.fixture
def plugin(plugin_site: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Make the installed test plugin visible to this process and to child processes."""
    monkeypatch.syspath_prepend(str(plugin_site))
    pythonpath = os.environ.get("PYTHONPATH")
    monkeypatch.setenv(
        "PYTHONPATH", str(plugin_site) + (os.pathsep + pythonpath if pythonpath else "")
    )
    importlib.invalidate_caches()
    yield plugin_site
    sys.modules.pop("aorta_test_plugin", None)


@pytest.fixture(autouse=True)
def _no_distributed_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests start as a single process even when pytest itself runs under a launcher."""
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(key, raising=False)
