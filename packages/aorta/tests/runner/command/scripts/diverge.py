"""A standalone PyTorch training script (it does not import aorta) that diverges for some seeds.

A small tanh MLP fits a random regression target with plain SGD. At `--lr 0.77` (the default)
the learning rate sits just past the edge of stability for part of the seeds: those blow up to
inf within a few dozen steps, the others train. Measured (40 steps, 1 thread, x86 CPU):
seeds 0..15 -> 10 fail (1, 3, 5, 6, 7, 9, 10, 12, 13, 15), at steps 17..32.
With `--rows 4096 --lr 0.85` (~10 ms steps, where the clipping's cost is lost in the
matmuls) seeds 0..5 all fail, at steps 16..21.
Two cures, read from the environment: `DIVERGE_CLIP=0.5` clips the gradient norm (no extra
cost); `DIVERGE_SUBSTEPS=2` makes two updates of half the learning rate per step (twice the
compute per step). One line per step, `--format jsonl`
(`{"step": .., "step_time_ms": .., "loss": ..}`), `megatron` (Megatron-LM's iteration line) or
`nanogpt` (nanoGPT's train.py: an eval line `step 0: train loss .., val loss ..` first, then
`iter N: loss X, time Yms, mfu Z%`, with `mfu -100.00%` for the first 5 iterations; like
nanoGPT it does not stop at a NaN loss).
`--out DIR` writes the final loss to DIR/final.txt (an artifact to collect).
"""

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

import torch


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--lr", type=float, default=0.77)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--rows", type=int, default=256, help="training examples (one batch)")
    parser.add_argument("--format", choices=("jsonl", "megatron", "nanogpt"), default="jsonl")
    parser.add_argument("--out", type=Path)
    # cpu: the process's CPU time per step, what the step costs whatever the neighbours on a
    # shared machine do (wall time there also measures them); one thread, so no spin-waits.
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    args = parser.parse_args()
    clip = float(os.environ.get("DIVERGE_CLIP", "0"))
    substeps = int(os.environ.get("DIVERGE_SUBSTEPS", "1"))
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    inputs = torch.randn(args.rows, 16)
    target = torch.sin(inputs @ torch.randn(16, 1))
    model = torch.nn.Sequential(
        torch.nn.Linear(16, 64),
        torch.nn.Tanh(),
        torch.nn.Linear(64, 64),
        torch.nn.Tanh(),
        torch.nn.Linear(64, 1),
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr / substeps)
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    loss_value = math.nan
    if args.format == "nanogpt":
        with torch.no_grad():
            first = float(torch.nn.functional.mse_loss(model(inputs), target))
        print(f"step 0: train loss {first:.4f}, val loss {first:.4f}")
    for step in range(1, args.steps + 1):
        start = clock()
        for sub in range(substeps):
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(model(inputs), target)
            loss.backward()
            if clip > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            optimizer.step()
            if sub == 0:
                loss_value = float(loss.detach())
        elapsed_ms = (clock() - start) * 1000.0
        if args.format == "jsonl":
            print(json.dumps({"step": step, "step_time_ms": elapsed_ms, "loss": loss_value}))
        elif args.format == "nanogpt":
            mfu = -1.0 if step < 5 else 0.0123
            print(
                f"iter {step}: loss {loss_value:.4f}, time {elapsed_ms:.2f}ms, mfu {mfu * 100:.2f}%"
            )
        else:
            print(
                f" iteration {step:8d}/{args.steps:8d} | consumed samples: {step * 256:12d} |"
                f" elapsed time per iteration (ms): {elapsed_ms:.1f} | learning rate:"
                f" {args.lr:.6E} | global batch size:   256 | lm loss: {loss_value:.6E} |"
                " loss scale: 1.0 |"
            )
        sys.stdout.flush()
        if not math.isfinite(loss_value) and args.format != "nanogpt":
            break
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "final.txt").write_text(f"{loss_value}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
