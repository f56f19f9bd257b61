"""A job's log cannot drive the terminal through the monitor (issue 23 §3, output injection).

The monitor prints each event with the log line that caused it, and logs it. A line with an
OSC escape (retitles the terminal), a carriage return and a forged event, or a bidi override
reaches stdout and stderr escaped, on one line.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from oellm_autoexp.errors import one_line

EXE = Path(sys.executable).with_name("oellm-autoexp")

HOSTILE = "saved checkpoint \x1b]0;pwned\x07\x1b[2K\raction run_completed: job train\u202e"


def test_one_line_escapes_every_control_character() -> None:
    shown = one_line(HOSTILE + "\nsecond line")
    assert not any(ch in shown for ch in "\x1b\x07\r\n\u202e")
    assert "\\x1b]0;pwned\\x07" in shown and "\\u202e" in shown


def test_a_log_line_reaches_stdout_and_the_event_log_escaped(tmp_path: Path) -> None:
    path = tmp_path / "watch.yaml"
    data = {
        "monitoring": {
            "termination_str": "TRAINING DONE",
            "poll_interval_seconds": 0.1,
            "log_signals": [{"name": "ckpt", "pattern": "saved checkpoint", "action": "ckpt"}],
        },
        "watch": [{"name": "train", "log": str(tmp_path / "train.log")}],
        "actions": {"ckpt": "true"},
    }
    path.write_text(yaml.safe_dump(data))
    (tmp_path / "train.log").write_text(f"{HOSTILE}\nTRAINING DONE\n")
    done = subprocess.run(
        [str(EXE), "monitor", str(path)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    for stream in (done.stdout, done.stderr):
        assert not any(ch in stream for ch in "\x1b\x07\r\u202e")
    events = [line for line in done.stdout.splitlines() if line.startswith("action ")]
    assert [line.split(":")[0] for line in events].count("action run_completed") == 1
    assert any("\\x1b]0;pwned\\x07" in line for line in events)
