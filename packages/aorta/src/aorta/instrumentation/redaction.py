"""Redaction of environment variables before they are written into any record.

Trial and run records get shared (attached to bug reports, copied between clusters), so a
value that may be a secret never leaves the process. Two rules, both erring on the side of
redacting too much:

* by name: the value of a variable whose name contains, case-insensitively, any of
  `SENSITIVE_NAME_PARTS` (TOKEN, SECRET, PASSWORD, PASSWD, KEY, CREDENTIAL, AUTH, COOKIE,
  PRIVATE, SESSION) becomes `REDACTED`. Harmless hits such as `XAUTHORITY` or
  `XDG_SESSION_TYPE` are accepted as the price of never missing `HF_TOKEN`-like names;
* by value: credentials embedded in a URL (`scheme://user:password@host`, also
  `scheme://token@host`) are replaced, in any variable, by `REDACTED` while scheme, host
  and path stay readable (`https://<redacted>@proxy.example:3128`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

REDACTED = "<redacted>"

SENSITIVE_NAME_PARTS: tuple[str, ...] = (
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "KEY",
    "CREDENTIAL",
    "AUTH",
    "COOKIE",
    "PRIVATE",
    "SESSION",
)

# The userinfo part of a URL: after "scheme://", up to "@", without crossing the start of
# the path, query or fragment (so "https://host/a@b" is left alone) or whitespace (values
# such as PIP_EXTRA_INDEX_URL hold several URLs separated by spaces).
_URL_USERINFO = re.compile(r"(?P<scheme>\b[a-z][a-z0-9+.\-]*://)[^\s/?#@]+@", re.IGNORECASE)


def is_sensitive_name(name: str) -> bool:
    """Whether a variable of this name has its whole value redacted."""
    upper = name.upper()
    return any(part in upper for part in SENSITIVE_NAME_PARTS)


def redact_url_credentials(value: str) -> str:
    """`value` with the userinfo of every embedded URL replaced by `REDACTED`."""
    return _URL_USERINFO.sub(lambda m: f"{m.group('scheme')}{REDACTED}@", value)


def redact_value(name: str, value: str) -> str:
    """The value to record for variable `name`."""
    if is_sensitive_name(name):
        return REDACTED
    return redact_url_credentials(value)


def is_redacted(value: str) -> bool:
    """Whether a recorded value had something removed by this module."""
    return REDACTED in value


def redact_environ(environ: Mapping[str, str]) -> dict[str, str]:
    """All variables, sorted by name, with sensitive values redacted."""
    return {name: redact_value(name, str(environ[name])) for name in sorted(environ)}
