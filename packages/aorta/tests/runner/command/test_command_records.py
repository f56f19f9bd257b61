"""What a command trial writes about itself: the same redaction as every other trial record."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from aorta.runner import run_trials
from aorta.runner.command.spec import parse_command_spec
from aorta.runner.models import RunRequest


def test_command_trial_json_redacts_secrets_from_extra_env(tmp_path: Path) -> None:
    secret = "ghp_" + "x" * 36
    # The command sees the real value (it is applied), the record never holds it.
    script = "import os; print('seen' if os.environ['GITHUB_PAT'].startswith('ghp_') else 'no')"
    request = RunRequest(
        workload="command",
        output_dir=tmp_path / "cell",
        extra_env={"GITHUB_PAT": secret, "AORTA_NOTE": "plain"},
        trials=1,
        steps=1,
        command=parse_command_spec({"command": [sys.executable, "-c", script], "keep_logs": "all"}),
    )
    [result] = run_trials(request)
    assert result.outcome == "passed", result.failure
    text = (tmp_path / "cell" / "trial_0.json").read_text(encoding="utf-8")
    assert secret not in text
    recorded = json.loads(text)["env_applied"]
    assert recorded["AORTA_NOTE"] == "plain"
    assert recorded["GITHUB_PAT"] != secret and "x" * 36 not in recorded["GITHUB_PAT"]
    assert "seen" in (tmp_path / "cell" / "trial_0.log").read_text(encoding="utf-8")
