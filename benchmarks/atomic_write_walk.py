"""Cost of one atomic write (`toolkit_core.atomic`), and of a non-array `oellm-autoexp plan`.

Issue 23: every write walks its directory from "/" one component at a time (openat with
O_NOFOLLOW, links judged by who could have planted them) instead of letting the kernel resolve
the path. This measures what that walk costs per write, at the depth of a real run directory,
and in the command that writes the most files: a non-array plan, one script per job.

- micro: `write_text_atomic(..., fsync=False)` of a 200-byte file, N times into a directory
  `depth` levels below a temporary directory (median of 5 rounds, CPU microseconds per write,
  kernel time included: wall time on a shared machine measures the neighbours too), and the
  part the walk changes: opening that directory by the kernel's resolution vs walked.
- plan: `oellm-autoexp plan` of a non-array sweep (`slurm.array: false`, one script per job),
  CPU seconds in a fresh interpreter, as `autoexp_plan.py` measures it.

Figures only, no budget: run it before and after a change to the write path and compare on
the same machine (`--quick`: fewer writes, 2,000 jobs).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import yaml
from autoexp_plan import _CHILD, sweep_config  # a sibling script, found by the line above

from toolkit_core import atomic, paths

QUICK = "--quick" in sys.argv
WRITES = 500 if QUICK else 2000
ROUNDS = 5
DEPTH = 6
PLAN_JOBS = 2000 if QUICK else 10_000


def _per_write_us(directory: Path) -> float:
    text = "x" * 200
    runs = []
    for round_ in range(ROUNDS):
        names = [directory / f"r{round_}-{i}.txt" for i in range(WRITES)]
        start = time.process_time()
        for name in names:
            atomic.write_text_atomic(name, text, fsync=False)
        runs.append((time.process_time() - start) / WRITES * 1e6)
    return statistics.median(runs)


def _per_open_us(open_dir: Callable[[Path], int], directory: Path) -> float:
    runs = []
    for _ in range(ROUNDS):
        start = time.process_time()
        for _ in range(WRITES):
            os.close(open_dir(directory))
        runs.append((time.process_time() - start) / WRITES * 1e6)
    return statistics.median(runs)


def _kernel_open(directory: Path) -> int:
    return os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)


def micro() -> None:
    """CPU microseconds per write, and what opening its directory costs (walked or not)."""
    with tempfile.TemporaryDirectory(prefix="atomic-walk-") as tmp:
        directory = Path(tmp).joinpath(*(f"d{i}" for i in range(DEPTH)))
        directory.mkdir(parents=True)
        depth = len(directory.parts) - 1
        print(f"write_text_atomic, {depth} components deep: {_per_write_us(directory):6.1f} us")
        kernel = _per_open_us(_kernel_open, directory)
        print(f"open of its directory by the kernel:      {kernel:6.1f} us")
        walk = getattr(paths, "open_directory", None)
        if walk is not None:
            walked = _per_open_us(walk, directory)
            print(f"walked open (paths.open_directory):       {walked:6.1f} us")


def plan() -> None:
    """CPU seconds of a non-array plan (one script per job) in a fresh interpreter."""
    with tempfile.TemporaryDirectory(prefix="atomic-walk-plan-") as tmp:
        path = sweep_config(Path(tmp), PLAN_JOBS)
        config = yaml.safe_load(path.read_text())
        config["slurm"]["array"] = False
        path.write_text(yaml.safe_dump(config))
        done = subprocess.run(
            [sys.executable, "-c", _CHILD, str(path)],
            capture_output=True,
            text=True,
            check=False,
            env=os.environ,
        )
        lines = done.stdout.strip().splitlines()
        if done.returncode != 0 or not lines:
            raise SystemExit(f"plan failed:\n{done.stderr}")
        figures = json.loads(lines[-1])
        scripts = sum(1 for _ in Path(tmp, "out", "plans").glob("*/scripts/*"))
        print(
            f"plan, non-array, {PLAN_JOBS:,} jobs ({scripts:,} scripts): "
            f"{figures['cpu_s']:.2f} s CPU, {figures['wall_s']:.2f} s wall"
        )


if __name__ == "__main__":
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    micro()
    plan()
