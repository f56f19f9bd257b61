"""Instrumentation: what aorta records about the place a run or trial happens.

`collect_env` takes a fail-soft `EnvSnapshot` (host, interpreter, torch, GPUs, packages,
redacted environment variables). Importing this package does not import torch.
"""

from __future__ import annotations

from aorta.instrumentation.environment import collect_env
from aorta.instrumentation.models import EnvSnapshot

__all__ = ["EnvSnapshot", "collect_env"]
