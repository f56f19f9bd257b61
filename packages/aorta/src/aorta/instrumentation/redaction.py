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
    The value ends at whitespace, `;` or `&`;
  - secrets of a known shape wherever they are (`secret_shapes`: `ghp_`, `hf_`, `sk-`, JWTs,
    AWS keys, PEM private keys, `Authorization: Bearer`, webhook paths, ...);
* in argv (`redact_argv`): the word after a sensitive flag (`--hf-token X`) as well.

All of it runs in time linear in the value's length (a 29 KB base64 variable once took 10 s).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from aorta.instrumentation.secret_shapes import REDACTED, redact_shapes

__all__ = [
    "REDACTED",
    "SENSITIVE_NAME_PARTS",
    "SENSITIVE_NAME_WORDS",
    "is_redacted",
    "is_sensitive_name",
    "redact_argv",
    "redact_embedded_secrets",
    "redact_environ",
    "redact_url_credentials",
    "redact_value",
]

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
# SIGNATURE as a word: `X-Amz-Signature=` in a presigned URL.
SENSITIVE_NAME_WORDS: frozenset[str] = frozenset({"PAT", "PWD", "PW", "SIG", "SIGNATURE"})

# Variables that only look sensitive by the word rule: the shell's working directories.
_NOT_SECRET_NAMES = frozenset({"PWD", "OLDPWD"})

_WORD_SPLIT = re.compile(r"[^A-Z0-9]+")

# `key=value` inside a value (query strings, connection strings, `--flag=value`) and
# `--flag value`; whether the key is sensitive is decided by `is_sensitive_name`. Each starts
# only where its key can start (the look-behind), so a long run of key characters is tried
# once, not at every offset: linear time on any value.
_KEY_CHARS = r"[A-Za-z0-9_.\-]"
_KEY_VALUE = re.compile(rf"(?<!{_KEY_CHARS})(?P<key>{_KEY_CHARS}+)(?P<sep>=)(?P<value>[^\s;&]+)")
_FLAG_VALUE = re.compile(
    rf"(?<!{_KEY_CHARS})(?P<key>--?{_KEY_CHARS}+)(?P<sep>\s+)(?P<value>[^\s\-][^\s;&]*)"
)

_WHITESPACE = re.compile(r"(\s+)")
# Where a URL's userinfo must have ended: the path, query, fragment, the `@` or `user:`.
_USERINFO_STOP = re.compile(r"[/?#@:]")
_SCHEME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-")


def is_sensitive_name(name: str) -> bool:
    """Whether a variable (or a key inside a value) of this name has its value redacted."""
    upper = name.upper()
    if upper in _NOT_SECRET_NAMES:
        return False
    if any(part in upper for part in SENSITIVE_NAME_PARTS):
        return True
    return any(word in SENSITIVE_NAME_WORDS for word in _WORD_SPLIT.split(upper))


def _redact_word_userinfo(word: str) -> str:
    """The userinfo of every URL in one whitespace-free `word`, redacted, in one pass.

    Either `user:password@`, where the password may hold `@` and `/` (so up to the word's last
    `@`), or `token@` with no `/`, `?` or `#` before the `@` (so `https://host/a@b` stays).
    """
    last_at = word.rfind("@")
    if last_at < 0:
        return word
    out: list[str] = []
    pos = search = 0
    while (mark := word.find("://", search, last_at)) != -1:
        start = search = mark + 3
        if mark == 0 or word[mark - 1] not in _SCHEME_CHARS:
            continue
        stop = _USERINFO_STOP.search(word, start)
        if stop is None or stop.start() == start:
            continue
        end = stop.start()
        if word[end] == ":" and last_at > end:
            out.append(f"{word[pos:start]}{REDACTED}")
            pos = last_at  # nothing after the last `@` can hold more userinfo
            break
        if word[end] == "@":
            out.append(f"{word[pos:start]}{REDACTED}")
            pos = end
            search = end + 1
    out.append(word[pos:])
    return "".join(out)


def redact_url_credentials(value: str) -> str:
    """`value` with the userinfo of every embedded URL replaced by `REDACTED` (linear time:
    each whitespace-separated word is scanned a bounded number of times)."""
    if "@" not in value:
        return value
    return "".join(_redact_word_userinfo(part) for part in _WHITESPACE.split(value))


def _is_sensitive_key(key: str) -> bool:
    """`is_sensitive_name` for a key inside a value: there `Pwd=` is an ODBC password, not
    the shell's working directory."""
    return key.upper() in _NOT_SECRET_NAMES or is_sensitive_name(key)


def _redact_pairs(pattern: re.Pattern[str], value: str) -> str:
    def replace(match: re.Match[str]) -> str:
        if not _is_sensitive_key(match.group("key").lstrip("-")):
            return match.group(0)
        return f"{match.group('key')}{match.group('sep')}{REDACTED}"

    return pattern.sub(replace, value)


def redact_embedded_secrets(value: str) -> str:
    """`value` with URL credentials, sensitive `key=value` / `--flag value` pairs and secrets
    of a known shape (`secret_shapes`: tokens, keys, webhooks) redacted."""
    value = redact_shapes(value)
    value = redact_url_credentials(value)
    value = _redact_pairs(_KEY_VALUE, value)
    return _redact_pairs(_FLAG_VALUE, value)


def redact_value(name: str, value: str) -> str:
    """The value to record for variable `name`."""
    if is_sensitive_name(name):
        return REDACTED
    return redact_embedded_secrets(value)


def redact_argv(argv: Sequence[str]) -> list[str]:
    """`argv` as it may be recorded or printed: the word after a sensitive flag (`--hf-token
    X`, `--wandb_key X`), the value of `--api-key=X`, and secrets found in any word, redacted.
    """
    shown: list[str] = []
    hide_next = False
    for word in argv:
        if hide_next:
            shown.append(REDACTED)
            hide_next = False
            continue
        flag, sep, _value = word.partition("=")
        if word.startswith("-") and len(flag) > 1 and is_sensitive_name(flag.lstrip("-")):
            if sep:
                shown.append(f"{flag}={REDACTED}")
                continue
            hide_next = True
        shown.append(redact_embedded_secrets(word))
    return shown


def is_redacted(value: str) -> bool:
    """Whether a recorded value had something removed by this module."""
    return REDACTED in value


def redact_environ(environ: Mapping[str, str]) -> dict[str, str]:
    """All variables, sorted by name, with sensitive values redacted."""
    return {name: redact_value(name, str(environ[name])) for name in sorted(environ)}
