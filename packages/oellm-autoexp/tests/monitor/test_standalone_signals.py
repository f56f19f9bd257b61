"""Signal modes and `on_match` in a MONITOR.yaml (standalone watching, console script)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

EXE = Path(sys.executable).with_name("oellm-autoexp")


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(EXE), *args], capture_output=True, text=True, check=False, timeout=120
    )


def _write(tmp_path: Path, signal: dict[str, str]) -> Path:
    path = tmp_path / "watch.yaml"
    data = {
        "monitoring": {
            "termination_str": "TRAINING DONE",
            "poll_interval_seconds": 0.2,
            "log_signals": [signal],
        },
        "watch": [{"name": "eval", "log": str(tmp_path / "eval.log")}],
    }
    path.write_text(yaml.safe_dump(data))
    return path


def test_a_success_signal_completes_a_watched_log_without_the_termination_string(
    tmp_path: Path,
) -> None:
    path = _write(tmp_path, {"name": "eval_done", "pattern": "EVAL DONE", "mode": "success"})
    (tmp_path / "eval.log").write_text("task 1 ok\nEVAL DONE\n")
    done = _run("monitor", str(path))
    assert done.returncode == 0, done.stderr
    state = json.loads(next((tmp_path / "monitoring_state").glob("m*.json")).read_text())
    assert [job["state"] for job in state["jobs"]] == ["completed"]


def test_on_match_restart_is_refused_in_one_line(tmp_path: Path) -> None:
    path = _write(tmp_path, {"name": "nan", "pattern": "nan", "on_match": "restart"})
    done = _run("monitor", str(path), "--once")
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"oellm-autoexp: error: {path}: monitoring.log_signals[0].on_match: a watched job has "
        "no script to resubmit; use on_match: cancel here, or restart in an experiment "
        "config's monitoring"
    )
