"""A planned 2-process job forms ONE torch.distributed world on the local SLURM (gloo, CPU).

Each rank writes its rank, world size and the result of an all-reduce of ones: the sum is the
number of processes that really joined the same world, which independent processes (one world
per task) could not fake. Both launch modes that form a world are run: ``srun`` (one SLURM task
per process, RANK/WORLD_SIZE from SLURM) and ``torchrun`` (one task per node, torchrun starts the
processes and joins them through a c10d rendezvous on the first node).
"""

from __future__ import annotations

import json
import socket
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

PROGRAM = """\
import json, os, sys
import torch
import torch.distributed as dist

dist.init_process_group("gloo")  # env://: MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE
ones = torch.ones(1)
dist.all_reduce(ones)
rank, world = dist.get_rank(), dist.get_world_size()
record = {"rank": rank, "world_size": world, "all_reduce": ones.item(),
          "local_rank": os.environ.get("LOCAL_RANK")}
with open(os.path.join(sys.argv[1], f"rank{rank}.json"), "w") as out:
    json.dump(record, out)
dist.destroy_process_group()
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _run_planned_job(cluster: Any, tmp_path: Path, mode: str) -> list[dict[str, Any]]:
    from oellm_autoexp.config.loader import load_config
    from oellm_autoexp.planning import build_plan, write_plan

    program = tmp_path / "world.py"
    program.write_text(PROGRAM, encoding="utf-8")
    python = sys.executable
    command = (
        [python, str(program), "{output_dir}"]
        if mode == "srun"
        else [str(Path(python).with_name("torchrun")), str(program), "{output_dir}"]
    )
    config = {
        "project": {"name": f"world_{mode}", "base_output_dir": str(tmp_path / "out")},
        "backend": {"class_name": "CommandBackend", "argv": command},
        "slurm": {
            "sbatch": {
                "nodes": 1,
                "ntasks_per_node": 2 if mode == "srun" else 1,
                "cpus_per_task": 1 if mode == "srun" else 2,
                "time": "00:05:00",
            },
            "distributed": {"mode": mode, "procs_per_node": 2, "master_port": _free_port()},
            "test_only": "never",
        },
    }
    path = tmp_path / "world.yaml"
    path.write_text(json.dumps(config), encoding="utf-8")
    result = build_plan(load_config(str(path), []).root)
    write_plan(result, test_only="never")
    (script,) = result.plan.scripts
    (job,) = result.plan.jobs
    job_id = cluster.run("sbatch", "--parsable", str(script.path)).strip()
    deadline = time.monotonic() + 120
    while cluster.run("squeue", "-h", "-j", job_id, check=False).strip():
        assert time.monotonic() < deadline, f"job {job_id} did not finish: {cluster.log_tail()}"
        time.sleep(0.5)
    log = Path(job.resolved_log_path(job_id))
    ranks = sorted(job.output_dir.glob("rank*.json"))
    assert len(ranks) == 2, log.read_text() if log.exists() else "no log"
    return [json.loads(p.read_text()) for p in ranks]


@pytest.mark.parametrize("mode", ["srun", "torchrun"])
def test_two_processes_form_one_world(slurm_cluster: Any, tmp_path: Path, mode: str) -> None:
    records = _run_planned_job(slurm_cluster, tmp_path, mode)
    assert [r["rank"] for r in records] == [0, 1]
    assert {r["world_size"] for r in records} == {2}
    assert {r["all_reduce"] for r in records} == {2.0}  # both joined the same world
    assert sorted(r["local_rank"] for r in records) == ["0", "1"]
