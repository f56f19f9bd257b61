"""`oellm-autoexp migrate`: translate an upstream OpenEuroLLM/oellm-autoexp experiment config.

`translate.migrate_file` composes the upstream config (its Hydra tree), expands its sweep with
upstream's semantics (`upstream_sweep`), resolves every job as upstream would and writes one
config of ours that plans the same jobs with the same arguments, plus one line per thing it
could not translate.
"""

from oellm_autoexp.migrate.translate import Migration, migrate_file

__all__ = ["Migration", "migrate_file"]
