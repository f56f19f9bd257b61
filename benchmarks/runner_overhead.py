"""Overhead of `run_trials` over a bare loop of the same fsdp training steps.

Both sides run in this process, on the same model, data, optimizer and step count: the bare
side builds the process group, FSDP2 model, optimizer and data with the workload's own
building blocks and runs forward/backward/grad-norm/step with nothing else. The runner side
is `run_trials` with the fsdp workload (env handling, per-step finite checks and callbacks,
trial snapshots, atomic trial JSONs). Rounds alternate between the two so machine noise hits
both. The verdict uses the minimum per side (the run least disturbed by the machine, the
usual estimator for wall-time benchmarks on a shared VM); medians are printed beside it.

Budget (foundation issue): overhead <= 2 %. Exit 1 when over budget.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

BUDGET = 0.02


def bare_trial(steps: int, seed: int) -> None:
    """One trial's worth of training with no runner around it."""
    import os

    import torch
    import torch.nn.functional as F  # noqa: N812  # the conventional alias
    from torch.distributed.device_mesh import init_device_mesh

    from aorta.workloads.fsdp.config import FsdpConfig
    from aorta.workloads.fsdp.data import MarkovTokens
    from aorta.workloads.fsdp.model import build_model
    from aorta.workloads.fsdp.train import build_optimizer, trial_process_group

    config = FsdpConfig.from_environ(os.environ)
    device = torch.device("cpu")
    with trial_process_group(os.environ, device.type) as setup:
        torch.manual_seed(seed)
        mesh = init_device_mesh(device.type, (setup.world_size,))
        model = build_model(config, mesh, device)
        optimizer = build_optimizer(config, model)
        data = MarkovTokens(config.vocab_size, config.seq_len, config.data_seed)
        for step in range(steps):
            tokens = data.batch(step, setup.rank, config.batch_size)
            logits = model(tokens[:, :-1])
            loss = F.cross_entropy(logits.float(), tokens[:, 1:].flatten())
            optimizer.zero_grad(set_to_none=True)
            torch.autograd.backward(loss)
            torch.nn.utils.clip_grad_norm_(model.parameters(), math.inf)
            optimizer.step()


def main() -> int:
    """Alternate bare and runner rounds; print medians and the overhead ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--steps", type=int, default=100)
    args = parser.parse_args()

    from aorta.runner import RunRequest, run_trials

    def bare_round() -> float:
        start = time.perf_counter()
        for trial in range(args.trials):
            bare_trial(args.steps, seed=trial)
        return time.perf_counter() - start

    with tempfile.TemporaryDirectory(prefix="aorta-bench-") as tmp:

        def runner_round(index: int) -> float:
            request = RunRequest(
                workload="fsdp",
                output_dir=Path(tmp) / f"round_{index}",
                trials=args.trials,
                steps=args.steps,
            )
            start = time.perf_counter()
            results = run_trials(request)
            elapsed = time.perf_counter() - start
            assert all(r.passed for r in results), [r.failure for r in results]
            return elapsed

        bare_round()  # warm-up: imports, first process group, allocator
        runner_round(-1)
        bare: list[float] = []
        runner: list[float] = []
        for index in range(args.rounds):
            bare.append(bare_round())
            runner.append(runner_round(index))

    overhead = min(runner) / min(bare) - 1.0
    median_overhead = statistics.median(runner) / statistics.median(bare) - 1.0
    print(
        f"{args.rounds} rounds x {args.trials} trials x {args.steps} steps (fsdp, CPU, gloo, ws=1)"
    )
    for label, times in (("bare loop", bare), ("run_trials", runner)):
        rounds = ", ".join(f"{t:.3f}" for t in times)
        print(
            f"{label:<11} min {min(times):7.3f} s  median {statistics.median(times):7.3f} s"
            f"  (rounds: {rounds})"
        )
    verdict = "ok" if overhead <= BUDGET else "FAIL"
    print(
        f"runner overhead: {overhead * 100:+.2f} % on minima, {median_overhead * 100:+.2f} % on "
        f"medians (budget {BUDGET * 100:.0f} %) [{verdict}]"
    )
    return 0 if overhead <= BUDGET else 1


if __name__ == "__main__":
    sys.exit(main())
