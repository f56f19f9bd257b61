"""Hostile-input corpus: a received run directory that brings its own `recipe.resolved.sig`.

The signature lets a user resume their own command run without `--trust-environments`. A run
directory from someone else may carry a signature too: made with their key, copied from a run
of ours next to a changed recipe, or not a signature at all (a FIFO, a link to /dev/zero, junk).
None of them may let the command run: exit 2 with the usual one-line refusal, nothing runs.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import sys
from pathlib import Path

import pytest
import yaml

from aorta.cli.main import main
from aorta.triage.recipe import recipe_from_flags, resolved_recipe_dict
from aorta.triage.recipe.signature import SIGNATURE_NAME, sign_run_recipe

REFUSED = "pass --trust-environments to run it"


def _planted_command(tmp_path: Path) -> tuple[str, Path]:
    """A resolved recipe whose command would leave a marker file if it ever ran."""
    marker = tmp_path / "it-ran"
    script = f"open({str(marker)!r}, 'w').close()"
    recipe = recipe_from_flags(
        workload=None,
        command={"command": [sys.executable, "-c", script]},
        mitigation_axis=["none"],
        environment_axis=["local"],
        trials=1,
        steps=1,
    )
    return yaml.safe_dump(resolved_recipe_dict(recipe), sort_keys=False), marker


def _received(tmp_path: Path, text: str) -> Path:
    run_dir = tmp_path / "received" / "run"
    run_dir.mkdir(parents=True)
    (run_dir / "recipe.resolved.yaml").write_text(text)
    return run_dir


def _refused(capsys: pytest.CaptureFixture[str], run_dir: Path, marker: Path) -> None:
    assert main(["triage", "run", "--resume", str(run_dir)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "workload runs the command" in line and REFUSED in line
    assert not marker.exists()


def test_a_signature_made_with_another_users_key_vouches_for_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    text, marker = _planted_command(tmp_path)
    run_dir = _received(tmp_path, text)
    with monkeypatch.context() as other_user:
        other_user.setenv("XDG_STATE_HOME", str(tmp_path / "their-home"))
        assert sign_run_recipe(run_dir, text.encode())
    _refused(capsys, run_dir, marker)


def test_our_signature_next_to_a_changed_recipe_vouches_for_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text, marker = _planted_command(tmp_path)
    ours = _received(tmp_path / "ours", "harmless: true\n")
    assert sign_run_recipe(ours, b"harmless: true\n")  # a signature of ours, for other bytes
    run_dir = _received(tmp_path, text)
    shutil.copy(ours / SIGNATURE_NAME, run_dir / SIGNATURE_NAME)
    _refused(capsys, run_dir, marker)
    # Its digest rewritten to the planted recipe's: the HMAC no longer matches it.
    record = json.loads((run_dir / SIGNATURE_NAME).read_text())
    record["recipe_sha256"] = hashlib.sha256(text.encode()).hexdigest()
    (run_dir / SIGNATURE_NAME).write_text(json.dumps(record))
    _refused(capsys, run_dir, marker)


@pytest.mark.parametrize("kind", ["junk", "huge", "fifo", "dev-zero", "directory"])
def test_a_malformed_signature_file_is_no_signature(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    text, marker = _planted_command(tmp_path)
    run_dir = _received(tmp_path, text)
    path = run_dir / SIGNATURE_NAME
    if kind == "junk":
        path.write_text('{"recipe_sha256": [1], "hmac": null}')
    elif kind == "huge":
        path.write_text(" " * 10_000_000)
    elif kind == "fifo":
        os.mkfifo(path)  # a blocking read would hang the resume forever
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")
    else:
        path.mkdir()
    _refused(capsys, run_dir, marker)


def test_an_unsafe_key_signs_nothing_and_the_resume_asks_for_the_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    key = tmp_path / "state" / "aorta" / "run-signing.key"
    key.parent.mkdir(parents=True)
    key.write_bytes(b"k" * 32)
    key.chmod(stat.S_IRUSR | stat.S_IWUSR | stat.S_IRGRP | stat.S_IROTH)  # others can read it
    text, marker = _planted_command(tmp_path)
    run_dir = _received(tmp_path, text)
    assert not sign_run_recipe(run_dir, text.encode())
    assert not (run_dir / SIGNATURE_NAME).exists()
    _refused(capsys, run_dir, marker)
