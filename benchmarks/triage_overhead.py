"""Orchestration overhead of a triage matrix over the bare workload loops it runs.

One `run_recipe` of N cells x T trials x S fsdp steps (all cells in-process, `none`
mitigation, so every cell does the same work) against the sum of N x T bare loops of the same
steps (`runner_overhead.bare_trial`). Probe time (`collect_env`, host + environment scope) is
measured separately and excluded from the overhead, as the triage issue asks; so is drawing
`matrix.png` (a fixed cost per matrix, not per step: matplotlib rendering). Rounds alternate;
the verdict uses minima (see runner_overhead.py for why).

Budget (triage issue): orchestration overhead <= 2 %. Exit 1 when over budget.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from runner_overhead import bare_trial  # sibling benchmark script

BUDGET = 0.02


def main() -> int:
    """Alternate bare and matrix rounds; print the overhead and the probe time."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cells", type=int, default=3)
    parser.add_argument("--trials", type=int, default=2)
    parser.add_argument("--steps", type=int, default=100)
    args = parser.parse_args()

    import yaml

    import aorta.triage.output as triage_output
    from aorta.instrumentation.environment import collect_env
    from aorta.triage.recipe import load_recipe
    from aorta.triage.runner import run_recipe

    probe_seconds: list[float] = []
    plot_seconds: list[float] = []
    draw = triage_output.write_plot

    def timed_plot(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        outcome = draw(*args, **kwargs)
        plot_seconds.append(time.perf_counter() - start)
        return outcome

    triage_output.write_plot = timed_plot  # the name write_report calls

    def timed_probe(**kwargs: Any) -> Any:
        start = time.perf_counter()
        snapshot = collect_env(**kwargs)
        probe_seconds.append(time.perf_counter() - start)
        return snapshot

    with tempfile.TemporaryDirectory(prefix="aorta-triage-bench-") as tmp:
        cells = [
            {"name": f"cell-{i}", "mitigations": ["none"], "environment": "local"}
            for i in range(args.cells)
        ]
        recipe_path = Path(tmp) / "bench.yaml"
        recipe_path.write_text(
            yaml.safe_dump(
                {
                    "schema_version": 1,
                    "workload": "fsdp",
                    "trials": args.trials,
                    "steps": args.steps,
                    "confound": {"baseline_cell": "cell-0"},
                    "cells": cells,
                }
            )
        )
        recipe = load_recipe(recipe_path)

        def bare_round() -> float:
            start = time.perf_counter()
            for _ in range(args.cells):
                for trial in range(args.trials):
                    bare_trial(args.steps, seed=trial)
            return time.perf_counter() - start

        def matrix_round() -> float:
            probe_seconds.clear()
            plot_seconds.clear()
            start = time.perf_counter()
            run_recipe(recipe, Path(tmp) / "out", probe=timed_probe)
            return time.perf_counter() - start - sum(probe_seconds) - sum(plot_seconds)

        bare_round()  # warm-up: imports, first process group
        matrix_round()
        bare: list[float] = []
        matrix: list[float] = []
        probes: list[float] = []
        plots: list[float] = []
        for _ in range(args.rounds):
            bare.append(bare_round())
            matrix.append(matrix_round())
            probes.append(sum(probe_seconds))
            plots.append(sum(plot_seconds))

    overhead = min(matrix) / min(bare) - 1.0
    median_overhead = statistics.median(matrix) / statistics.median(bare) - 1.0
    print(
        f"{args.rounds} rounds: {args.cells} cells x {args.trials} trials x {args.steps} fsdp steps"
    )
    for label, times in (("bare loops", bare), ("run_recipe", matrix)):
        rounds = ", ".join(f"{t:.3f}" for t in times)
        print(
            f"{label:<11} min {min(times):7.3f} s  "
            f"median {statistics.median(times):7.3f} s  ({rounds})"
        )
    print(
        f"probes (excluded): median {statistics.median(probes) * 1000:.1f} ms per matrix "
        f"(1 host + 1 environment snapshot)"
    )
    print(f"matrix.png (excluded): median {statistics.median(plots) * 1000:.1f} ms per matrix")
    verdict = "ok" if overhead <= BUDGET else "FAIL"
    print(
        f"orchestration overhead: {overhead * 100:+.2f} % on minima, "
        f"{median_overhead * 100:+.2f} % on medians (budget {BUDGET * 100:.0f} %) [{verdict}]"
    )
    return 0 if overhead <= BUDGET else 1


if __name__ == "__main__":
    sys.exit(main())
