"""Backend adapters. `BackendInterface` is the contract; implementations register with compoconf.

Importing this package registers the built-in, dependency-free backends only. Heavy backends
(Megatron) live in their own modules and are imported by `load_backends()` lazily: their
modules import megatron/torch only inside the methods that need them.
"""

from __future__ import annotations

from oellm_autoexp.backends.base import BackendConfig, BackendInterface, JobContext, LaunchCommand

__all__ = ["BackendConfig", "BackendInterface", "JobContext", "LaunchCommand"]
