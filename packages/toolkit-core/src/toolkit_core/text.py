"""Text fit for one terminal line.

Standard library only: oellm-autoexp's container runner imports it on a host that has nothing else.
"""

from __future__ import annotations

__all__ = ["MAX_LINE_CHARS", "one_line", "shorten"]

# An error line quotes user values; a 300 KB name must not become a 300 KB line.
MAX_LINE_CHARS = 1000

# Control characters (C0 but tab, DEL, C1: ESC and OSC sequences included) and the Unicode
# bidi overrides, shown escaped: a job's log line must not drive or forge the terminal.
_CONTROLS = [c for c in [*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0)] if c != 0x09]
_BIDI = [*range(0x202A, 0x202F), *range(0x2066, 0x206A)]
_PRINTABLE = str.maketrans(
    {
        **{c: f"\\x{c:02x}" for c in _CONTROLS},
        **{c: f"\\u{c:04x}" for c in _BIDI},
        0x0A: "\\n",
        0x0D: "\\r",
    }
)


def one_line(text: str, limit: int = MAX_LINE_CHARS) -> str:
    """`text` as one terminal line: line breaks and control characters shown escaped (no
    forged line, no escape sequence), the middle cut when too long."""
    return shorten(text.translate(_PRINTABLE), limit)


def shorten(text: str, limit: int = MAX_LINE_CHARS) -> str:
    """`text`, or its head and tail around a note of how much was cut."""
    if len(text) <= limit:
        return text
    keep = limit // 2
    return f"{text[:keep]} ...[{len(text) - 2 * keep:,} characters cut]... {text[-keep:]}"
