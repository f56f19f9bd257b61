"""Which session state a monitor may act on: trust by ownership, execution settings not from state.

A session file decides what the monitor runs: the scripts it submits, the submit command, the
actions of its config. In a shared output root anyone who can write `monitoring_state/` could
plant one. So, as OpenSSH's StrictModes does for `~/.ssh`:

- before a session file is read, it and its directory must be owned by the invoking user (or
  root) and writable by no one else (`refuse_foreign_state`; `--allow-shared-writable`
  accepts the risk);
- the settings that say *how* to execute come from the caller's current config, never from the
  file: with a pinned `submit_cmd` the session's recorded one is replaced (and the difference
  logged), and with a `scripts_root` every script a job would submit must lie inside it
  (`pin_execution`). The CLI always pins: CONFIG's `slurm.submit_cmd`, or without a CONFIG
  (`monitor --monitor-session ID`) this machine's default, `sbatch`.

aorta's `strict_modes` applies the same rule to its run directories; the judgement itself is
`toolkit_core.ownership` (the packages do not import each other, see docs/architecture.md).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from oellm_autoexp.errors import AutoexpUsageError
from oellm_autoexp.persistence.session import Session
from toolkit_core.ownership import ALLOW_SHARED_WRITABLE_FLAG, untrusted_path_refusal

__all__ = ["ALLOW_FLAG", "SessionUntrustedError", "pin_execution", "refuse_foreign_state"]

log = logging.getLogger("oellm_autoexp.monitor")

ALLOW_FLAG = ALLOW_SHARED_WRITABLE_FLAG


class SessionUntrustedError(AutoexpUsageError):
    """A session someone else could have written, or one naming what its config does not."""


def refuse_foreign_state(path: Path, *, what: str) -> None:
    """`SessionUntrustedError` unless `path` (not followed if a link) is this user's or root's
    and writable by no one else; a missing path passes (nothing to trust)."""
    refusal = untrusted_path_refusal(
        path, what=what, risk="someone else could change what the monitor runs"
    )
    if refusal is not None:
        raise SessionUntrustedError(refusal)


def _slurm_section(session: Session) -> dict[str, object]:
    slurm = session.config.get("slurm")
    if not isinstance(slurm, dict):
        slurm = {}
        session.config["slurm"] = slurm
    return slurm


def pin_execution(
    session: Session, path: Path, *, submit_cmd: str | None, scripts_root: Path | None
) -> None:
    """Make `session` (read from `path`) execute only what the caller's config says.

    `submit_cmd`: replaces the session's `slurm.submit_cmd`. `scripts_root`: a job script
    outside it is refused (`SessionUntrustedError`): the plan renders scripts below its root.
    """
    if submit_cmd is not None:
        slurm = _slurm_section(session)
        recorded = slurm.get("submit_cmd")
        if recorded not in (None, submit_cmd):
            log.warning(
                "%s: slurm.submit_cmd %r replaced by %r (commands never come from state: "
                "give monitor the experiment CONFIG to submit with its slurm.submit_cmd)",
                path,
                recorded,
                submit_cmd,
            )
        slurm["submit_cmd"] = submit_cmd
    if scripts_root is not None:
        root = os.path.realpath(scripts_root)
        for job in session.jobs.values():
            if not job.script:
                continue
            where = os.path.realpath(job.script)
            if os.path.commonpath([root, where]) != root:
                raise SessionUntrustedError(
                    f"{path}: job {job.name}: script {job.script!r} lies outside {scripts_root}; "
                    "a session only submits scripts its plan rendered there"
                )
