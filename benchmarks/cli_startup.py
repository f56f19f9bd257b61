"""Measure start-up time of the commands that run no workload; check they import no torch.

Budgets: `aorta --help` (foundation issue), `aorta triage --list-mitigations` and
`aorta triage run --recipe <smoke> --dry-run` (triage issue): <= 0.3 s wall each, and no
torch/triton in sys.modules. Prints medians and ratios to the budget; exit 1 when over.
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
HEAVY = ("torch", "triton", "numpy", "matplotlib", "scipy", "rich")
SMOKE = str(Path(__file__).parents[1] / "packages/aorta/recipes/example-fsdp-smoke.yaml")
BUDGETED = {
    "aorta --help": ["--help"],
    "triage --list-mitigations": ["triage", "--list-mitigations"],
    "triage run --dry-run": ["triage", "run", "--recipe", SMOKE, "--dry-run"],
}

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
    commands = {"python -c pass": [sys.executable, "-c", "pass"]}
    commands.update({label: [aorta, *argv] for label, argv in BUDGETED.items()})
    commands["aorta run --help"] = [aorta, "run", "--help"]
    medians: dict[str, float] = {}
    for label, cmd in commands.items():
        _wall(cmd)  # warm the page cache so the first run does not count disk reads
        medians[label] = statistics.median(_wall(cmd) for _ in range(RUNS))
        print(f"{label:<26} median {medians[label] * 1000:7.1f} ms over {RUNS} runs")
    failures = 0
    for label, argv in BUDGETED.items():
        probe = PROBE.format(argv=argv, heavy=HEAVY)
        out = subprocess.run(
            [sys.executable, "-c", probe], check=True, capture_output=True, text=True
        ).stdout
        heavy = json.loads(out.strip().splitlines()[-1])
        ratio = medians[label] / BUDGET_S
        ok = not heavy and ratio <= 1.0
        failures += not ok
        print(
            f"{label:<26} {ratio:.2f} x the {BUDGET_S:.1f} s budget, heavy modules: "
            f"{heavy or 'none'} [{'ok' if ok else 'FAIL'}]"
        )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
