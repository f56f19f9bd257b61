"""`DigestingLog`: the digest of a trial's output, through its first failure line only."""

from __future__ import annotations

import io
import sys
from collections.abc import Sequence

from aorta.runner.command.digest import DigestingLog
from aorta.runner.command.scanner import OutputScanner
from aorta.runner.command.spec import parse_command_spec
from aorta.runner.command.steps import step_parser
from aorta.runner.command.trial import compiled_patterns

RUN = b"".join(f"step {i} loss: {2.0 / i:.4f}\n".encode() for i in range(1, 6))
FAILURE = b"step 6 loss: nan\n"


def _digest(chunks: Sequence[bytes], *, max_line: int = 1 << 20) -> tuple[str | None, bytes]:
    """Feed `chunks` as the trial's feed loop does (log first, then the scanner)."""
    spec = parse_command_spec({"command": [sys.executable]})
    failure, error = compiled_patterns(spec)
    scanner = OutputScanner(failure, error, step_parser(spec, 0.0), max_line=max_line)
    raw = io.BytesIO()
    log = DigestingLog(raw, scanner.state)
    for chunk in chunks:
        log.write(chunk)
        scanner.feed(chunk, 0.0)
    scanner.finish(0.0)
    return log.finish(), raw.getvalue()


def _split(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


def test_the_log_is_written_whole_and_the_digest_ignores_chunking() -> None:
    whole, written = _digest([RUN])
    assert written == RUN
    assert whole is not None and len(whole) == 32
    for size in (1, 7, 64):
        assert _digest(_split(RUN, size))[0] == whole
    assert _digest([RUN + b"one more line\n"])[0] != whole


def test_what_follows_the_failure_line_does_not_count() -> None:
    # How much a run printed after its failure depends on how fast aorta stopped it.
    stopped_early, _ = _digest([RUN, FAILURE])
    stopped_late, written = _digest(_split(RUN + FAILURE + b"step 7 loss: nan\nTraceback...\n", 5))
    assert stopped_early is not None and stopped_early == stopped_late
    assert written.endswith(b"Traceback...\n")  # the log itself keeps everything
    assert stopped_early != _digest([RUN, b"step 6 loss: inf\n"])[0]


def test_an_unterminated_last_line_counts_as_a_line() -> None:
    assert _digest([RUN + b"done"])[0] != _digest([RUN])[0]
    assert _digest([RUN, b"step 6 loss: nan"])[0] == _digest([RUN, FAILURE])[0]


def test_no_output_has_no_digest() -> None:
    assert _digest([])[0] is None


def test_a_failure_inside_an_over_long_line_leaves_no_digest() -> None:
    # The scanner judges the head of an over-long line before its end arrives: the failure
    # line cannot be cut out of the held-back bytes, so no digest rather than a wrong one.
    long_line = b"x" * 10 + b" loss: nan " + b"y" * 200
    assert _digest(_split(RUN + long_line + b"\n", 50), max_line=64)[0] is None
