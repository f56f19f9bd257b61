"""The SLURM test cluster is a pytest plugin of the installed package, not a conftest by path."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path


def test_the_cluster_fixtures_are_registered_under_pytest11() -> None:
    plugins = {ep.name: ep.value for ep in entry_points(group="pytest11")}
    assert plugins["oellm_autoexp_slurm"] == "oellm_autoexp.testing.pytest_plugin"


def test_any_test_tree_gets_the_fixtures_and_loading_the_plugin_starts_nothing(
    tmp_path: Path,
) -> None:
    # A test tree outside this repository (no conftest): the fixtures are there by name, and
    # the plugin's import pulls in neither the cluster module nor anything of SLURM.
    (tmp_path / "test_outside.py").write_text(
        "import sys\n"
        "def test_plugin_is_cheap():\n"
        "    assert 'oellm_autoexp.testing.slurm_cluster' not in sys.modules\n"
    )
    for args, expected in (
        ([str(tmp_path)], "1 passed"),
        (["--fixtures", str(tmp_path)], "slurm_accounting_cluster"),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert expected in done.stdout
    assert "fixtures defined from oellm_autoexp.testing.pytest_plugin" in done.stdout
    assert "slurm_cluster [session scope]" in done.stdout
