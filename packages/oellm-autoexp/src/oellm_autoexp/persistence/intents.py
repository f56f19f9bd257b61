"""Monitor actions run exactly once across crashes: recorded as intents before they run.

A poll reads new log text, finds signals and saves the session with the advanced log offset.
If the actions those signals asked for ran only afterwards, a SIGKILL between the save and the
action lost them for good (the text that produced them is behind the saved offset). So:

1. the actions of a poll are written into the session as *pending* intents in the same atomic
   write as the log offset (`record_intents`; the controller marks the session dirty);
2. before an intent's command runs it is marked *started* and the session saved; the
   command's shell first *claims* the intent's receipt file: it creates it with ``O_EXCL``
   (bash's noclobber, `set -C`) and runs the command only if it was the one that created it
   (`CLAIM_PREFIX`, `Receipts`);
3. once the command returned, the intent is removed and the session saved.

After a crash, a pending intent runs (nothing of it happened yet). A started one with a
receipt is not repeated: its command was launched, and finishes on its own (commands are not
tied to the monitor's life); it is reported as interrupted. A started one without a receipt is
run again, and here is why that never runs it twice: a shell the killed monitor had already
forked, which has not yet claimed the receipt, races the new one for the same ``O_EXCL``
create, and exactly one of them wins and runs the command; the other exits with
`ALREADY_CLAIMED_EXIT` without running it. Receipts of settled intents are kept for
`RECEIPT_KEEP_S` before they are removed, so that such a late shell still finds the claim.
`tests/hostile/test_monitor_never_blind.py` SIGKILLs the monitor at random moments and, with a
shell held between its fork and its claim, exactly at the racy point.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import time
from collections.abc import Iterable, Mapping, Set
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

__all__ = [
    "ALREADY_CLAIMED_EXIT",
    "CLAIM_PREFIX",
    "PENDING",
    "STARTED",
    "Intent",
    "Receipts",
    "intents_from_list",
    "record_intents",
]

# The first thing an action's shell does: claim its receipt (`$AUTOEXP_RECEIPT`). With
# noclobber, bash's `>` opens a new file with O_CREAT|O_EXCL: of two shells for one intent
# (one forked by a monitor that was killed, one by its successor) exactly one creates it and
# runs the command; the other exits with EX_TEMPFAIL, the command not run. noclobber is then
# turned off again: the command gets the shell's defaults.
ALREADY_CLAIMED_EXIT = 75
CLAIM_PREFIX = f'set -C; : > "$AUTOEXP_RECEIPT" || exit {ALREADY_CLAIMED_EXIT}; set +C; '

# How long the receipt of a settled intent is kept: a shell forked for it that has not yet
# claimed it (its monitor killed in between) must still find it claimed. A shell stalled
# between its fork and its first command for longer is not a credible case.
RECEIPT_KEEP_S = 3600.0

# More stray receipts than this in one folder are not looked at (a planted flood).
_MAX_RECEIPTS = 10_000

PENDING, STARTED = "pending", "started"
_STATES = (PENDING, STARTED)
_TEXT_FIELDS = ("intent_id", "action", "signal", "job", "line", "state")


class _ActionLike(Protocol):
    @property
    def action(self) -> str: ...
    @property
    def signal(self) -> str: ...
    @property
    def session_id(self) -> str: ...
    @property
    def job(self) -> str: ...
    @property
    def job_id(self) -> str | None: ...
    @property
    def line(self) -> str: ...
    @property
    def at(self) -> float: ...


@dataclass
class Intent:
    """One action a poll asked for, with where it stands."""

    intent_id: str
    action: str
    signal: str
    job: str
    job_id: str | None
    line: str
    at: float
    state: str = PENDING

    def to_dict(self) -> dict[str, Any]:
        """The session file's form."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Intent:
        """Read one back; TypeError/ValueError on a malformed entry (the session is refused)."""
        for key in _TEXT_FIELDS:
            if not isinstance(data.get(key), str):
                raise TypeError(f"intents: {key}: expected a string")
        job_id = data.get("job_id")
        if job_id is not None and not isinstance(job_id, str):
            raise TypeError("intents: job_id: expected a string or null")
        at = data.get("at")
        if isinstance(at, bool) or not isinstance(at, int | float):
            raise TypeError("intents: at: expected a number")
        if data["state"] not in _STATES:
            raise ValueError(f"intents: state: expected one of {', '.join(_STATES)}")
        return cls(
            intent_id=data["intent_id"],
            action=data["action"],
            signal=data["signal"],
            job=data["job"],
            job_id=job_id,
            line=data["line"],
            at=float(at),
            state=data["state"],
        )


def intents_from_list(raw: Any) -> list[Intent]:
    """The `intents` list of a session file (absent: none)."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise TypeError("intents: expected a list")
    return [Intent.from_dict(item) for item in raw]


def record_intents(intents: list[Intent], session_id: str, actions: Iterable[_ActionLike]) -> int:
    """Append the `actions` of session `session_id` to `intents` as pending; how many."""
    added = 0
    for action in actions:
        if action.session_id != session_id:
            continue
        intents.append(
            Intent(
                intent_id=secrets.token_hex(8),
                action=action.action,
                signal=action.signal,
                job=action.job,
                job_id=action.job_id,
                line=action.line,
                at=action.at,
            )
        )
        added += 1
    return added


class Receipts:
    """`<state_dir>/<session_id>.receipts/<intent_id>`: created (O_EXCL) by the one shell of
    an action that runs its command, so their presence says the action was launched."""

    def __init__(self, state_dir: Path, session_id: str) -> None:
        self.folder = Path(state_dir) / f"{session_id}.receipts"

    def path(self, intent_id: str) -> str:
        """Where the action of `intent_id` leaves its receipt (the folder is created 0700)."""
        self.folder.mkdir(mode=0o700, exist_ok=True)
        return str(self.folder / intent_id)

    def exists(self, intent_id: str) -> bool:
        """Whether the action of `intent_id` was launched."""
        return (self.folder / intent_id).is_file()

    def forget_settled(self, keep: Set[str]) -> None:
        """Drop receipts older than `RECEIPT_KEEP_S` of intents not in `keep` (settled)."""
        if not self.folder.is_dir():
            return
        cutoff = time.time() - RECEIPT_KEEP_S
        with os.scandir(self.folder) as entries:
            for count, entry in enumerate(entries):
                if count >= _MAX_RECEIPTS:
                    break
                if entry.name in keep:
                    continue
                with contextlib.suppress(FileNotFoundError):
                    if entry.stat(follow_symlinks=False).st_mtime < cutoff:
                        Path(entry.path).unlink()
