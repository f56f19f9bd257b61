"""Start a trial's command in its own session and make sure nothing of it outlives the trial.

A trial is its process group, and more: launchers such as torchrun start each worker in a new
session of its own (`start_new_session=True`), so a worker is in neither the trial's group nor
its session, and killing torchrun with SIGKILL would orphan it. The trial's processes are
therefore tracked as a tree:

* aorta makes itself a *child subreaper* (Linux `PR_SET_CHILD_SUBREAPER`): a process of the
  trial whose parent dies is re-parented to aorta instead of init, so it stays in the tree;
* `TrialProcesses.members()` = every live process of the trial's group or session, every
  descendant of the trial's main process, and every orphan re-parented to aorta that started
  after the trial did (aorta runs one trial at a time).

Stopping a trial: SIGTERM to every member (launchers also forward it to their workers and
clean up), up to `grace` seconds, then SIGKILL to every member left; the re-parented zombies
are reaped. Linux only (/proc); elsewhere only the process group is known.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from aorta.runner.lifetime import die_with_parent

_PR_SET_CHILD_SUBREAPER = 36
_POLL_S = 0.02
# After SIGKILL the kernel tears the processes down quickly; this bounds the wait for it.
_KILL_WAIT_S = 5.0


@dataclass(frozen=True)
class ProcInfo:
    """The fields of /proc/<pid>/stat this module needs."""

    pid: int
    state: str
    ppid: int
    pgrp: int
    session: int
    start_ticks: int
    # utime + stime + cutime + cstime: CPU of the process (all its threads) and of the children
    # it has reaped, in clock ticks (`aorta.runner.command.cpu_clock` sums them over the tree).
    cpu_ticks: int = 0


def read_proc(pid: int, proc_root: str = "/proc") -> ProcInfo | None:
    """One process's stat fields, or None when it is gone."""
    try:
        with open(f"{proc_root}/{pid}/stat", "rb") as handle:  # noqa: PTH123 - hot path
            raw = handle.read().decode("ascii", errors="replace")
    except OSError:
        return None
    # The command name (field 2) may contain spaces and parentheses: split after the last ')'.
    fields = raw[raw.rfind(")") + 2 :].split()
    cpu = sum(int(value) for value in fields[11:15])
    return ProcInfo(
        pid, fields[0], int(fields[1]), int(fields[2]), int(fields[3]), int(fields[19]), cpu
    )


def all_processes(proc_root: str = "/proc", *, zombies: bool = False) -> list[ProcInfo]:
    """Every process on the machine (zombies only when asked for)."""
    infos = []
    for entry in os.listdir(proc_root):  # noqa: PTH208 - a few hundred entries per stop
        if entry.isdigit():
            info = read_proc(int(entry), proc_root)
            if info is not None and (zombies or info.state not in ("Z", "X")):
                infos.append(info)
    return infos


def become_subreaper() -> bool:
    """Make orphaned descendants of this process its children (Linux); False where unsupported."""
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    return bool(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)


def start_trial_process(
    argv: Sequence[str], env: Mapping[str, str], cwd: str | None
) -> subprocess.Popen[bytes]:
    """Start `argv` (no shell) in a new session, stdout+stderr on one pipe, no stdin."""
    return subprocess.Popen(
        list(argv),
        env=dict(env),
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        bufsize=0,
        # A SIGKILLed aorta takes the command's main process with it (its own descendants are
        # reached only while aorta lives: see `TrialProcesses`). The hook only calls prctl,
        # getppid and kill; trials are started from one thread.
        preexec_fn=die_with_parent(),  # noqa: PLW1509
    )


class TrialProcesses:
    """The processes of one running trial (see the module docstring)."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.pid = proc.pid
        self._me = os.getpid()
        main = read_proc(self.pid)
        # Processes started after this tick belong to the trial when they end up under aorta.
        self._since = main.start_ticks if main is not None else 0
        self._linux = main is not None

    def members(
        self, procs: list[ProcInfo] | None = None, *, zombies: bool = False
    ) -> list[ProcInfo]:
        """Every live process of the trial, the main process included while it lives.

        `procs`: a snapshot of `all_processes(zombies=True)` to use instead of a fresh one.
        `zombies`: also the trial's exited processes not reaped yet (a zombie has no children:
        they were re-parented when it exited).
        """
        if not self._linux:
            return self._group_only()
        procs = [
            p
            for p in (procs or all_processes(zombies=zombies))
            if p.state != "X" and (zombies or p.state != "Z")
        ]
        children: dict[int, list[ProcInfo]] = {}
        for info in procs:
            children.setdefault(info.ppid, []).append(info)
        found: dict[int, ProcInfo] = {}
        roots = [info for info in procs if self.pid in (info.pgrp, info.session)]
        roots += [
            info
            for info in children.get(self._me, [])
            if info.pid == self.pid or info.start_ticks >= self._since
        ]
        stack = list(roots)
        while stack:
            info = stack.pop()
            if info.pid in found or info.pid == self._me:
                continue
            found[info.pid] = info
            stack.extend(children.get(info.pid, []))
        return list(found.values())

    def _group_only(self) -> list[ProcInfo]:
        try:
            os.killpg(self.pid, 0)
        except (ProcessLookupError, PermissionError):
            return []
        return [ProcInfo(self.pid, "R", self._me, self.pid, self.pid, 0)]

    def _signal_all(self, sig: signal.Signals) -> None:
        for info in self.members():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(info.pid, sig)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, sig)

    def _reap_and_list(self) -> list[ProcInfo]:
        """Reap the trial's zombies; return its live members (one /proc scan)."""
        self.proc.poll()
        if not self._linux:
            return self._group_only()
        procs = all_processes(zombies=True)
        for info in procs:
            # Orphans re-parented to aorta (the subreaper) are its children now: reap their
            # zombies. Only pids that are this process's children can be waited for.
            ours = info.ppid == self._me and info.start_ticks >= self._since
            if ours and info.state == "Z" and info.pid != self.pid:
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(info.pid, os.WNOHANG)
        return self.members(procs)

    def _wait_gone(self, deadline: float) -> bool:
        while True:
            if not self._reap_and_list():
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(_POLL_S)

    def stop(self, grace: float) -> str | None:
        """End every process of the trial; returns the strongest signal it needed, if any.

        SIGTERM goes to every process of the trial (a launcher also forwards it to its
        workers); whatever is left after `grace` seconds gets SIGKILL.
        """
        needed = self._stop(grace)
        self.proc.wait()  # gone or a zombie by now: this only collects its exit status
        return needed

    def _stop(self, grace: float) -> str | None:
        if not self._reap_and_list():
            return None
        self._signal_all(signal.SIGTERM)
        if self._wait_gone(time.monotonic() + grace):
            return "SIGTERM"
        self._signal_all(signal.SIGKILL)
        if not self._wait_gone(time.monotonic() + _KILL_WAIT_S):
            left = ", ".join(str(info.pid) for info in self.members())
            raise RuntimeError(f"processes of the trial survived SIGKILL: {left}")
        return "SIGKILL"
