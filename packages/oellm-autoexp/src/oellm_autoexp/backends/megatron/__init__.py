"""Megatron-LM backend (`[megatron]` extra): argument schema, validation, serialisation, adapter.

Importing this package registers `MegatronBackend` with compoconf and imports neither megatron
nor torch; Megatron-LM's parser is loaded only when a plan with this backend is validated.
"""

from __future__ import annotations

from oellm_autoexp.backends.megatron.argspec import ArgSchema, ArgSpec, schema_from_parser
from oellm_autoexp.backends.megatron.backend import MegatronBackend, MegatronBackendConfig
from oellm_autoexp.backends.megatron.cmdline import serialise
from oellm_autoexp.backends.megatron.validate import normalise_args

__all__ = [
    "ArgSchema",
    "ArgSpec",
    "MegatronBackend",
    "MegatronBackendConfig",
    "normalise_args",
    "schema_from_parser",
    "serialise",
]
