"""Step-time cost of `locate` on the fsdp workload (CPU): ratio with / without the locator.

Both sides are `run_trials` with the fsdp workload in this process, same seeds, model, data
and step count; the only difference is `RunRequest(locate=True)` (global forward / backward
module hooks, parameter-gradient hooks and the post-step parameter check, read once per step).
Trials alternate between the two sides (which goes first alternates too) so machine noise and
drift hit both. Step times are the trials' own per-step times after warm-up, on the process
CPU clock (`AORTA_FSDP_STEP_CLOCK=cpu`, one thread): on a shared machine wall time would also
measure the neighbours, and the locator's cost is CPU work. Each trial's figure is its median
step time; the ratio is the median over the locate trials to the median over the others (the
median of the paired per-round ratios is printed beside it).

Goal (issue 27): ratio <= 1.25 on CPU. Exit 1 when over it.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

GOAL = 1.25


def main() -> int:
    """Alternate trials without and with locate; print the ratio and exit 1 over the goal."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--steps", type=int, default=30)
    args = parser.parse_args()

    import torch

    from aorta.runner import RunRequest, run_trials

    torch.set_num_threads(1)
    env = {"AORTA_FSDP_DEVICE": "cpu", "AORTA_FSDP_STEP_CLOCK": "cpu"}
    medians: dict[bool, list[float]] = {False: [], True: []}
    with tempfile.TemporaryDirectory(prefix="aorta-bench-") as tmp:
        for index in range(args.rounds):
            # Alternate which side goes first, so a drift of the machine hits both alike.
            for locate in (False, True) if index % 2 == 0 else (True, False):
                request = RunRequest(
                    workload="fsdp",
                    output_dir=Path(tmp) / f"round_{index}_{locate}",
                    seed=index,
                    steps=args.steps,
                    extra_env=env,
                    locate=locate,
                )
                (result,) = run_trials(request)
                if result.outcome != "passed" or not result.step_times_ms:
                    print("a trial did not pass: no step times to compare", file=sys.stderr)
                    return 1
                medians[locate].append(statistics.median(result.step_times_ms))
    off, on = statistics.median(medians[False]), statistics.median(medians[True])
    paired = statistics.median(b / a for a, b in zip(medians[False], medians[True], strict=True))
    ratio = on / off
    print(
        f"fsdp step time (CPU clock, 1 thread, median of {args.rounds} trials per side): "
        f"off {off:.2f} ms, locate {on:.2f} ms; median of paired ratios {paired:.3f}"
    )
    verdict = "ok" if ratio <= GOAL else "OVER GOAL"
    print(f"locate overhead ratio {ratio:.3f}x (goal <= {GOAL:.2f}x): {verdict}")
    return 0 if ratio <= GOAL else 1


if __name__ == "__main__":
    sys.exit(main())
