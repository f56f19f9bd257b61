"""CPU time of a command trial's process tree, for `clock: cpu` (Linux /proc).

A wall clock (the log's printed times, the arrival of lines) also measures what the rest of
the machine does: on a shared node a neighbour's job makes every step of a cell "slower".
The CPU clock counts only the CPU seconds the trial's own processes consumed, so it moves with
the work the trial did, not with the host's load (it does not see GPU time, I/O waits or time
spent waiting for a CPU: use it for CPU-bound work, or beside a wall clock).

What is counted, at each reading (`TreeCpu.seconds`):

* every process of the trial (`TrialProcesses.members`: its group, its session, every
  descendant, every orphan re-parented to aorta), exited-but-unreaped ones included: its
  `utime + stime` (all its threads, exited threads included) plus `cutime + cstime` (the
  children it has reaped, and theirs), from `/proc/<pid>/stat`;
* plus what aorta itself reaped since the trial started (`RUSAGE_CHILDREN` of this process,
  minus its value at the start): the main process once it exits, and orphans aorta reaps as
  their subreaper, each with the children they had reaped.

So a process that exits between two readings is not lost: whoever reaps it inherits its time
(a member's `cutime`, or aorta's children usage). Not counted: processes that escaped the tree
before aorta saw them (a daemon), and children of a parent that ignores SIGCHLD (the kernel
discards them without adding their time to anyone). A process reaped in the middle of a
reading can be counted in the next step instead of this one (the total stays right). Kernel
accounting is in clock ticks (usually 10 ms) per process: a single step shorter than a few
ticks reads coarsely, means over many steps do not. aorta runs one trial at a time, so its
children usage grows only by the trial's processes.

Finding the members costs a scan of /proc; it is repeated at most every `rescan_s` seconds,
and in between only the members found last are read (a process started since is counted, with
all its CPU time so far, at the next scan).
"""

from __future__ import annotations

import os
import resource
import time
from pathlib import Path
from typing import Final

from aorta.runner.command.process import TrialProcesses, all_processes, read_proc

_TICKS_PER_S: Final = os.sysconf("SC_CLK_TCK")
DEFAULT_RESCAN_S: Final = 0.25


def cpu_clock_available() -> bool:
    """Whether this system shows per-process CPU time in /proc (the CPU clock needs it)."""
    return Path("/proc/self/stat").is_file()


def _children_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


class TreeCpu:
    """CPU seconds consumed by a trial's process tree since `attach` (see the module docstring).

    Before `attach` (the process is not started yet) it reads 0.
    """

    def __init__(self, rescan_s: float = DEFAULT_RESCAN_S) -> None:
        self.rescan_s = rescan_s
        self._procs: TrialProcesses | None = None
        self._reaped_at_start = 0.0
        self._members: list[int] = []
        self._scanned_at = -float("inf")
        self._last = 0.0

    def attach(self, procs: TrialProcesses) -> None:
        """Start counting the processes of `procs` (right after its main process started)."""
        self._procs = procs
        self._reaped_at_start = _children_seconds()

    def seconds(self) -> float:
        """CPU seconds of the tree so far; never less than the previous reading."""
        if self._procs is None:
            return 0.0
        now = time.monotonic()
        if now - self._scanned_at >= self.rescan_s:
            members = self._procs.members(all_processes(zombies=True), zombies=True)
            self._members = [info.pid for info in members]
            self._scanned_at = now
            ticks = sum(info.cpu_ticks for info in members)
        else:
            infos = (read_proc(pid) for pid in self._members)
            ticks = sum(info.cpu_ticks for info in infos if info is not None)
        total = _children_seconds() - self._reaped_at_start + ticks / _TICKS_PER_S
        # A process reaped in the middle of a reading is briefly counted twice or not at all;
        # a clock never runs backwards, so the next step absorbs the difference.
        self._last = max(self._last, total)
        return self._last
