"""`submit --local` with an `on_match: cancel` signal: the local process is ended mid-run."""

from __future__ import annotations

import json
import time
from pathlib import Path

from oellm_autoexp.cli import main

CONFIG = """
project: {{name: nanrun, base_output_dir: {root}}}
backend:
  class_name: CommandBackend
  argv: [bash, -c, "echo 'step 1 loss: 2.1'; sleep 0.5; echo 'step 2 loss: nan'; sleep 300"]
slurm:
  sbatch: {{time: "00:10:00", nodes: 1, ntasks: 1}}
  use_srun: false
monitoring:
  class_name: LogMonitor
  termination_str: "oellm-autoexp: completed"
  poll_interval_seconds: 0.5
  log_signals:
    - {{name: nan, pattern: "loss: nan", error_type: nan, on_match: {on_match}}}
"""


def test_local_run_is_cancelled_at_its_nan_line_not_after_its_sleep(tmp_path: Path) -> None:
    config = tmp_path / "nan.yaml"
    config.write_text(CONFIG.format(root=tmp_path / "runs", on_match="cancel"))
    started = time.monotonic()
    code = main(["submit", str(config), "--local", "--test-only=never"])
    elapsed = time.monotonic() - started
    assert code == 1  # the job failed (cancelled at its signal, no restart policy)
    assert elapsed < 60  # not the job's 300 s sleep
    (job,) = _jobs(tmp_path / "runs")
    (attempt,) = job["attempts"]
    assert (attempt["mode"], attempt["metadata"]["error_type"]) == ("crash", "nan")
    assert attempt["metadata"]["line"] == "step 2 loss: nan"
    assert job["outcome"]["decision"] == "no restart policy for mode crash"


def test_local_run_restarts_at_its_nan_line_until_max_restarts(tmp_path: Path) -> None:
    config = tmp_path / "nan.yaml"
    text = CONFIG.format(root=tmp_path / "runs", on_match="restart")
    config.write_text(
        text.replace("poll_interval_seconds: 0.5", "poll_interval_seconds: 0.5\n  max_restarts: 1")
    )
    started = time.monotonic()
    assert main(["submit", str(config), "--local", "--test-only=never"]) == 1
    assert time.monotonic() - started < 60
    (job,) = _jobs(tmp_path / "runs")
    first, second = job["attempts"]
    assert first["job_id"] != second["job_id"]
    assert [a["metadata"]["error_type"] for a in (first, second)] == ["nan", "nan"]
    assert job["restarts"] == {"crash": 1}
    assert job["outcome"]["decision"] == "global restart cap reached (1/1)"


def _jobs(root: Path) -> list[dict]:
    (session_file,) = [p for p in (root / "monitoring_state").glob("*.json") if p.stem != "events"]
    return list(json.loads(session_file.read_text())["jobs"])
