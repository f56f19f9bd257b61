"""A real single-node SLURM for the SLURM executor's tests, started as oellm-autoexp's tests do.

The fixture is oellm-autoexp's `slurm_cluster` (the `pytest11` plugin
`oellm_autoexp.testing.pytest_plugin`: start, skip with one line where SLURM is missing, fail
under ``CI=true``). One cluster per session, shared with oellm-autoexp's real-SLURM tests.
"""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def aorta_slurm_cluster(slurm_cluster: object) -> object:
    """A running local SLURM; `.env` carries SLURM_CONF and PATH for its commands."""
    return slurm_cluster
