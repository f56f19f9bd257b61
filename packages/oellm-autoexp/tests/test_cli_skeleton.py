"""The installed `oellm-autoexp` command answers --help and --version."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

# The console script installed next to the interpreter running the tests.
EXE = Path(sys.executable).with_name("oellm-autoexp")


def test_console_script_reports_the_distribution_version() -> None:
    done = subprocess.run([EXE, "--version"], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == f"oellm-autoexp, version {version('oellm-autoexp')}"


def test_help_describes_the_tool_and_unknown_command_is_usage_error() -> None:
    done = subprocess.run([EXE, "--help"], capture_output=True, text=True, check=True)
    assert "One YAML config to SLURM job arrays" in done.stdout
    bad = subprocess.run([EXE, "frobnicate"], capture_output=True, text=True, check=False)
    assert bad.returncode == 2
    assert "No such command 'frobnicate'" in bad.stderr
