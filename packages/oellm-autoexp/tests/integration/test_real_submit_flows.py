"""`submit --array-subset` and `--chain` on the local SLURM: what slurmctld records and runs."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from oellm_autoexp import api
from oellm_autoexp.slurm.commands import RetryPolicy
from oellm_autoexp.slurm.real import RealSlurmClient

pytestmark = pytest.mark.slurm


def test_a_chained_array_subset_waits_with_afterany_and_both_links_complete(
    slurm_cluster: Any, tmp_path: Path
) -> None:
    result = api.plan(
        "autoexp",
        ["sweep=lr_grid", "slurm=local", f"project.base_output_dir={tmp_path}"],
        test_only="never",
    )
    assert len(result.plan.jobs) == 6
    client = RealSlurmClient(env=slurm_cluster.env, retry=RetryPolicy(attempts=3, timeout_s=20))
    submitted = api.submit(result, client, array_subset="1,4-5", chain=2)
    first, second = submitted.session, submitted.chained[0]
    first_id = next(iter(first.jobs.values())).job_id
    second_id = next(iter(second.jobs.values())).job_id
    assert first_id and second_id
    first_base, second_base = first_id.split("_")[0], second_id.split("_")[0]

    # slurmctld holds the second link back until the first one ended, whatever its outcome.
    held = slurm_cluster.run("scontrol", "show", "job", "-o", second_base)
    assert f"Dependency=afterany:{first_base}" in held
    assert "ArrayTaskId=1,4-5" in held
    for session in (first, second):
        assert sorted(j.array_index for j in session.jobs.values()) == [1, 4, 5]

    deadline = time.monotonic() + 120
    while any(s.active for s in (submitted.store.load(x.session_id) for x in (first, second))):
        assert time.monotonic() < deadline, "the chain did not finish"
        api.monitor_once(submitted.store, client)
        time.sleep(0.5)
    done = [submitted.store.load(s.session_id) for s in (first, second)]
    assert [{j.state for j in s.jobs.values()} for s in done] == [{"completed"}] * 2
    # The second link ran its own attempts of the same three jobs.
    assert {a.job_id.split("_")[0] for j in done[1].jobs.values() for a in j.attempts} == {
        second_base
    }
