"""Plan + render a 10,000-point sweep as job arrays; time `oellm-autoexp --help`.

Budgets (issue 6): the whole plan (load config, expand, build JobPlans through the backend
registry, render and lint every array script, write plan.json/sweep.json/scripts) < 5 s for
10,000 jobs; `oellm-autoexp --help` <= 0.3 s. Prints the time per 1,000 jobs for each stage and
exits 1 when a budget is missed. Runs `oellm-autoexp plan` itself (in process, so the stage
timings add up to the wall time) with --test-only never: sbatch is the cluster's time, not ours.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

JOBS = 10_000
PLAN_BUDGET_S = 5.0
HELP_BUDGET_S = 0.3
HELP_RUNS = 7


def sweep_config(root: Path) -> Path:
    """100 learning rates x 25 seeds x 4 model branches = 10,000 jobs, arrays of 1,000."""
    config = {
        "project": {"name": "bench", "base_output_dir": str(root / "out")},
        "backend": {
            "class_name": "CommandBackend",
            "argv": [
                "python",
                "train.py",
                "--lr",
                "{lr}",
                "--seed",
                "{seed}",
                "--hidden",
                "{hidden}",
                "--layers",
                "{layers}",
                "--save",
                "{output_dir}",
            ],
            "env": {"RUN_NAME": "{name}"},
        },
        "sweep": {
            "axes": {
                "lr": [round(1e-5 * (i + 1), 8) for i in range(100)],
                "seed": list(range(25)),
                "model": [
                    {"hidden": h, "layers": n}
                    for h, n in ((256, 4), (512, 8), (1024, 16), (2048, 24))
                ],
            },
            "name_template": "bench_lr{lr}_s{seed}_h{hidden}",
        },
        "slurm": {
            "sbatch": {"time": "01:00:00", "nodes": 1},
            "array_throttle": 50,
            "test_only": "never",
        },
    }
    path = root / "bench.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def time_plan(path: Path) -> dict[str, tuple[float, float]]:
    """(wall, CPU) seconds of each planning stage for one run."""
    from oellm_autoexp.config.loader import load_config
    from oellm_autoexp.planning import build_plan, write_plan

    stages: dict[str, tuple[float, float]] = {}
    start = mark = (time.perf_counter(), time.process_time())

    def lap(label: str) -> None:
        nonlocal mark
        now = (time.perf_counter(), time.process_time())
        stages[label] = (now[0] - mark[0], now[1] - mark[1])
        mark = now

    loaded = load_config(path)
    lap("load config")
    result = build_plan(loaded.root)
    lap("expand + JobPlans + render")
    write_plan(result, test_only="never")
    lap("lint + write artifacts")
    stages["total"] = (time.perf_counter() - start[0], time.process_time() - start[1])
    assert len(result.plan.jobs) == JOBS, len(result.plan.jobs)
    assert len(result.plan.scripts) == JOBS // 1000
    return stages


def time_help() -> float:
    exe = str(Path(sys.executable).with_name("oellm-autoexp"))
    subprocess.run([exe, "--help"], check=True, capture_output=True)  # warm the page cache
    runs = []
    for _ in range(HELP_RUNS):
        start = time.perf_counter()
        subprocess.run([exe, "--help"], check=True, capture_output=True)
        runs.append(time.perf_counter() - start)
    return statistics.median(runs)


def main() -> int:
    """Run both measurements and print the verdict."""
    load = os.getloadavg()[0]
    print(f"{os.cpu_count()} CPUs, load average {load:.1f} (wall times grow with contention)")
    with tempfile.TemporaryDirectory() as tmp:
        stages = time_plan(sweep_config(Path(tmp)))
    for label, (wall, cpu) in stages.items():
        per_k = wall / (JOBS / 1000)
        print(
            f"plan {label:<28} {wall:6.2f} s wall ({cpu:5.2f} s CPU)   "
            f"{per_k * 1000:7.1f} ms per 1,000 jobs"
        )
    help_s = time_help()
    print(f"oellm-autoexp --help            {help_s * 1000:6.1f} ms (median of {HELP_RUNS})")
    total = stages["total"][0]
    ok = total < PLAN_BUDGET_S and help_s <= HELP_BUDGET_S
    print(
        f"budgets: plan {JOBS:,} jobs < {PLAN_BUDGET_S:.0f} s "
        f"({total / PLAN_BUDGET_S:.2f} of budget), --help <= {HELP_BUDGET_S} s "
        f"({help_s / HELP_BUDGET_S:.2f} of budget): {'ok' if ok else 'OVER'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
