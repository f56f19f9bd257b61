"""Redaction of environment variables before they are written into any record.

Trial and run records get shared (attached to bug reports, copied between clusters), so a
value that may be a secret never leaves the process. The rules err on the side of redacting
too much:

* by name: the value of a variable whose name contains, case-insensitively, any of
  `SENSITIVE_NAME_PARTS` (TOKEN, SECRET, PASS, KEY, CREDENTIAL, AUTH, COOKIE, PRIVATE,
  SESSION, JWT, WEBHOOK), or has one of `SENSITIVE_NAME_WORDS` (PAT, PWD, PW, SIG) as a whole
  `_`-separated word, becomes `REDACTED`. `PASS` covers PASSWORD, PASSWD, PASSPHRASE, PGPASS
  and DOCKER_PASS. Harmless hits such as `XAUTHORITY`, `XDG_SESSION_TYPE` or `BYPASS_X` are
  accepted as the price of never missing `HF_TOKEN`-like names; `PAT` is matched as a word
  only so that `PATH` stays readable;
* by value, in any variable:
  - credentials embedded in a URL (`scheme://user:password@host`, also
    `scheme://token@host`) become `REDACTED` while scheme, host and path stay readable
    (`https://<redacted>@proxy.example:3128`). A password may contain `@` or `/`: after
    `user:` everything up to the last `@` of the whitespace-separated word is redacted;
  - `key=value` pairs whose key is sensitive by the name rule above: query strings
    (JDBC `?password=`), connection strings (Azure `AccountKey=`, `SharedAccessSignature=`)
    and command-line flags inside a value (`--api-secret=...`, also `--api-secret ...`).
    The value ends at whitespace, `;` or `&`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

REDACTED = "<redacted>"

SENSITIVE_NAME_PARTS: tuple[str, ...] = (
    "TOKEN",
    "SECRET",
    "PASS",
    "KEY",
    "CREDENTIAL",
    "AUTH",
    "COOKIE",
    "PRIVATE",
    "SESSION",
    "JWT",
    "WEBHOOK",
)

# Too short to match as substrings without hitting PATH, PWD-free names and signals.
SENSITIVE_NAME_WORDS: frozenset[str] = frozenset({"PAT", "PWD", "PW", "SIG"})

# Variables that only look sensitive by the word rule: the shell's working directories.
_NOT_SECRET_NAMES = frozenset({"PWD", "OLDPWD"})

_WORD_SPLIT = re.compile(r"[^A-Z0-9]+")

# The userinfo part of a URL. Either `user:password@` where the password may contain "@"
# or "/" (greedy up to the last "@" of the word), or `token@` that does not cross the start
# of the path, query or fragment (so "https://host/a@b" is left alone). Whitespace ends a
# word: values such as PIP_EXTRA_INDEX_URL hold several URLs separated by spaces.
_URL_USERINFO = re.compile(
    r"(?P<scheme>\b[a-z][a-z0-9+.\-]*://)(?:[^\s/?#@:]+:\S*@|[^\s/?#@]+@)", re.IGNORECASE
)

# `key=value` inside a value (query strings, connection strings, `--flag=value`) and
# `--flag value`; whether the key is sensitive is decided by `is_sensitive_name`.
_KEY_VALUE = re.compile(r"(?P<key>[A-Za-z0-9_.\-]+)(?P<sep>=)(?P<value>[^\s;&]+)")
_FLAG_VALUE = re.compile(r"(?P<key>--?[A-Za-z0-9_.\-]+)(?P<sep>\s+)(?P<value>[^\s\-][^\s;&]*)")


def is_sensitive_name(name: str) -> bool:
    """Whether a variable (or a key inside a value) of this name has its value redacted."""
    upper = name.upper()
    if upper in _NOT_SECRET_NAMES:
        return False
    if any(part in upper for part in SENSITIVE_NAME_PARTS):
        return True
    return any(word in SENSITIVE_NAME_WORDS for word in _WORD_SPLIT.split(upper))


def redact_url_credentials(value: str) -> str:
    """`value` with the userinfo of every embedded URL replaced by `REDACTED`."""
    return _URL_USERINFO.sub(lambda m: f"{m.group('scheme')}{REDACTED}@", value)


def _redact_pairs(pattern: re.Pattern[str], value: str) -> str:
    def replace(match: re.Match[str]) -> str:
        if not is_sensitive_name(match.group("key").lstrip("-")):
            return match.group(0)
        return f"{match.group('key')}{match.group('sep')}{REDACTED}"

    return pattern.sub(replace, value)


def redact_embedded_secrets(value: str) -> str:
    """`value` with URL credentials and sensitive `key=value` / `--flag value` pairs redacted."""
    value = redact_url_credentials(value)
    value = _redact_pairs(_KEY_VALUE, value)
    return _redact_pairs(_FLAG_VALUE, value)


def redact_value(name: str, value: str) -> str:
    """The value to record for variable `name`."""
    if is_sensitive_name(name):
        return REDACTED
    return redact_embedded_secrets(value)


def is_redacted(value: str) -> bool:
    """Whether a recorded value had something removed by this module."""
    return REDACTED in value


def redact_environ(environ: Mapping[str, str]) -> dict[str, str]:
    """All variables, sorted by name, with sensitive values redacted."""
    return {name: redact_value(name, str(environ[name])) for name in sorted(environ)}
