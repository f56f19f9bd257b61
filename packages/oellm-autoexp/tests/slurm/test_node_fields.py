"""Where a job ran, as squeue --json and sacct report it (the input of flaky-node decisions)."""

from __future__ import annotations

import json

from oellm_autoexp.slurm.real import parse_sacct, parse_squeue_json


def test_squeue_json_and_sacct_rows_carry_the_jobs_nodes() -> None:
    squeue = {
        "jobs": [
            {"job_id": 7, "job_state": ["NODE_FAIL"], "nodes": "gpu[01-02]"},
            {"job_id": 8, "job_state": ["PENDING"], "nodes": ""},
        ]
    }
    jobs = parse_squeue_json(json.dumps(squeue))
    assert (jobs["7"].nodes, jobs["8"].nodes) == ("gpu[01-02]", "")
    rows = parse_sacct(
        "7|NODE_FAIL|1:0|00:10:00|tok|gpu[01-02]\n8|PENDING|0:0|00:10:00||None assigned\n"
    )
    assert (rows["7"].nodes, rows["7"].comment, rows["8"].nodes) == (
        "gpu[01-02]",
        "tok",
        "None assigned",
    )
