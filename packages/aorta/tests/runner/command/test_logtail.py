"""The log tail of an errored command trial: bounded, readable, redacted."""

from __future__ import annotations

from pathlib import Path

from aorta.runner.command.logtail import LAST_LINE_CHARS, TAIL_LINES, last_line, log_tail


def test_a_huge_log_gives_its_last_lines_only(tmp_path: Path) -> None:
    log = tmp_path / "trial_0.log"
    with log.open("w") as handle:
        for i in range(200_000):  # ~3 MB: only the end is read
            handle.write(f"step {i} loss 2.0\n")
        handle.write("RuntimeError: boom\n\n\n")
    tail = log_tail(log)
    assert tail is not None
    lines = tail.splitlines()
    assert len(lines) == TAIL_LINES and lines[-1] == "RuntimeError: boom"
    assert lines[0] == f"step {200_000 - TAIL_LINES + 1} loss 2.0"  # no line cut by the seek
    assert last_line(tail) == "RuntimeError: boom"


def test_progress_bars_and_colours_read_as_the_terminal_showed_them(tmp_path: Path) -> None:
    log = tmp_path / "trial_0.log"
    log.write_bytes(
        b" 10%|#  | 1/10\r 20%|## | 2/10\r 30%|###| 3/10\n"
        b"\x1b[31mERROR\x1b[0m token=abc123 in \x1b[1mstep 3\x1b[0m\x07\n"
    )
    assert log_tail(log) == " 30%|###| 3/10\nERROR token=<redacted> in step 3"


def test_no_log_or_an_empty_one_gives_nothing(tmp_path: Path) -> None:
    assert log_tail(None) is None
    assert log_tail(tmp_path / "missing.log") is None
    (tmp_path / "empty.log").write_text("\n \n")
    assert log_tail(tmp_path / "empty.log") is None
    assert last_line(None) is None


def test_a_long_last_line_is_shortened_for_the_one_line_reason() -> None:
    line = last_line("x\n" + "y" * 5000)
    assert line is not None and len(line) == LAST_LINE_CHARS and line.endswith("...")
