"""Monitoring sessions on disk: `<base_output_dir>/monitoring_state/<session_id>.json`."""

from oellm_autoexp.persistence.session import JobRecord, Session, new_session_id
from oellm_autoexp.persistence.store import (
    SessionCorruptError,
    SessionLockedError,
    SessionNotFoundError,
    SessionStore,
)

__all__ = [
    "JobRecord",
    "Session",
    "SessionCorruptError",
    "SessionLockedError",
    "SessionNotFoundError",
    "SessionStore",
    "new_session_id",
]
