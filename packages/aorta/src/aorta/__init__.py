"""aorta: triage numerical failures in GPU training.

Importing this package is cheap on purpose: it pulls in neither torch nor triton. Heavy
libraries are imported only inside the code paths that run a workload.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("aorta")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
