"""Name and Version of an installed distribution from its METADATA text, without the email
parser `importlib.metadata` reads the whole file with.

Both `aorta`'s environment probe (every installed distribution, twice per triage run) and
`oellm-autoexp`'s provenance (a few versions per dry run) need two one-line headers; parsing
each file with the email parser (and importing it) was a large part of either command's CPU.
`plain_headers` reads the header block as the parser's compat32 policy would and gives up
(None) wherever that needs the parser, so callers can fall back to `importlib.metadata`.
"""

from __future__ import annotations

import re

# One line of a metadata file with its ending (the email parser's three line endings), and
# a header name as the email parser accepts it (printable ASCII but ':' and space).
_LINE = re.compile(r"([^\r\n]*)(\r\n|\r|\n|$)")
_HEADER_NAME = re.compile(r"[\041-\071\073-\176]+:")


def plain_headers(text: str) -> dict[str, str] | None:
    """The first value of each header (lower-cased name) of an RFC 822 header block, as the
    email parser's compat32 policy gives it, read until Name and Version are both known;
    None where that needs the email parser (a folded Name or Version, a non-header line)."""
    headers: dict[str, str] = {}
    last = ""
    for line in _LINE.finditer(text):
        content = line.group(1)
        if not content:
            break  # the blank line (or the end of the text) that ends the headers
        if content[0] in " \t":  # a continuation: harmless unless it folds what is read
            if last in ("name", "version"):
                return None
            continue
        if "name" in headers and "version" in headers:
            # Both are final: only the header just ended could have been folded further.
            # (Some packages fold a whole licence text into a later header.)
            break
        match = _HEADER_NAME.match(content)
        if match is None:
            return None
        last = match.group()[:-1].lower()
        headers.setdefault(last, content[match.end() :].lstrip(" \t"))
    return headers
