"""`aorta env probe`: JSON and human output, scopes, warnings, exit code, no torch on import."""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from aorta.cli.env import env_group
from aorta.instrumentation import EnvSnapshot, system


def test_probe_json_is_a_valid_snapshot() -> None:
    result = CliRunner().invoke(env_group, ["probe", "--json"])

    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    snap = EnvSnapshot.from_dict(data)
    assert snap.scope == "host"
    assert snap.distributions is not None
    assert snap.distributions["aorta"] == importlib.metadata.version("aorta")


def test_probe_returns_exit_code_zero() -> None:
    assert env_group.main(["probe", "--scope", "trial"], standalone_mode=False) == 0


def test_probe_trial_scope_json() -> None:
    result = CliRunner().invoke(env_group, ["probe", "--json", "--scope", "trial"])

    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["scope"] == "trial"
    assert data["distributions"] is None


def test_probe_human_summary() -> None:
    result = CliRunner().invoke(
        env_group, ["probe"], env={"MY_API_KEY": "sk-not-for-printing", "AORTA_X": "1"}
    )

    assert result.exit_code == 0, result.output
    out = result.stdout
    assert f"{sys.implementation.name.lower()}" in out.lower()
    assert "{}.{}.{}".format(*sys.version_info[:3]) in out
    for label in ("platform", "cpu", "memory", "torch", "hipBLASLt", "packages", "env vars"):
        assert label in out
    assert "distributions" in out
    assert "redacted)" in out
    assert "sk-not-for-printing" not in out
    assert result.stderr == ""


def test_partial_reasons_are_warnings_on_stderr(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(system, "MEMINFO_PATH", tmp_path)  # a directory: unreadable
    result = CliRunner().invoke(env_group, ["probe"])

    assert result.exit_code == 0
    assert "aorta: warning: memory: IsADirectoryError" in result.stderr
    assert not [line for line in result.stdout.splitlines() if line.startswith("memory")]


def test_bad_scope_is_a_usage_error() -> None:
    result = CliRunner().invoke(env_group, ["probe", "--scope", "galaxy"])
    assert result.exit_code == 2
    assert "galaxy" in result.output


def test_env_probe_through_main(capsys: pytest.CaptureFixture[str]) -> None:
    from aorta.cli.main import main

    assert main(["env", "probe", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["schema_version"] == 1
    assert data["python"]["version"] == "{}.{}.{}".format(*sys.version_info[:3])


def test_importing_the_env_command_does_not_import_torch() -> None:
    code = "import sys, aorta.cli.env; print('torch' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "False"
