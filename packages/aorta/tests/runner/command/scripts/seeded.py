"""A training-script stand-in whose runs differ by seed only if the seed reaches it.

seeded.py STEPS (--hard-coded | --from-env) [--diverge-at K] [--no-loss]

--hard-coded: seed 1337 whatever the trial (as nanoGPT's train.py does); --from-env: the
seed is `int(os.environ.get("AORTA_SEED", "1337"))`, as docs/triage.md shows. Each step prints
a jsonl line whose loss comes from a generator seeded with that seed; from step K on (--diverge-at)
the loss is NaN. --no-loss prints the step lines without a loss (nothing but the log to
compare); with --diverge-at it then prints Megatron's `found NaN in local grad norm` line at
step K and goes on printing the wall-clock time until it is stopped (what follows the failure
differs from run to run). Without --no-loss the first line reports the seed variables the
script saw.
"""

import json
import os
import random
import sys
import time


def main(argv: list[str]) -> int:
    steps = int(argv[0])
    seed = int(os.environ.get("AORTA_SEED", "1337")) if "--from-env" in argv else 1337
    diverge_at = int(argv[argv.index("--diverge-at") + 1]) if "--diverge-at" in argv else None
    with_loss = "--no-loss" not in argv
    rng = random.Random(seed)
    if with_loss:
        seen = {key: os.environ.get(key) for key in ("AORTA_SEED", "PYTHONHASHSEED")}
        print(f"seed variables seen: {json.dumps(seen)}", flush=True)
    for step in range(1, steps + 1):
        line: dict[str, object] = {"step": step, "step_time_ms": 10.0}
        if with_loss:
            diverged = diverge_at is not None and step >= diverge_at
            line["loss"] = float("nan") if diverged else 2.0 / step + rng.random() / 100
        elif step == diverge_at:
            print("found NaN in local grad norm in backward pass", flush=True)
            while True:
                print(f"still running at {time.time()}", flush=True)
                time.sleep(0.01)
        print(json.dumps(line), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
