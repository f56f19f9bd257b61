"""triton_invariance: numerical-invariance fingerprints of compiled Triton kernels."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("triton-invariance")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
