"""Run one fsdp trial as a plain command that prints one JSON line per step.

    python -m aorta.workloads.fsdp --seed 3 --steps 40 [--output-dir DIR]
    torchrun --nproc_per_node=2 -m aorta.workloads.fsdp --seed 3 --steps 40

Each step prints `{"step": N, "step_time_ms": T, "loss": L}` (rank 0 only). A failed trial
(non-finite loss or grad norm) ends with `{"step": N, "loss": null, "failure": "..."}`; the
exit code is 0 either way: the lines say how the trial went. Parameters come from the `AORTA_FSDP_*`
variables, as for the registered workload. This is the `jsonl` step-time preset of command
workloads (`aorta triage run ... -- python -m aorta.workloads.fsdp --seed {seed} --steps {steps}`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from aorta.workloads.contract import StepCallback, TrialContext


def _printer(rank: int) -> StepCallback:
    def on_step(step: int, loss: float | None, step_time_ms: float) -> None:
        if rank == 0:
            line = {"step": step, "step_time_ms": round(step_time_ms, 4), "loss": loss}
            print(json.dumps(line), flush=True)

    return on_step


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments, run the trial, print its step lines."""
    parser = argparse.ArgumentParser(prog="python -m aorta.workloads.fsdp")
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--output-dir", type=Path, default=Path())
    args = parser.parse_args(argv)
    from aorta.workloads.fsdp.train import run_trial

    rank, world_size = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    ctx = TrialContext(
        trial_id=0,
        seed=args.seed,
        steps=args.steps,
        environ=dict(os.environ),
        output_dir=args.output_dir,
        rank=rank,
        world_size=world_size,
        on_step=_printer(rank),
    )
    outcome = run_trial(ctx)
    if outcome.failure is not None and rank == 0:
        # A non-finite grad norm leaves the step's loss finite: this line says it failed.
        record = {"step": outcome.failed_at_step, "loss": None, "failure": outcome.failure}
        print(json.dumps(record), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
