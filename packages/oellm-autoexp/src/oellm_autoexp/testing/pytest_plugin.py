"""pytest fixtures of a real single-node SLURM (registered as the `pytest11` plugin
``oellm_autoexp_slurm``, so every test tree of the environment can use them by name).

`slurm_cluster` (session scope) is a real single-node SLURM started under a temp directory by
`oellm_autoexp.testing.slurm_cluster`; tests that use it carry ``@pytest.mark.slurm``. With
``CI=true`` a cluster that cannot start fails the test loudly; elsewhere the test is skipped with
one line saying why (usually: SLURM is not installed, or this is not root).

`slurm_accounting_cluster` is a second one with MariaDB + slurmdbd and a short ``MinJobAge``, for
the tests of what `sacct` answers after squeue forgot a job. It is separate because its start-up
costs ~6 s instead of <1 s (slurmdbd creating its tables), and because the short ``MinJobAge``
would purge finished jobs that other tests still read from squeue.
``AUTOEXP_TEST_SLURM_ACCOUNTING=1`` starts `slurm_cluster` with accounting too, to run every
real-SLURM test against a cluster with slurmdbd.

Loading this plugin costs nothing: the cluster module is imported, and a cluster started, only
when a test asks for one of the fixtures.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from oellm_autoexp.testing.slurm_cluster import SlurmCluster

# MinJobAge of the accounting cluster: finished jobs leave squeue within seconds (slurmctld
# purges them in its periodic background pass, so "gone" takes up to ~10 s more).
ACCOUNTING_MIN_JOB_AGE_S = 2


def pytest_configure(config: pytest.Config) -> None:
    """Declare the `slurm` marker, so suites with --strict-markers need not."""
    config.addinivalue_line(
        "markers",
        "slurm: needs a real SLURM (munge, slurmctld, slurmd); must run in CI, skipped elsewhere "
        "when absent",
    )


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def run_cluster(
    tmp_path_factory: pytest.TempPathFactory, *, accounting: bool, **options: Any
) -> Iterator[SlurmCluster]:
    """Start a local SLURM for a fixture (skip or, under CI, fail when it cannot start); stop it."""
    from oellm_autoexp.testing import slurm_cluster

    missing = slurm_cluster.missing_binaries(accounting=accounting)
    if missing and not _in_ci():
        pytest.skip(f"SLURM is not installed (missing: {', '.join(missing)})")
    if os.geteuid() != 0 and not _in_ci():
        pytest.skip("a local SLURM needs root")
    # A short path: munge and slurm put unix sockets under it (108-byte limit).
    root = tmp_path_factory.mktemp("slurmdbd" if accounting else "slurm", numbered=True)
    try:
        cluster = slurm_cluster.start_cluster(root, accounting=accounting, **options)
    except slurm_cluster.SlurmUnavailableError as exc:
        pytest.fail(f"could not start a local SLURM: {exc}", pytrace=False)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    """A running local SLURM; `.env` carries SLURM_CONF, `.bin_paths` the command paths."""
    accounting = os.environ.get("AUTOEXP_TEST_SLURM_ACCOUNTING", "") in {"1", "true", "yes"}
    yield from run_cluster(tmp_path_factory, accounting=accounting)


@pytest.fixture(scope="session")
def slurm_accounting_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    """A local SLURM with slurmdbd (MariaDB) and a short MinJobAge: `sacct` knows purged jobs."""
    yield from run_cluster(
        tmp_path_factory, accounting=True, min_job_age_s=ACCOUNTING_MIN_JOB_AGE_S
    )


@pytest.fixture(scope="session")
def slurm_spare_node_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    """A local SLURM whose partition also has a down node: a job excluding the real one waits."""
    yield from run_cluster(tmp_path_factory, accounting=False, spare_node=True)
