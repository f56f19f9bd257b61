"""triton_invariance: numerical-invariance fingerprints of compiled Triton kernels.

Modules: `fingerprint` (TTGIR -> `data.InvarianceData`), `cache`, `storage` (baseline files),
`compare` (a fingerprint against its baseline), `api` (hashes, `cache_invariance`,
`on_winner_selected`), `hooks` (stock-Triton integration), `startup` (activation by environment
variables), `compile_only` (compile without a GPU), `cli`.

This package is imported at interpreter start-up when TRITON_INVARIANCE_COMMIT/COMPARE is set,
so it imports nothing here (not even `typing`); even the version is looked up only when asked
for (reading the installed distributions' metadata costs tens of milliseconds).
"""

from __future__ import annotations

__all__ = ["__version__"]


def __getattr__(name: str) -> str:
    if name == "__version__":
        from toolkit_core.cli import distribution_version

        return distribution_version("triton-invariance")
    raise AttributeError(f"module 'triton_invariance' has no attribute {name!r}")
