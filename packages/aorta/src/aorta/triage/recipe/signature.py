"""Whether this user started a run directory from the very recipe it holds now.

A run directory may come from someone else, so `--resume` refuses what its recipe would run
that the registry does not vouch for (`trust.py`) - and a command workload always counts. But
the user who just pressed Ctrl-C on their own run vouched for that command when they started
it. So when a run starts, aorta signs its `recipe.resolved.yaml`: an HMAC-SHA256 of the file's
SHA-256 under a key only this user can read, written atomically as `recipe.resolved.sig`. A
resume whose recipe bytes still carry a valid signature runs without `--trust-environments`;
a changed recipe, a signature made with another user's key (a run directory received from
someone else) or no signature at all falls back to the trust check.

A digest stored in the run directory alone would prove nothing: whoever writes the recipe can
write the digest next to it. The key lives outside the run directory, in
`$XDG_STATE_HOME/aorta/run-signing.key` (default `~/.local/state/aorta/`), 32 random bytes,
mode 0600 in a 0700 directory; anyone who can write the user's home is out of scope
(docs/security.md). When the key cannot be created or is unsafe (another owner, readable by
others), nothing is signed and resuming asks for `--trust-environments`, as before.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import secrets
import stat
from pathlib import Path
from typing import Final

from aorta.atomic import write_text_atomic
from aorta.errors import AortaUsageError

__all__ = ["SIGNATURE_NAME", "recipe_digest", "sign_run_recipe", "signed_by_this_user"]

SIGNATURE_NAME: Final = "recipe.resolved.sig"
_KEY_NAME: Final = "run-signing.key"
_KEY_BYTES: Final = 32
_SIGNATURE_MAX_BYTES: Final = 1024
_VERSION: Final = 1


def recipe_digest(data: bytes) -> str:
    """The SHA-256 (hex) of a recipe file's bytes, as `Recipe.sha256` records it."""
    return hashlib.sha256(data).hexdigest()


def _key_path() -> Path:
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "aorta" / _KEY_NAME


def _read_key(path: Path) -> bytes | None:
    """The key if it is a regular file of this user, private, of the right size; else None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(fd)
        private = info.st_uid == os.getuid() and not info.st_mode & 0o077
        if not (stat.S_ISREG(info.st_mode) and private and info.st_size == _KEY_BYTES):
            return None
        key = handle.read(_KEY_BYTES + 1)
    return key if len(key) == _KEY_BYTES else None


def _create_key(path: Path) -> bytes | None:
    """Create the key (or read the one a concurrent aorta just created); None if impossible."""
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        temp = path.with_name(f".{_KEY_NAME}.{os.getpid()}.{secrets.token_hex(4)}")
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(secrets.token_bytes(_KEY_BYTES))
            # link(), unlike rename(), never replaces a key another process created first.
            with contextlib.suppress(FileExistsError):
                os.link(temp, path)
        finally:
            temp.unlink(missing_ok=True)
    except OSError:
        return None
    return _read_key(path)


def _mac(key: bytes, digest: str) -> str:
    return hmac.new(key, f"aorta-run-recipe:{_VERSION}:{digest}".encode(), "sha256").hexdigest()


def sign_run_recipe(run_dir: Path, recipe_bytes: bytes) -> bool:
    """Sign the `recipe.resolved.yaml` just written to `run_dir` (its bytes); False when no key
    could be had (nothing is written: resuming will ask for `--trust-environments`)."""
    path = _key_path()
    key = _read_key(path) or _create_key(path)
    if key is None:
        return False
    digest = recipe_digest(recipe_bytes)
    record = {"version": _VERSION, "recipe_sha256": digest, "hmac": _mac(key, digest)}
    write_text_atomic(run_dir / SIGNATURE_NAME, json.dumps(record) + "\n")
    return True


def signed_by_this_user(run_dir: Path, recipe_sha256: str | None) -> bool:
    """Whether `run_dir`'s signature vouches for a recipe whose bytes hash to `recipe_sha256`
    (the recipe as read for this resume, not re-read: no window to swap it), made with this
    user's key. Never creates a key; any unreadable or malformed piece means False."""
    if recipe_sha256 is None:
        return False
    key = _read_key(_key_path())
    if key is None:
        return False
    from aorta.triage.recipe.text import read_regular_file

    try:
        raw = read_regular_file(
            SIGNATURE_NAME, run_dir / SIGNATURE_NAME, "signature", _SIGNATURE_MAX_BYTES
        )
        record = json.loads(raw.decode("utf-8"))
    except (AortaUsageError, UnicodeDecodeError, ValueError):
        return False
    if not isinstance(record, dict) or record.get("recipe_sha256") != recipe_sha256:
        return False
    mac = record.get("hmac")
    return isinstance(mac, str) and hmac.compare_digest(mac, _mac(key, recipe_sha256))
