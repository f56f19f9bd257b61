"""Text from logs, configs and trial files made safe for the sink it is written to.

A trial's failure reason quotes its job's log, a warning quotes a file name, a recipe path is
whatever someone named the file. Written raw, such text could forge lines (a newline and
`trial 2/2 ...: passed`), drive the terminal (ESC and OSC sequences: retitle it, hide text,
hyperlinks) or inject raw HTML and links into `matrix.md`. Each sink gets its own treatment:

- `terminal_text`: one line; every control character (C0, DEL, C1, ESC), and the Unicode
  bidirectional overrides that reorder what is shown, becomes a visible `\\xNN` / `\\uNNNN`
  escape, newlines and tabs become spaces;
- `markdown_text`: `terminal_text`, then `<`, `>`, `[`, `]` and `|` written as HTML entities,
  so no raw HTML, autolink, link, image or table cell can start inside it. Entities rather
  than backslashes, so a backslash in the text cannot cancel the escape; code spans and
  emphasis stay possible (harmless, and aorta's own warnings use code spans).

Both run in linear time (one `str.translate` and one regex pass).
"""

from __future__ import annotations

import re

__all__ = ["markdown_text", "terminal_text"]

_WHITESPACE = re.compile(r"[\t\n\v\f\r\x1c-\x1f\x85\u2028\u2029 ]+")

# Bidi embeddings, overrides and isolates (the "Trojan Source" characters).
_BIDI = [*range(0x202A, 0x202F), *range(0x2066, 0x206A)]
_CONTROLS = {c: f"\\x{c:02x}" for c in [*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0)]}
_VISIBLE = str.maketrans({**_CONTROLS, **{c: f"\\u{c:04x}" for c in _BIDI}})

_MARKDOWN = str.maketrans({"<": "&lt;", ">": "&gt;", "[": "&#91;", "]": "&#93;", "|": "&#124;"})


def terminal_text(text: str) -> str:
    """`text` as one printable line (see the module docstring)."""
    return _WHITESPACE.sub(" ", text).strip().translate(_VISIBLE)


def markdown_text(text: str) -> str:
    """`text` as one line of inert Markdown (see the module docstring)."""
    return terminal_text(text).translate(_MARKDOWN)
