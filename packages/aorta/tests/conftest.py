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


@pytest.fixture(scope="session")
def state_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This test session's `XDG_STATE_HOME` (aorta keeps its run-signing key there)."""
    return tmp_path_factory.mktemp("xdg-state")


@pytest.fixture(autouse=True)
def _private_state_home(state_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests (and the aorta processes they start) never touch the real ~/.local/state."""
    monkeypatch.setenv("XDG_STATE_HOME", str(state_home))


@pytest.fixture(autouse=True)
def _no_distributed_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests start as a single process even when pytest itself runs under a launcher."""
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(key, raising=False)


# Triton's and Inductor's knobs that change the kernels, or how they are compiled and cached,
# behind a test's back.
_COMPILE_KNOBS = (
    "TRITON_DEFAULT_FP_FUSION",
    "TRITON_FORCE_DISABLE_FP_FUSION",
    "TRITON_F32_DEFAULT",
    "TRITON_LIBDEVICE_PATH",
    "TRITON_OVERRIDE_ARCH",
    "TRITON_STORE_BINARY_ONLY",
    "TORCHINDUCTOR_COMPILE_THREADS",
    "TORCHINDUCTOR_UNIQUE_KERNEL_NAMES",
    "TORCHINDUCTOR_FX_GRAPH_CACHE",
)


@pytest.fixture
def compile_caches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Private Triton and Inductor caches under the returned directory (also for child
    processes), and none of the knobs above: every kernel really compiles, under defaults."""
    root = tmp_path / "compile-caches"
    monkeypatch.setenv("TRITON_CACHE_DIR", str(root / "triton"))
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(root / "inductor"))
    for name in _COMPILE_KNOBS:
        monkeypatch.delenv(name, raising=False)
    return root
