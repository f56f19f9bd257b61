"""Overhead of `run_trials` over the fsdp training loops it runs: judged within each run.

`run_trials` with the fsdp workload (env handling, per-step callbacks, trial snapshots,
atomic trial JSONs, results) runs in this process, one torch thread. The workload's trial
loop (`aorta.workloads.fsdp.train.run_trial`: model, optimizer, data, the steps and their own
finite checks) is timed from inside each round, and so is every call of the runner's per-step
callback (`TrialContext.on_step`) inside it. The runner's overhead in a round is its CPU time
minus the workload's loops, plus the callbacks (runner code run inside the loop), as a
fraction of the loops without the callbacks. Verdict: the median over rounds.

Why within one run: on this shared 2-core VM the CPU time of identical work moves by +-10-15 %
from one round to the next, even with one torch thread and nothing else running; runner and
bare rounds compared side by side gave +2.5 %, -1.8 % and +4.9 % (minima, minima, paired
medians) for the same code within an hour, around a 2 % budget. For reference, the script
still alternates rounds of a bare loop of the same steps (the workload's building blocks,
nothing else) and prints that comparison, unjudged.

Budget (foundation issue): overhead <= 2 %. Exit 1 when over budget.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

BUDGET = 0.02
# Before torch is imported (here and in `run_trials`): one intra-op thread, see the docstring.
os.environ["OMP_NUM_THREADS"] = "1"


def bare_trial(steps: int, seed: int) -> None:
    """One trial's worth of training with no runner around it."""
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
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--steps", type=int, default=100)
    args = parser.parse_args()

    import dataclasses

    import torch
    from triage_overhead import Spans, timed

    import aorta.workloads.fsdp.train as fsdp_train
    from aorta.runner import RunRequest, run_trials

    torch.set_num_threads(1)
    loops, callbacks = Spans(), Spans()
    workload_trial = fsdp_train.run_trial

    def timed_trial(ctx: Any) -> Any:  # fsdp's entry looks the name up per call
        with loops.span():
            return workload_trial(dataclasses.replace(ctx, on_step=timed(callbacks, ctx.on_step)))

    fsdp_train.run_trial = timed_trial

    def measured(work: Callable[[], object]) -> tuple[float, float]:
        """(CPU seconds of this process, wall seconds) of `work()`."""
        cpu, wall = time.process_time(), time.perf_counter()
        work()
        return time.process_time() - cpu, time.perf_counter() - wall

    def bare_round() -> None:
        for trial in range(args.trials):
            bare_trial(args.steps, seed=trial)

    overheads: list[float] = []
    with tempfile.TemporaryDirectory(prefix="aorta-bench-") as tmp:

        def runner_round(index: int) -> None:
            request = RunRequest(
                workload="fsdp",
                output_dir=Path(tmp) / f"round_{index}",
                trials=args.trials,
                steps=args.steps,
            )
            results = run_trials(request)
            assert all(r.passed for r in results), [r.failure for r in results]

        bare_round()  # warm-up: imports, first process group, allocator
        runner_round(-1)
        bare: list[tuple[float, float]] = []
        runner: list[tuple[float, float]] = []
        for index in range(args.rounds):
            for spans in (loops, callbacks):
                spans.cpu.clear()
                spans.wall.clear()
            bare.append(measured(bare_round))
            runner.append(measured(lambda index=index: runner_round(index)))
            workload = sum(loops.cpu) - sum(callbacks.cpu)
            overheads.append(runner[-1][0] / workload - 1.0)

    overhead = statistics.median(overheads)
    bare_cpu, runner_cpu = [c for c, _ in bare], [c for c, _ in runner]
    print(
        f"{args.rounds} rounds x {args.trials} trials x {args.steps} steps (fsdp, CPU, gloo, ws=1, "
        f"1 torch thread), load average {os.getloadavg()[0]:.1f}"
    )
    rounds = ", ".join(f"{o * 100:+.2f}" for o in overheads)
    verdict = "ok" if overhead <= BUDGET else "FAIL"
    print(
        f"runner overhead within each run_trials round (CPU, over its own workload loops): "
        f"median {overhead * 100:+.2f} % ({rounds}) (budget {BUDGET * 100:.0f} %) [{verdict}]"
    )
    print("reference, separate rounds (unjudged: round-to-round noise exceeds the budget):")
    for label, times in (("bare loop", bare), ("run_trials", runner)):
        cpu = [c for c, _ in times]
        walls = ", ".join(f"{w:.2f}" for _, w in times)
        print(
            f"  {label:<11} CPU min {min(cpu):7.3f} s  median {statistics.median(cpu):7.3f} s"
            f"  (rounds: {', '.join(f'{c:.2f}' for c in cpu)}; wall: {walls})"
        )
    print(
        f"  run_trials / bare: {min(runner_cpu) / min(bare_cpu) - 1:+.2%} on CPU minima, "
        f"{statistics.median(runner_cpu) / statistics.median(bare_cpu) - 1:+.2%} on medians"
    )
    return 0 if overhead <= BUDGET else 1


if __name__ == "__main__":
    sys.exit(main())
