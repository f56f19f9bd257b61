"""The host's load while a trial ran (`HostLoad`, in the trial record under `host_load`).

A wall clock (a log's printed step times, the arrival of lines, `time.perf_counter`) measures
the machine as well as the work: a neighbour's job that starts halfway through a matrix makes
every later step slower. Each trial therefore records the range of the host's 1-minute load
average (`/proc/loadavg`) it saw, so that the matrix can say how loaded the host was and warn
when the load moved a lot (`aorta.triage.analysis.step_sources`).

Sampling is cheap (one small read): at the start and end of the trial, and in between at most
every `interval_s` seconds when the caller offers a sample (a command trial offers one per
chunk of output). Where /proc/loadavg cannot be read, nothing is recorded (`None`).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, TypeGuard

LOADAVG_PATH: Final = "/proc/loadavg"
DEFAULT_INTERVAL_S: Final = 10.0
_MAX_CPUS: Final = 1 << 20


@dataclass(frozen=True)
class HostLoad:
    """The 1-minute load average's range over one trial, and the host's CPU count."""

    min_1m: float
    max_1m: float
    samples: int
    cpus: int | None  # os.cpu_count(); None: not known

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "min_1m": self.min_1m,
            "max_1m": self.max_1m,
            "samples": self.samples,
            "cpus": self.cpus,
        }

    @classmethod
    def from_dict(cls, data: object) -> HostLoad:
        """Rebuild a record read back from a run directory (untrusted: every field is checked).

        Raises `ValueError` naming the key (`host_load.<field>`) and what was expected.
        """
        if not isinstance(data, Mapping):
            raise ValueError(f"host_load: expected a mapping, got {type(data).__name__}")
        unknown = sorted(
            str(key) for key in data if key not in ("min_1m", "max_1m", "samples", "cpus")
        )
        if unknown:
            raise ValueError(f"host_load: unknown key(s) {', '.join(unknown)[:200]}")
        low = _load(data.get("min_1m"), "host_load.min_1m")
        high = _load(data.get("max_1m"), "host_load.max_1m")
        if high < low:
            raise ValueError(f"host_load.max_1m: expected >= min_1m ({low:g}), got {high:g}")
        samples = data.get("samples")
        if not _is_int(samples) or samples < 1:
            raise ValueError(f"host_load.samples: expected an integer >= 1, got {samples!r:.40}")
        cpus = data.get("cpus")
        if cpus is not None and (not _is_int(cpus) or not 0 < cpus <= _MAX_CPUS):
            raise ValueError(f"host_load.cpus: expected a CPU count or null, got {cpus!r:.40}")
        return cls(low, high, samples, cpus)


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _load(value: object, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{key}: expected a load average >= 0, got {value!r:.40}")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{key}: expected a load average >= 0, got {value!r:.40}")
    return float(value)


def read_loadavg(path: str = LOADAVG_PATH) -> float | None:
    """The host's 1-minute load average, or None when it cannot be read."""
    try:
        with open(path, encoding="ascii") as handle:  # noqa: PTH123 - sampled per output chunk
            return float(handle.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


class LoadSampler:
    """Collects 1-minute load samples over one trial; `record()` is its `HostLoad`."""

    def __init__(self, interval_s: float = DEFAULT_INTERVAL_S, path: str = LOADAVG_PATH) -> None:
        self.interval_s = interval_s
        self.path = path
        self._low = math.inf
        self._high = -math.inf
        self._count = 0
        self._last_at = -math.inf

    def sample(self, now: float, *, force: bool = False) -> None:
        """Take a sample at monotonic time `now`, unless one was taken less than
        `interval_s` ago (`force`: take it anyway, e.g. at the start and end of a trial)."""
        if not force and now - self._last_at < self.interval_s:
            return
        self._last_at = now
        value = read_loadavg(self.path)
        if value is not None:
            self._low, self._high = min(self._low, value), max(self._high, value)
            self._count += 1

    def record(self) -> HostLoad | None:
        """The range of the samples taken; None when none could be read."""
        if not self._count:
            return None
        return HostLoad(self._low, self._high, self._count, os.cpu_count())
