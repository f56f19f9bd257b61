"""Text fit for one terminal line.

Standard library only: oellm-autoexp's container runner imports it on a host that has nothing else.
"""

from __future__ import annotations

__all__ = ["MAX_LINE_CHARS", "one_line", "shorten"]

# An error line quotes user values; a 300 KB name must not become a 300 KB line.
MAX_LINE_CHARS = 1000


def one_line(text: str, limit: int = MAX_LINE_CHARS) -> str:
    """`text` as one terminal line: line breaks shown escaped, the middle cut when too long."""
    return shorten(text.replace("\r", "\\r").replace("\n", "\\n"), limit)


def shorten(text: str, limit: int = MAX_LINE_CHARS) -> str:
    """`text`, or its head and tail around a note of how much was cut."""
    if len(text) <= limit:
        return text
    keep = limit // 2
    return f"{text[:keep]} ...[{len(text) - 2 * keep:,} characters cut]... {text[-keep:]}"
