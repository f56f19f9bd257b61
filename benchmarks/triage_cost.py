"""A triage matrix's own cost over the command it triages: per run and per trial.

Runs, interleaved round by round so that a busy neighbour hits all alike, the bare command
(`/bin/true`), a one-trial `aorta triage run --mode matrix ... -- /bin/true` and a
`--trials N` one, and takes the median wall time of each over the rounds:

- per run   = median(one-trial matrix) - median(bare command)        budget 0.5 s
- per trial = (median(N-trial matrix) - median(one-trial matrix)) / (N - 1)
              - median(bare command)                                  budget 20 ms

(issue 26). Both are figures over the bare command measured in the same run, so a loaded
machine moves both sides. `matrix.png` is drawn by a child process after the run returns
(`aorta.cli.plot_job`); the script waits for it between runs, untimed, so that it does not
slow the next measurement. It also checks, in a separate untimed run, that the matrix's process
imports no scipy, matplotlib, numpy or torch.

Judged on CPU time (user + sys of the command and the children it waits for), with wall time
printed beside it: on the shared 2-core machine a busy neighbour stretches the wall time of a
Python process far more than that of `/bin/true`, so a wall-time difference measures the
neighbours. The plot child is not waited for and so not counted: it runs after the matrix is
written. Every child runs without PYTHONDONTWRITEBYTECODE (set in some development shells): with
it, each run compiled aorta's sources again (~0.74 G of 2.39 G instructions), a cost no
installed `aorta` pays; the untimed import probe writes the bytecode first.

Prints each figure with its ratio to the budget; exit 1 when one is over.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RUN_BUDGET_S = 0.5
TRIAL_BUDGET_S = 0.020
BARE = ["/bin/true"]
# numpy too: a command that prints no step times leaves nothing to bootstrap.
FORBIDDEN = ("scipy", "matplotlib", "numpy", "torch", "triton")
PENDING = "is being drawn after the matrix"
# What every child runs with (see the module docs).
ENV = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}

# The real CLI entry point in one interpreter; prints which forbidden modules it imported.
PROBE = """
import json, sys
from aorta.cli.main import main
try:
    main({argv!r})
except SystemExit:
    pass
print(json.dumps(sorted(m for m in {forbidden!r} if m in sys.modules)), file=sys.__stderr__)
"""


def _matrix_argv(trials: int, out: Path) -> list[str]:
    return [
        "triage", "run", "--mode", "matrix", "--mitigation-axis", "none",
        "--environment-axis", "local", "--trials", str(trials), "--steps", "1",
        "--progress", "plain", "--output-dir", str(out), "--", *BARE,
    ]  # fmt: skip


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _measure(cmd: list[str]) -> tuple[float, float]:
    """(wall, CPU) seconds of `cmd` run to completion."""
    cpu, start = _children_cpu(), time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, env=ENV)
    return time.perf_counter() - start, _children_cpu() - cpu


def _wait_for_plots(out: Path, timeout: float = 120.0) -> None:
    """Wait (untimed) until every matrix.md under `out` has its final plot line."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(PENDING in md.read_text(encoding="utf-8") for md in out.rglob("matrix.md")):
            return
        time.sleep(0.1)


def main() -> int:
    """Interleave bare and matrix runs; print the per-run and per-trial cost against budget."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--trials", type=int, default=11)
    args = parser.parse_args()
    aorta = str(Path(sys.executable).parent / "aorta")

    bare: list[tuple[float, float]] = []
    one: list[tuple[float, float]] = []
    many: list[tuple[float, float]] = []
    with tempfile.TemporaryDirectory(prefix="aorta-triage-cost-") as tmp:
        out = Path(tmp)
        probe = PROBE.format(argv=_matrix_argv(1, out / "probe"), forbidden=FORBIDDEN)
        result = subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, check=True, env=ENV
        )
        imported = json.loads(result.stderr.strip().splitlines()[-1])
        _wait_for_plots(out)
        for _ in range(args.rounds):
            bare.append(_measure(BARE))
            one.append(_measure([aorta, *_matrix_argv(1, out)]))
            _wait_for_plots(out)
            many.append(_measure([aorta, *_matrix_argv(args.trials, out)]))
            _wait_for_plots(out)

    ok = True
    for clock, index in (("cpu", 1), ("wall", 0)):
        bare_s, one_s, many_s = (statistics.median(m[index] for m in x) for x in (bare, one, many))
        per_run = one_s - bare_s
        per_trial = (many_s - one_s) / (args.trials - 1) - bare_s
        print(
            f"{clock:<4} medians of {args.rounds} rounds: bare {BARE[0]} {bare_s * 1000:.1f} ms, "
            f"one-trial matrix {one_s:.3f} s, {args.trials}-trial matrix {many_s:.3f} s"
        )
        for label, value, budget in (
            ("per run", per_run, RUN_BUDGET_S),
            ("per trial", per_trial, TRIAL_BUDGET_S),
        ):
            ratio = value / budget
            judged = clock == "cpu"
            ok &= ratio <= 1.0 or not judged
            verdict = ("ok" if ratio <= 1 else "FAIL") if judged else "unjudged"
            print(
                f"  triage cost {label}: {value * 1000:.1f} ms over the bare command "
                f"(budget {budget * 1000:.0f} ms, ratio {ratio:.2f}) [{verdict}]"
            )
    verdict = "ok" if not imported else "FAIL"
    listed = ", ".join(FORBIDDEN)
    print(f"modules the matrix run imports of {listed}: {imported or 'none'} [{verdict}]")
    return 0 if ok and not imported else 1


if __name__ == "__main__":
    sys.exit(main())
