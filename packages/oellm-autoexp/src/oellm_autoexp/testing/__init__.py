"""Test support shipped with oellm-autoexp: a real single-node SLURM for integration tests.

`slurm_cluster` starts and stops one (munge, slurmctld, slurmd, optionally MariaDB + slurmdbd);
`pytest_plugin` offers it as session fixtures to any test suite in an environment where
oellm-autoexp is installed (registered under the `pytest11` entry point).
"""
