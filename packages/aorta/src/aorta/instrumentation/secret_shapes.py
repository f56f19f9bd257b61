"""Secrets recognised by their value: token shapes, key material, credentials in text.

A secret is not always in a variable called `*_TOKEN`: it is passed as `--hf-token hf_...`,
pasted into `EXTRA_ARGS`, or sits in a JSON service-account blob. `redact_shapes` replaces
every value of a known shape:

- provider tokens: GitHub (`ghp_`, `gho_`, `ghu_`, `ghs_`, `ghr_`, `github_pat_`), Slack
  (`xoxb-`, `xoxp-`, ...), OpenAI / Anthropic (`sk-`, `sk-ant-`), Hugging Face (`hf_`),
  Google API keys (`AIza`), JWTs (`eyJ....eyJ...`), AWS access key ids (`AKIA...`) and
  40-character AWS secret keys (mixed case and digits: a git hash is lowercase hex);
- key material: PEM private keys (to their END line, or to the end of the text when it is
  cut), the value of `"private_key"` in JSON;
- credentials in text: `Authorization: Bearer/Basic ...`, netrc `password ...`, and the
  secret path of Slack and Discord webhook URLs.

(`key=value` pairs such as `token=`, `X-Amz-Signature=`, `Pwd=` and URL passwords are found by
their key in `redaction`.)

Every pattern runs in linear time, whatever the text: each starts only where the token it
looks for can start (a look-behind for the character class it is made of, so a 1 MB base64
run is tried once, not at each of its million offsets), and no pattern can backtrack over
text another attempt already scanned. `tests/hostile/test_secret_shapes.py` times a megabyte
of hostile text.
"""

from __future__ import annotations

import re
from collections.abc import Callable

__all__ = ["REDACTED", "redact_shapes"]

REDACTED = "<redacted>"

# Lookbehinds: a token starts only where the previous character cannot belong to it.
_W = r"(?<![A-Za-z0-9_\-])"

_TOKENS = re.compile(
    _W
    + r"(?:"
    + r"gh[pousr]_[A-Za-z0-9]{20,}"
    + r"|github_pat_[A-Za-z0-9_]{20,}"
    + r"|xox[abposr]-[A-Za-z0-9\-]{8,}"
    + r"|sk-[A-Za-z0-9_\-]{16,}"
    + r"|hf_[A-Za-z0-9]{20,}"
    + r"|AIza[A-Za-z0-9_\-]{30,}"
    + r"|eyJ[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]*"
    + r")"
)

_AWS_KEY_ID = re.compile(
    r"(?<![A-Z0-9])(?:AKIA|ASIA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Z0-9])"
)

# Exactly 40 characters of the base64 alphabet, standing alone.
_AWS_SECRET = re.compile(r"(?<![A-Za-z0-9/+=])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])")

# To the END line, or (a key cut short) to the end of the text: no second scan either way.
_PEM = re.compile(
    r"-----BEGIN[A-Z ]{0,40}PRIVATE KEY(?: BLOCK)?-----(?:.*?-----END[A-Z ]{0,40}-----|.*)",
    re.DOTALL,
)

# The string's body stops only at its closing quote or at the end of the text (a string cut
# short, a trailing backslash), so every attempt matches and no later one rescans it.
_JSON_PRIVATE_KEY = re.compile(
    r'(?P<head>"private_key(?:_id)?"\s{0,100}:\s{0,100}")(?:[^"\\]|\\[\s\S]|\\\Z)*+(?:"|\Z)'
)

_AUTH_SCHEME = re.compile(
    r"(?i)(?<![A-Za-z0-9_\-])(?P<head>(?:bearer|basic)\s{1,100})[A-Za-z0-9._~+/=\-]{16,}"
)

_NETRC_PASSWORD = re.compile(
    r"(?i)(?<![A-Za-z0-9_\-])(?P<head>(?:password|passwd)\s{1,100})[^\s\"']+"
)

_WEBHOOK = re.compile(
    r"(?i)(?P<head>hooks\.slack\.com/(?:services|workflows|triggers)/"
    r"|discord(?:app)?\.com/api/webhooks/)[A-Za-z0-9/_\-]+"
)


def _looks_random(text: str) -> bool:
    """Mixed case and digits: a key, not a word, a path or a hex digest."""
    return (
        any(c.isupper() for c in text)
        and any(c.islower() for c in text)
        and any(c.isdigit() for c in text)
    )


def _keep_head(match: re.Match[str]) -> str:
    return f"{match.group('head')}{REDACTED}"


def _aws_secret(match: re.Match[str]) -> str:
    return REDACTED if _looks_random(match.group(0)) else match.group(0)


_RULES: tuple[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]], ...] = (
    (_PEM, REDACTED),
    (_JSON_PRIVATE_KEY, lambda m: f'{m.group("head")}{REDACTED}"'),
    (_TOKENS, REDACTED),
    (_AWS_KEY_ID, REDACTED),
    (_AWS_SECRET, _aws_secret),
    (_AUTH_SCHEME, _keep_head),
    (_NETRC_PASSWORD, _keep_head),
    (_WEBHOOK, _keep_head),
)


def redact_shapes(text: str) -> str:
    """`text` with every secret of a known shape replaced by `<redacted>` (linear time)."""
    for pattern, replacement in _RULES:
        text = pattern.sub(replacement, text)
    return text
