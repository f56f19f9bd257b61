"""Cost of running Megatron-LM's own validate_args once per distinct argument set.

The claim (docs/oellm-autoexp.md, "Start-up checks"): with Megatron-LM importable, each
distinct argument set of a plan goes through `validate_args` (plus Megatron's micro-batch
calculator); this measures the time per set, and parsing alone for comparison, in one run.
Needs a Megatron-LM checkout that imports here:

    OELLM_AUTOEXP_MEGATRON_PATH=/path/to/Megatron-LM python benchmarks/megatron_validate_args.py
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

BASE = [
    "--num-layers=2",
    "--hidden-size=64",
    "--num-attention-heads=4",
    "--seq-length=128",
    "--max-position-embeddings=128",
    "--micro-batch-size=2",
    "--global-batch-size=16",
    "--train-iters=10",
    "--mock-data",
    "--tokenizer-type=NullTokenizer",
    "--vocab-size=1000",
]


def main() -> int:
    """Print wall/CPU ms per distinct argument set and the load average."""
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("--sets", type=int, default=1000)
    ns = cli.parse_args()
    checkout = os.environ.get("OELLM_AUTOEXP_MEGATRON_PATH")
    if not checkout:
        print("set OELLM_AUTOEXP_MEGATRON_PATH to a Megatron-LM checkout", file=sys.stderr)
        return 2
    sys.path.insert(0, checkout)
    from oellm_autoexp.backends.megatron.argspec import schema_from_parser
    from oellm_autoexp.backends.megatron.runtime import namespace_for, validate_with_megatron
    from oellm_autoexp.backends.megatron.source import load_megatron_parser

    started = time.perf_counter()
    parser = load_megatron_parser()
    print(f"import + build parser: {time.perf_counter() - started:.1f} s")
    module = "megatron.training.arguments"

    schema = schema_from_parser(parser, origin="benchmark")

    def lr(i: int) -> float:
        return 1e-4 + 1e-8 * i

    def argv(i: int) -> list[str]:
        return [*BASE, f"--lr={lr(i)!r}"]

    # What the planner does: one parse per argv shape, then the namespace of each distinct
    # argument set is derived from it (runtime.namespace_for) and validated.
    shape = parser.parse_args(argv(-1))

    def validate(i: int) -> Any:
        namespace = namespace_for(shape, {"lr": lr(i)}, schema)
        return validate_with_megatron(module, namespace, world_size=8, env={})

    for i in range(20):  # warm-up
        validate(-i - 2)
    wall, cpu = time.perf_counter(), time.process_time()
    for i in range(ns.sets):
        verdict = validate(i)
        assert verdict is not None and verdict.rejection is None, verdict
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    parse = time.perf_counter()
    for i in range(ns.sets):
        parser.parse_args(argv(i))
    parse = time.perf_counter() - parse
    per = 1000 / ns.sets
    print(
        f"{ns.sets} distinct sets: {wall * per:.2f} ms wall, {cpu * per:.2f} ms CPU per set "
        f"(parsing each argv instead would cost {parse * per:.2f} ms per set); "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
