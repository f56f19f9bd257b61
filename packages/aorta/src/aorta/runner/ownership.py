"""Who is running a trial right now: an owner record next to each trial in flight.

A trial's result file appears only when the trial is over, so a missing `trial_<id>.json`
does not say whether the trial never ran, died, or is still running in a process that
outlived its driver (a `SIGKILL`ed `aorta triage run` whose trial could not be taken along: no
`PR_SET_PDEATHSIG` outside Linux, a launcher's worker in a session of its own). While a trial
runs, `trial_<id>.owner` (JSON, written atomically) names its processes: the driver and, once
started, the trial's own process, each with the start time the kernel gives it
(`/proc/<pid>/stat`, so a PID reused by an unrelated process is not taken for the trial), the
host and the boot it runs on, and a random token that every process of the trial inherits in
its environment (`AORTA_TRIAL_OWNER`): a worker that left the trial's process group, session
and process tree still carries it. The record is removed when the trial is over; a driver
killed mid-trial leaves it behind for `trial_liveness` to judge.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import socket
import stat
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, TypeGuard

from aorta.atomic import write_json_atomic
from aorta.runner.command.process import read_proc

OWNER_SUFFIX = ".owner"
OWNER_ENV = "AORTA_TRIAL_OWNER"
# An owner record is a few hundred bytes; anything larger was not written by aorta.
_MAX_RECORD_BYTES = 64 * 1024
_BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


def owner_path(output_dir: Path, trial_id: int) -> Path:
    """Where trial `trial_id`'s owner record lives (`trial_<id>.owner`, beside its JSON)."""
    return output_dir / f"trial_{trial_id}{OWNER_SUFFIX}"


def _boot_id() -> str | None:
    try:
        return _BOOT_ID.read_text(encoding="ascii").strip() or None
    except OSError:  # not Linux
        return None


@dataclass(frozen=True)
class OwnerProcess:
    """One process of a trial: its role, PID and kernel start time (None without /proc)."""

    role: str  # "driver" (the aorta process) or "trial" (the process it started)
    pid: int
    start_ticks: int | None


def this_process(role: str, pid: int | None = None) -> OwnerProcess:
    """`OwnerProcess` for `pid` (default: this process) as the kernel sees it now."""
    pid = os.getpid() if pid is None else pid
    info = read_proc(pid)
    return OwnerProcess(role, pid, info.start_ticks if info is not None else None)


@dataclass(frozen=True)
class TrialOwner:
    """The content of an owner record."""

    trial_id: int
    host: str
    boot_id: str | None
    token: str  # in the environment of every process of the trial (OWNER_ENV)
    processes: tuple[OwnerProcess, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Any) -> TrialOwner:
        """Parse a record read back from disk; `ValueError` naming what is wrong."""
        if not isinstance(data, dict):
            raise ValueError("expected a JSON object")
        trial_id, host, boot = data.get("trial_id"), data.get("host"), data.get("boot_id")
        token = data.get("token")
        if not _is_int(trial_id) or not isinstance(host, str) or not host:
            raise ValueError("trial_id/host: expected an integer and a host name")
        if not isinstance(token, str) or not re.fullmatch(r"[0-9a-f]{32}", token):
            raise ValueError("token: expected 32 hex digits")
        if boot is not None and not isinstance(boot, str):
            raise ValueError("boot_id: expected a string or null")
        raw = data.get("processes")
        if not isinstance(raw, list) or not raw:
            raise ValueError("processes: expected a non-empty list")
        processes = []
        for item in raw:
            if not isinstance(item, dict):
                raise ValueError("processes: expected objects")
            role, pid, ticks = item.get("role"), item.get("pid"), item.get("start_ticks")
            if not isinstance(role, str) or not _is_int(pid) or pid <= 0:
                raise ValueError("processes: expected a role and a positive pid")
            if ticks is not None and not _is_int(ticks):
                raise ValueError("processes: start_ticks: expected an integer or null")
            processes.append(OwnerProcess(role, pid, ticks))
        return cls(trial_id, host, boot, token, tuple(processes))


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


class TrialOwnership:
    """The owner record of one trial this process is running (see `owning_trial`)."""

    def __init__(self, path: Path, trial_id: int) -> None:
        self.path = path
        self.owner = TrialOwner(
            trial_id,
            socket.gethostname(),
            _boot_id(),
            secrets.token_hex(16),
            (this_process("driver"),),
        )
        write_json_atomic(path, self.owner.to_dict(), overwrite=True)

    def marked(self, environ: Mapping[str, str]) -> dict[str, str]:
        """`environ` for the trial's process, carrying this trial's token."""
        return {**environ, OWNER_ENV: self.owner.token}

    def started(self, pid: int) -> None:
        """Record the trial's own process (call right after starting it)."""
        processes = (*self.owner.processes, this_process("trial", pid))
        self.owner = replace(self.owner, processes=processes)
        write_json_atomic(self.path, self.owner.to_dict(), overwrite=True)

    def release(self) -> None:
        """Remove the record, unless the trial's own process still runs (not waited for)."""
        trial = tuple(p for p in self.owner.processes if p.role == "trial")
        if any(_running(p) for p in trial):
            return  # a resume must see it: the trial is not over
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


@contextlib.contextmanager
def owning_trial(output_dir: Path, trial_id: int) -> Iterator[TrialOwnership]:
    """Hold trial `trial_id`'s owner record while the block runs the trial."""
    ownership = TrialOwnership(owner_path(output_dir, trial_id), trial_id)
    try:
        yield ownership
    finally:
        ownership.release()


def _carriers(token: str, proc_root: str = "/proc") -> list[int]:
    """PIDs of this user's live processes whose environment carries the trial's token."""
    needle = f"{OWNER_ENV}={token}".encode()
    found = []
    for entry in os.listdir(proc_root):  # noqa: PTH208 - a few hundred entries, on resume only
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:  # another user's process is unreadable (and not ours to judge): skipped
            with open(f"{proc_root}/{entry}/environ", "rb") as handle:  # noqa: PTH123
                environ = handle.read()
        except OSError:
            continue
        if needle + b"\0" in environ or environ.endswith(needle):
            found.append(int(entry))
    return sorted(found)


def _running(proc: OwnerProcess) -> bool:
    """Whether the recorded process still runs on this host (the same process, not its PID)."""
    if proc.start_ticks is None:  # recorded without /proc: the PID is all there is
        try:
            os.kill(proc.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    info = read_proc(proc.pid)
    alive = info is not None and info.state not in ("Z", "X")
    return alive and info is not None and info.start_ticks == proc.start_ticks


Liveness = Literal["running", "dead", "elsewhere"]


@dataclass(frozen=True)
class TrialLiveness:
    """What an owner record says about its trial now."""

    state: Liveness
    owner: TrialOwner
    pid: int | None = None  # the live process, when `running`


def trial_liveness(owner: TrialOwner) -> TrialLiveness:
    """Judge a record left on disk: `running` (a process of it lives on this host, `pid`),
    `dead`, or `elsewhere` (another host: this one cannot tell)."""
    if owner.host != socket.gethostname():
        return TrialLiveness("elsewhere", owner)
    here = _boot_id()
    if owner.boot_id is not None and here is not None and owner.boot_id != here:
        return TrialLiveness("dead", owner)  # the machine rebooted since: nothing survived
    # The trial's own process first: that is the one to name (a live driver holds the run lock).
    live = next((p.pid for p in owner.processes if p.role == "trial" and _running(p)), None)
    if live is None:  # its main process is gone; a worker it started may not be
        live = next(iter(_carriers(owner.token)), None)
    if live is None:
        live = next((p.pid for p in owner.processes if _running(p)), None)
    return TrialLiveness("dead", owner) if live is None else TrialLiveness("running", owner, live)


def read_owner(path: Path) -> TrialOwner:
    """An owner record from disk; `ValueError` when it is not one aorta wrote.

    The file is opened without following links and read up to a bound (a run directory may
    come from someone else); only a regular file is accepted.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        raise ValueError(f"cannot open it: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as handle:
        if not _is_regular(handle.fileno()):
            raise ValueError("not a regular file")
        raw = handle.read(_MAX_RECORD_BYTES + 1)
    if len(raw) > _MAX_RECORD_BYTES:
        raise ValueError(f"larger than {_MAX_RECORD_BYTES} bytes")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise ValueError(f"not JSON ({type(exc).__name__})") from None
    return TrialOwner.from_dict(data)


def _is_regular(fd: int) -> bool:
    return stat.S_ISREG(os.fstat(fd).st_mode)
