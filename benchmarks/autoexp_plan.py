"""`oellm-autoexp plan` at 10,000, 100,000 and 1,000,000 jobs; `oellm-autoexp --help`.

Budgets (issue 26): the whole `plan` command (load the config, expand, build JobPlans through
the backend registry, render and lint every array script, write plan.json / sweep.json /
scripts, print the summary) in < 1 s for 10,000 jobs, < 6 s and < 300 MB peak RSS for
100,000, < 60 s and < 1.5 GB for 1,000,000 (command backend, arrays of 1,000, --test-only
never: sbatch is the cluster's time, not ours; OELLM_AUTOEXP_MAX_JOBS raised for 1,000,000).
`oellm-autoexp --help` <= 0.3 s.

Each size runs in a fresh interpreter that times `main(["plan", ...])` itself (CPU and wall
seconds, after the interpreter has started) and reports its peak RSS, which includes the
interpreter and its imports. The time budgets apply to CPU seconds: wall time is printed
beside them, but on a shared machine it measures the neighbours too. No figure from the same
run can stand in for "the work of planning", so these budgets are absolute. `--quick` stops
after 100,000 jobs. Exit 1 when a budget is missed.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

# jobs -> (CPU seconds, peak RSS MB or None)
BUDGETS = {10_000: (1.0, None), 100_000: (6.0, 300.0), 1_000_000: (60.0, 1500.0)}
HELP_BUDGET_S = 0.3
HELP_RUNS = 7

# Runs in the child: time the CLI's plan command, report figures as one JSON line on stdout.
_CHILD = """
import json, resource, sys, time
from oellm_autoexp.cli.main import main
wall, cpu = time.perf_counter(), time.process_time()
sys.stdout = open("/dev/null", "w")  # the summary table is not what is measured
code = main(["plan", sys.argv[1]])
cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
sys.stdout = sys.__stdout__
rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"code": code, "cpu_s": cpu, "wall_s": wall, "rss_mb": rss_mb}))
"""


# Children run with bytecode written and reused, as an installed tool does (a development shell
# may set PYTHONDONTWRITEBYTECODE, which recompiles the package in every run).
ENV = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}


def sweep_config(root: Path, jobs: int) -> Path:
    """`jobs // 100` learning rates x 25 seeds x 4 model branches, arrays of 1,000."""
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
                "lr": [round(1e-7 * (i + 1), 10) for i in range(jobs // 100)],
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


def time_plan(jobs: int) -> dict[str, float]:
    """Run `oellm-autoexp plan` on a `jobs`-job sweep in a fresh interpreter; its figures."""
    with tempfile.TemporaryDirectory(prefix="autoexp-plan-") as tmp:
        path = sweep_config(Path(tmp), jobs)
        # Above the default MAX_JOBS (100,000) a user raises the limit the same way.
        env = {**ENV, "OELLM_AUTOEXP_MAX_JOBS": str(max(jobs, 100_000))}
        done = subprocess.run(
            [sys.executable, "-c", _CHILD, str(path)],
            capture_output=True,
            text=True,
            check=False,
            env=env,
        )
        lines = done.stdout.strip().splitlines()
        figures: dict[str, float] = json.loads(lines[-1]) if lines else {}
        if done.returncode != 0 or figures.get("code") != 0:
            raise SystemExit(f"plan of {jobs:,} jobs failed:\n{done.stderr}")
        plan_json = next(Path(tmp, "out", "plans").glob("*/plan.json"))
        with plan_json.open(encoding="utf-8") as handle:
            planned = sum(1 for line in handle if line.startswith('{"job_id"'))
        assert planned == jobs, (planned, jobs)
        return figures


def time_help() -> float:
    """Median wall seconds of `oellm-autoexp --help`."""
    exe = str(Path(sys.executable).with_name("oellm-autoexp"))
    subprocess.run([exe, "--help"], check=True, capture_output=True, env=ENV)  # page cache
    runs = []
    for _ in range(HELP_RUNS):
        start = time.perf_counter()
        subprocess.run([exe, "--help"], check=True, capture_output=True, env=ENV)
        runs.append(time.perf_counter() - start)
    return statistics.median(runs)


def main() -> int:
    """Run every size (`--quick`: up to 100,000), print measured / budget / ratio."""
    load = os.getloadavg()[0]
    print(f"{os.cpu_count()} CPUs, load average {load:.1f} (wall times grow with contention)")
    ok = True
    for jobs, (cpu_budget, rss_budget) in BUDGETS.items():
        if "--quick" in sys.argv and jobs > 100_000:
            continue
        row = time_plan(jobs)
        verdict = row["cpu_s"] < cpu_budget and (rss_budget is None or row["rss_mb"] < rss_budget)
        ok = ok and verdict
        memory = (
            f"peak RSS {row['rss_mb']:6.0f} MB / {rss_budget:6.0f} MB = "
            f"{row['rss_mb'] / rss_budget:.2f}"
            if rss_budget is not None
            else f"peak RSS {row['rss_mb']:6.0f} MB (no budget)"
        )
        print(
            f"plan {jobs:>9,} jobs: {row['cpu_s']:6.2f} s CPU / {cpu_budget:4.0f} s = "
            f"{row['cpu_s'] / cpu_budget:.2f} ({row['wall_s']:6.2f} s wall); {memory}: "
            f"{'ok' if verdict else 'OVER'}"
        )
    help_s = time_help()
    help_ok = help_s <= HELP_BUDGET_S
    print(
        f"oellm-autoexp --help: {help_s * 1000:6.1f} ms / {HELP_BUDGET_S * 1000:.0f} ms = "
        f"{help_s / HELP_BUDGET_S:.2f} (median of {HELP_RUNS}): {'ok' if help_ok else 'OVER'}"
    )
    return 0 if ok and help_ok else 1


if __name__ == "__main__":
    sys.exit(main())
