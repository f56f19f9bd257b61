"""Session files: atomic writes, one lock per session, clear errors for bad files.

`<base_output_dir>/monitoring_state/<session_id>.json` holds the session; a sibling
`<session_id>.lock` (an OS file lock, released when the holder dies, also on SIGKILL) makes sure
two monitors never drive the same session. Every write is temp file + fsync + rename, so a
reader or a resumed monitor never sees a half-written session.
"""

from __future__ import annotations

import json
import os
import re
import socket
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path

from oellm_autoexp.atomic import write_text_atomic
from oellm_autoexp.errors import AutoexpUsageError, ConfigError
from oellm_autoexp.persistence.session import SESSION_FORMAT, SESSION_VERSION, Session
from oellm_autoexp.persistence.trust import (
    SessionUntrustedError,
    pin_execution,
    refuse_foreign_state,
)
from oellm_autoexp.safe_paths import make_dirs_inside, read_regular_text
from toolkit_core.locks import LockBusyError, hold_lock

STATE_DIR_NAME = "monitoring_state"
_SESSION_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


class SessionNotFoundError(AutoexpUsageError):
    """No session file of that id (exit 2); the message lists the known ids."""


class SessionCorruptError(AutoexpUsageError):
    """The session file is not valid JSON or not an oellm-autoexp session (exit 2)."""


class SessionLockedError(AutoexpUsageError):
    """Another monitor process holds the session's lock (exit 2)."""


class SessionStore:
    """The session files of one `monitoring_state` directory."""

    def __init__(
        self,
        state_dir: Path,
        *,
        root: Path | None = None,
        submit_cmd: str | None = None,
        scripts_root: Path | None = None,
        allow_shared_writable: bool = False,
    ) -> None:
        self.state_dir = Path(state_dir)
        # What a loaded session may execute (`persistence.trust`): the submit command of the
        # caller's current config, scripts only below `scripts_root`, and only from files this
        # user owns that no one else can write unless `allow_shared_writable`.
        self.submit_cmd = submit_cmd
        self.scripts_root = scripts_root
        self.allow_shared_writable = allow_shared_writable
        # With `root` (the output root the state dir lies in), the state dir is created without
        # following a symlink planted below the root; session files are owner-only (0600, as
        # mkstemp creates them) in an owner-only directory: they hold the jobs' environments.
        self.root = root

    def _ensure_dir(self) -> None:
        if self.root is not None:
            make_dirs_inside(self.state_dir, self.root, mode=0o700)
        else:
            self.state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)

    @classmethod
    def for_output_dir(cls, base_output_dir: Path) -> SessionStore:
        """The store under `<base_output_dir>/monitoring_state`."""
        return cls(Path(base_output_dir) / STATE_DIR_NAME)

    def path(self, session_id: str) -> Path:
        """Where session `session_id` lives (the id is checked: no path tricks)."""
        if not _SESSION_ID.fullmatch(session_id):
            raise AutoexpUsageError(
                f"invalid session id {session_id!r}: expected letters, digits, '-' or '_'"
            )
        return self.state_dir / f"{session_id}.json"

    def ids(self) -> list[str]:
        """Session ids present, oldest file first."""
        if not self.state_dir.is_dir():
            return []
        files = sorted(self.state_dir.glob("*.json"), key=lambda p: (p.stat().st_mtime, p.name))
        return [p.stem for p in files]

    def save(self, session: Session) -> Path:
        """Write the session atomically (replacing its previous version)."""
        # One job record per line: readable and diffable, and much faster than indented JSON
        # for sessions of 10,000 jobs.
        data = session.to_dict()
        jobs = data.pop("jobs")
        head = json.dumps(data, indent=1, allow_nan=False)
        body = ",\n".join(json.dumps(job, allow_nan=False, separators=(",", ":")) for job in jobs)
        text = head[:-2] + ',\n "jobs": [\n' + body + "\n]\n}\n"
        self._ensure_dir()
        return write_text_atomic(self.path(session.session_id), text, overwrite=True, mode=0o600)

    def create(self, session: Session) -> Path:
        """Write a new session; an existing file of that id is never replaced."""
        path = self.path(session.session_id)
        if path.exists():
            raise AutoexpUsageError(f"{path}: a session with id {session.session_id} exists")
        return self.save(session)

    def load(self, session_id: str) -> Session:
        """Read a session; missing, corrupt or foreign files are one-line usage errors."""
        path = self.path(session_id)
        if not path.exists():
            known = ", ".join(self.ids()) or "none"
            raise SessionNotFoundError(
                f"no session {session_id!r} in {self.state_dir} (known: {known})"
            )
        if not self.allow_shared_writable:
            try:
                refuse_foreign_state(self.state_dir, what="the session directory")
                refuse_foreign_state(path, what="the session file")
            except SessionUntrustedError as exc:  # skipped like a corrupt file, and said
                raise SessionCorruptError(str(exc)) from None
        try:  # never blocks on a FIFO planted in a shared state dir
            text = read_regular_text(path, max_bytes=None)
        except ConfigError as exc:
            raise SessionCorruptError(str(exc)) from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise SessionCorruptError(
                f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
            ) from None
        except RecursionError:
            raise SessionCorruptError(f"{path}: JSON nested too deeply") from None
        if not isinstance(data, dict) or data.get("format") != SESSION_FORMAT:
            raise SessionCorruptError(
                f'{path}: not an oellm-autoexp session file (expected "format": "{SESSION_FORMAT}")'
            )
        if data.get("version") != SESSION_VERSION:
            raise SessionCorruptError(
                f"{path}: version: expected {SESSION_VERSION}, found {data.get('version')!r}"
            )
        try:
            session = Session.from_dict(data)
        except KeyError as exc:
            raise SessionCorruptError(f"{path}: missing key {exc}") from None
        except (TypeError, ValueError) as exc:
            raise SessionCorruptError(f"{path}: {' '.join(str(exc).split())}") from None
        try:
            pin_execution(session, path, submit_cmd=self.submit_cmd, scripts_root=self.scripts_root)
        except SessionUntrustedError as exc:
            raise SessionCorruptError(str(exc)) from None
        return session

    @contextmanager
    def lock(self, session_id: str) -> Iterator[None]:
        """Hold the session's lock; `SessionLockedError` at once if another process has it."""
        lock_path = self.path(session_id).with_suffix(".lock")
        self._ensure_dir()
        owner_path = lock_path.with_suffix(".owner")
        held = ExitStack()
        try:
            held.enter_context(hold_lock(lock_path))
        except LockBusyError:
            raise SessionLockedError(
                f"session {session_id} is being monitored by another process "
                f"({_owner(owner_path)}; lock {lock_path}); stop that monitor first"
            ) from None
        with held:
            # The holder's PID lives in a sibling file that only the holder writes (readable
            # while the lock is held, and written atomically).
            write_text_atomic(
                owner_path,
                json.dumps({"pid": os.getpid(), "host": socket.gethostname()}) + "\n",
                overwrite=True,
                mode=0o600,
            )
            try:
                yield
            finally:
                owner_path.unlink(missing_ok=True)

    def load_readable(
        self, ids: Sequence[str], on_corrupt: Callable[[SessionCorruptError], None]
    ) -> list[Session]:
        """The sessions of `ids` that can be read; each unreadable one goes to `on_corrupt`.

        One corrupt file in a shared state directory must not hide every healthy session.
        """
        sessions = []
        for sid in ids:
            try:
                sessions.append(self.load(sid))
            except SessionCorruptError as exc:
                on_corrupt(exc)
        return sessions

    def remove(self, session_id: str) -> None:
        """Delete the session file and its lock file."""
        path = self.path(session_id)
        if not path.exists():
            raise SessionNotFoundError(f"no session {session_id!r} in {self.state_dir}")
        path.unlink()
        path.with_suffix(".lock").unlink(missing_ok=True)


def _owner(owner_path: Path) -> str:
    """ "PID <n> on <host>" of a lock holder, as far as its owner file tells."""
    try:
        data = json.loads(owner_path.read_text(encoding="utf-8"))
        return f"PID {int(data['pid'])} on {data.get('host', '?')}"
    except (OSError, ValueError, KeyError, TypeError):
        return "PID unknown"
