"""Measure `aorta --help` start-up time and check that it imports neither torch nor triton.

Budget (foundation issue): `aorta --help` <= 0.3 s wall, and no torch/triton in sys.modules.
Prints the median of several runs and the ratio to the budget; exit 1 when over budget.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

BUDGET_S = 0.3
RUNS = 7
HEAVY = ("torch", "triton", "numpy", "matplotlib", "scipy")

# Runs the real CLI entry point in a fresh interpreter and reports what got imported.
PROBE = """
import json, sys
from aorta.cli.main import main
import contextlib, io
with contextlib.redirect_stdout(io.StringIO()):
    main({argv!r})
print(json.dumps(sorted(m for m in {heavy!r} if m in sys.modules)))
"""


def _wall(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> int:
    """Time the console script and print the verdict."""
    aorta = str(Path(sys.executable).with_name("aorta"))
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "aorta --help": [aorta, "--help"],
        "aorta run --help": [aorta, "run", "--help"],
        "aorta env --help": [aorta, "env", "--help"],
    }
    medians: dict[str, float] = {}
    for label, cmd in commands.items():
        _wall(cmd)  # warm the page cache so the first run does not count disk reads
        medians[label] = statistics.median(_wall(cmd) for _ in range(RUNS))
        print(f"{label:<18} median {medians[label] * 1000:7.1f} ms over {RUNS} runs")
    failures = 0
    for argv in (["--help"], ["run", "--help"], ["env", "--help"]):
        probe = PROBE.format(argv=argv, heavy=HEAVY)
        out = subprocess.run(
            [sys.executable, "-c", probe], check=True, capture_output=True, text=True
        ).stdout
        heavy = json.loads(out.strip().splitlines()[-1])
        status = "ok" if not heavy else "FAIL"
        failures += bool(heavy)
        print(f"aorta {' '.join(argv):<12} heavy modules imported: {heavy or 'none'} [{status}]")
    ratio = medians["aorta --help"] / BUDGET_S
    over = ratio > 1.0
    failures += over
    print(f"aorta --help: {ratio:.2f} x the {BUDGET_S:.1f} s budget [{'FAIL' if over else 'ok'}]")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
