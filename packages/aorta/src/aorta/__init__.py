"""aorta: triage numerical failures in GPU training.

Importing this package is cheap on purpose: it pulls in neither torch nor triton. Heavy
libraries are imported only inside the code paths that run a workload, and even the version
is looked up only when asked for (`toolkit_core.cli.distribution_version`).
"""

from __future__ import annotations

__all__ = ["__version__"]


def __getattr__(name: str) -> str:
    if name == "__version__":
        from toolkit_core.cli import distribution_version

        return distribution_version("aorta")
    raise AttributeError(f"module 'aorta' has no attribute {name!r}")
