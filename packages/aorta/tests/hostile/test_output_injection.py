"""Hostile-input corpus: text from a job's log cannot drive the terminal or inject into matrix.md.

A command's output becomes a trial's failure reason, which is printed on the terminal and
quoted in matrix.md. A job (or whoever wrote its log) could print an OSC escape that retitles
the terminal, a newline and a forged `passed` line, raw HTML or a `javascript:` link. Each sink
gets the text as inert, single-line data (`aorta.text_safety`).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from aorta.text_safety import markdown_text, terminal_text

AORTA = str(Path(sys.executable).with_name("aorta"))

HOSTILE = (
    "boom \x1b]0;pwned\x07 \x1b[2K\rtrial 1/1 seed=0: passed\n"
    "<img src=x onerror=alert(1)> [click](javascript:alert(1)) | ` \u202eevil"
)


def test_terminal_text_is_one_line_without_escapes() -> None:
    shown = terminal_text(HOSTILE)
    assert "\n" not in shown and "\r" not in shown
    assert "\x1b" not in shown and "\x07" not in shown and "\u202e" not in shown
    assert "\\x1b]0;pwned\\x07" in shown  # visible, not acted on


def test_markdown_text_starts_no_html_link_or_table_cell() -> None:
    shown = markdown_text(HOSTILE)
    assert "<img" not in shown and "&lt;img src=x onerror=alert(1)&gt;" in shown
    assert "&#91;click&#93;(javascript:" in shown and "&#124;" in shown
    assert "](" not in shown


def test_a_jobs_output_reaches_terminal_and_matrix_md_inert(tmp_path: Path) -> None:
    script = f"import sys; print({HOSTILE!r}); sys.exit(1)"
    done = subprocess.run(
        [
            AORTA, "triage", "run", "--mode", "matrix", "--mitigation-axis", "none",
            "--environment-axis", "local", "--trials", "1", "--steps", "2",
            "--progress", "plain", "--output-dir", str(tmp_path / "out"),
            "--", sys.executable, "-c", script,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        check=False,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    output = done.stdout + done.stderr
    assert "\x1b" not in output and "\x07" not in output and "\u202e" not in output
    trial_lines = [line for line in done.stdout.splitlines() if line.startswith("[cell 1/1")]
    trial_lines = [line for line in trial_lines if "trial 1/1 seed=0: " in line]
    assert len(trial_lines) == 1 and "ERROR" in trial_lines[0]  # no forged second line
    (matrix_md,) = (tmp_path / "out").rglob("matrix.md")
    text = matrix_md.read_text()
    assert "&lt;img src=x onerror=alert(1)&gt;" in text  # the reason is quoted ...
    assert "\x1b" not in text and "<img" not in text and "](javascript:" not in text
