"""The project's excluded-node list: merged under a lock, written atomically, never guessed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from oellm_autoexp.monitor.node_exclusions import (
    ExclusionsCorruptError,
    add_project_exclusions,
    exclusions_path,
    load_project_exclusions,
    queued_job_ids,
)
from oellm_autoexp.persistence.session import JobRecord
from oellm_autoexp.persistence.states import MonitorState


def test_nodes_accumulate_in_order_without_duplicates(tmp_path: Path) -> None:
    assert load_project_exclusions(tmp_path) == []
    assert add_project_exclusions(tmp_path, ["n2", "n1", "n2"]) == ["n2", "n1"]
    assert add_project_exclusions(tmp_path, ["n1", "n3"]) == ["n2", "n1", "n3"]
    assert load_project_exclusions(tmp_path) == ["n2", "n1", "n3"]
    assert not list(tmp_path.glob(".excluded_nodes.json.*"))  # no temp file left behind


_ADD_MANY = """
import sys
from pathlib import Path
from oellm_autoexp.monitor.node_exclusions import add_project_exclusions
for i in range(15):
    add_project_exclusions(Path(sys.argv[1]), [f"{sys.argv[2]}{i}"])
"""


def test_two_monitors_adding_at_once_lose_no_node(tmp_path: Path) -> None:
    workers = [
        subprocess.Popen([sys.executable, "-c", _ADD_MANY, str(tmp_path), prefix])
        for prefix in ("a", "b")
    ]
    assert [worker.wait(timeout=120) for worker in workers] == [0, 0]
    nodes = load_project_exclusions(tmp_path)
    assert sorted(nodes) == sorted([f"a{i}" for i in range(15)] + [f"b{i}" for i in range(15)])


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("{not json", "not valid JSON"),
        ('{"nodes": ["n1"]}', "format: expected"),
        ('{"format": "oellm-autoexp/excluded-nodes/1", "nodes": "n1"}', "nodes: expected a list"),
    ],
)
def test_a_damaged_file_is_an_error_naming_it_not_an_empty_list(
    tmp_path: Path, text: str, expected: str
) -> None:
    exclusions_path(tmp_path).write_text(text)
    with pytest.raises(ExclusionsCorruptError) as err:
        load_project_exclusions(tmp_path)
    assert str(err.value).startswith(str(exclusions_path(tmp_path)))
    assert expected in str(err.value) and "\n" not in str(err.value)


def _job(key: str, state: MonitorState, slurm_state: str | None, job_id: str | None) -> JobRecord:
    job = JobRecord(key=key, name=key, script="s", slurm_name=key, log_path="l", output_dir="o")
    job.state, job.slurm_state, job.job_id = state, slurm_state, job_id
    return job


def test_only_jobs_waiting_in_the_queue_are_updated() -> None:
    jobs = [
        _job("a", MonitorState.PENDING, "PENDING", "1"),
        _job("b", MonitorState.PENDING, None, "2"),  # submitted, not seen by squeue yet
        _job("c", MonitorState.RUNNING, "RUNNING", "3"),
        _job("d", MonitorState.PENDING, None, None),  # not submitted
        _job("e", MonitorState.COMPLETED, "COMPLETED", "5"),
    ]
    assert queued_job_ids(jobs) == ["1", "2"]
