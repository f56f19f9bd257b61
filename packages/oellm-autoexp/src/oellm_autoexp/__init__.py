"""oellm_autoexp: one YAML config to SLURM job arrays, monitored and restarted by policy."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("oellm-autoexp")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
