"""The same triage matrix on the local executor and on the SLURM executor (a local cluster).

A 3-cell x 4-trial matrix of one-thread trials (a command workload: a Python process that
sleeps a fixed time per step and prints jsonl step lines, so every trial costs the same wall
time and almost no CPU) runs twice through the real `aorta triage run` CLI: `--executor local`
(one trial after the other) and `--executor slurm` on a throwaway single-node SLURM (started
as oellm-autoexp's tests start it; the node advertises more CPUs than the machine has, so
`--max-concurrent` tasks run at once). Printed:

- wall time of each run and their ratio (expect close to the number of parallel slots, less
  the SLURM start-up and polling latency per wave of tasks);
- the SLURM driver's own CPU time (user + sys of the `aorta` process and the SLURM commands
  it runs: sbatch, squeue), in total and per trial it polled to the end. The trial tasks run
  under slurmd and are not the driver's cost.

Needs root and slurm-wlm + munge (as the real-SLURM tests); reports and exits 0 either way.
Usage: python benchmarks/triage_slurm.py [--trials 4] [--step-s 0.5] [--steps 4] [--slots 4]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

import yaml

ROOT = Path(__file__).resolve().parents[1]
AORTA = str(Path(sys.executable).with_name("aorta"))
_STEP = (
    "import json,sys,time\n"
    "for i in range(1, int(sys.argv[1]) + 1):\n"
    "    time.sleep(float(sys.argv[2]))\n"
    "    print(json.dumps({'step': i, 'step_time_ms': 1000 * float(sys.argv[2]), 'loss': 1.0}))\n"
)


def _cluster_helper() -> ModuleType:
    from oellm_autoexp.testing import slurm_cluster

    return slurm_cluster


def _recipe(path: Path, args: argparse.Namespace) -> None:
    script = path.with_name("steps.py")  # a file: braces in `-c` text read as placeholders
    script.write_text(_STEP)
    cells = [
        {"name": name, "mitigations": ["none"], "environment": "local"}
        for name in ("baseline", "b", "c")
    ]
    data = {
        "schema_version": 1,
        "workload": {
            "command": [sys.executable, str(script), "{steps}", str(args.step_s)],
            "step_time": "jsonl",
        },
        "trials": args.trials,
        "steps": args.steps,
        "cells": cells,
        "executor": {"slurm": {"poll_seconds": args.poll_s, "max_concurrent": args.slots}},
    }
    path.write_text(yaml.safe_dump(data))


def _timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the process and its children) of one CLI run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:4])} failed ({done.returncode}): {done.stderr[-500:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> int:
    """Run both executors and print the numbers."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=4)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--step-s", type=float, default=0.5)
    parser.add_argument("--slots", type=int, default=4)
    parser.add_argument("--poll-s", type=float, default=0.5)
    args = parser.parse_args()
    helper = _cluster_helper()
    missing = helper.missing_binaries(accounting=False)
    if missing or os.geteuid() != 0:
        print(f"skipped: needs root and SLURM (missing: {', '.join(missing) or 'root'})")
        return 0
    with tempfile.TemporaryDirectory(prefix="slurmbench", dir="/tmp") as tmp:
        root = Path(tmp)
        cluster = helper.start_cluster(root / "c", accounting=False)
        try:
            recipe = root / "recipe.yaml"
            _recipe(recipe, args)
            env = {**os.environ, **cluster.env, "OMP_NUM_THREADS": "1", "CI": "true"}
            base = [AORTA, "triage", "run", "--recipe", str(recipe), "--progress", "plain"]
            local_wall, local_cpu = _timed(
                [*base, "--executor", "local", "--output-dir", str(root / "l")], env
            )
            slurm_wall, slurm_cpu = _timed([*base, "--output-dir", str(root / "s")], env)
        finally:
            cluster.stop()
    trials = 3 * args.trials
    print(f"matrix: 3 cells x {args.trials} trials x {args.steps} steps of {args.step_s} s")
    print(f"local executor:  {local_wall:6.1f} s wall ({local_cpu:.1f} s CPU incl. trials)")
    print(f"slurm executor:  {slurm_wall:6.1f} s wall, {args.slots} slots (max_concurrent)")
    print(f"wall-time ratio local/slurm: {local_wall / slurm_wall:.2f}x")
    print(
        f"SLURM driver CPU: {slurm_cpu:.2f} s in total, {1000 * slurm_cpu / trials:.0f} ms per "
        f"polled trial (poll every {args.poll_s} s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
