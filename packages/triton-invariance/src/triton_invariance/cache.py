"""`InvarianceCache`: fingerprints of the variants compiled since the last winner selection.

Phase 3 of the spec. The compile hook puts one entry per compiled variant (kernel name,
signature hash, config hash); the winner hook reads the winner's entry and then clears the
kernel's entries. Triton may compile from several threads (async compile mode, user threads),
so every operation holds one lock.
"""

from __future__ import annotations

import threading

from triton_invariance.data import InvarianceData

_Key = tuple[str, str, str]


class InvarianceCache:
    """Thread-safe map (kernel_name, sig_hash, cfg_hash) -> `InvarianceData`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[_Key, InvarianceData] = {}

    def put(self, kernel_name: str, sig_hash: str, cfg_hash: str, inv: InvarianceData) -> None:
        """Store (or replace) the fingerprint of one compiled variant."""
        with self._lock:
            self._entries[(kernel_name, sig_hash, cfg_hash)] = inv

    def get(self, kernel_name: str, sig_hash: str, cfg_hash: str) -> InvarianceData | None:
        """The fingerprint of one variant, or None when it was never put (or was cleared)."""
        with self._lock:
            return self._entries.get((kernel_name, sig_hash, cfg_hash))

    def configs(self, kernel_name: str, sig_hash: str) -> dict[str, InvarianceData]:
        """Config hash -> fingerprint of every cached variant of one kernel signature."""
        with self._lock:
            return {
                cfg: inv
                for (name, sig, cfg), inv in self._entries.items()
                if name == kernel_name and sig == sig_hash
            }

    def clear_kernel(self, kernel_name: str, sig_hash: str) -> int:
        """Drop every variant of one kernel signature; returns how many were dropped."""
        with self._lock:
            doomed = [k for k in self._entries if k[0] == kernel_name and k[1] == sig_hash]
            for key in doomed:
                del self._entries[key]
            return len(doomed)

    def clear(self) -> None:
        """Drop everything."""
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)


_invariance_cache = InvarianceCache()
"""The process-wide cache the hooks fill (the spec's global instance)."""
