"""Replay Megatron-LM-format training output with realistic timing (standard library only).

    megatron_replay.py ITERATIONS [--interval-ms MS] [--nan-at N | --oom-at N | --hang-at N]

Prints Megatron's start-up lines, then one `training_log` line per iteration (log interval 1)
after sleeping the iteration's time: ~MS ms with jitter. `--nan-at N`: from iteration N on the
loss is NaN, which Megatron leaves out of its averages and counts as a nan iteration.
`--oom-at N`: a CUDA out-of-memory traceback at iteration N, exit 1. `--hang-at N`: silence
after iteration N-1 (a stuck collective).
"""

import argparse
import random
import sys
import time
from datetime import datetime


def iteration_line(iteration: int, total: int, elapsed_ms: float, loss: float | None) -> str:
    stamp = datetime.now().strftime("%Y-%m-%d %H:%M:%S")
    line = (
        f" [{stamp}] iteration {iteration:8d}/{total:8d} |"
        f" consumed samples: {iteration * 512:12d} |"
        f" elapsed time per iteration (ms): {elapsed_ms:.1f} | throughput per GPU (TFLOP/s/GPU):"
        f" {180.0 + random.random():.1f} | learning rate: {3e-4:.6E} | global batch size:   512 |"
    )
    if loss is not None:
        line += f" lm loss: {loss:.6E} |"
    line += " loss scale: 1.0 | grad norm: 1.234 |"
    line += (
        f" number of skipped iterations:   0 | number of nan iterations: {int(loss is None):3d} |"
    )
    return line


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("iterations", type=int)
    parser.add_argument("--interval-ms", type=float, default=20.0)
    parser.add_argument("--nan-at", type=int)
    parser.add_argument("--oom-at", type=int)
    parser.add_argument("--hang-at", type=int)
    args = parser.parse_args()
    random.seed(0)
    print("using world size: 8, data-parallel size: 8, tensor-model-parallel size: 1")
    print("> initializing torch distributed ...")
    print("training ...")
    sys.stdout.flush()
    for iteration in range(1, args.iterations + 1):
        if args.hang_at == iteration:
            time.sleep(3600)
        elapsed = args.interval_ms * random.uniform(0.9, 1.1)
        time.sleep(elapsed / 1000.0)
        if args.oom_at == iteration:
            print("Traceback (most recent call last):", file=sys.stderr)
            print(
                "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 "
                "has a total capacity of 79.11 GiB of which 1.02 GiB is free.",
                file=sys.stderr,
            )
            return 1
        nan = args.nan_at is not None and iteration >= args.nan_at
        print(iteration_line(iteration, args.iterations, elapsed, None if nan else 8.0 / iteration))
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
