"""Plan a 10,000-job Megatron sweep and count how often Megatron's parser runs.

The claim (docs/oellm-autoexp.md, "Megatron backend"): every job's Megatron arguments are
validated, yet Megatron's own parser runs once per argv *shape*, not once per job, so a large
sweep plans in seconds. Uses Megatron-LM's parser when `megatron.training.arguments` imports,
otherwise the test suite's stand-in parser (same structure, 85 options). Prints the plan time
(per 1,000 jobs), the parser runs, and what parsing every job would have cost in the same run.

    python benchmarks/megatron_plan.py [--jobs 10000] [--swept-key]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "packages" / "oellm-autoexp"
STAND_IN = PACKAGE / "tests" / "megatron" / "stand_in"


def _config(path: Path, jobs: int, *, swept_key: bool, out: Path) -> None:
    data: dict[str, Any] = yaml.safe_load((PACKAGE / "examples" / "megatron_gpt.yaml").read_text())
    lrs = [round(1e-5 * (i + 1), 8) for i in range(jobs)]
    data["project"]["base_output_dir"] = str(out)
    data["slurm"]["test_only"] = "never"
    if swept_key:  # the planner then builds one backend per job
        data["backend"]["megatron"]["lr"] = 1e-4
        data["sweep"] = {"axes": {"backend.megatron.lr": lrs}, "name_template": "gpt_{index}"}
    else:
        data["sweep"] = {"axes": {"lr": lrs}, "name_template": "gpt_{index}"}
    path.write_text(yaml.safe_dump(data))


def main() -> int:
    """Run the benchmark and print its figures."""
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("--jobs", type=int, default=10_000)
    cli.add_argument("--swept-key", action="store_true", help="sweep backend.megatron.lr itself")
    ns = cli.parse_args()

    from oellm_autoexp.backends.megatron import schema_from_parser
    from oellm_autoexp.backends.megatron.source import (
        MegatronUnavailableError,
        load_megatron_parser,
    )

    try:
        parser = load_megatron_parser()
        which = "Megatron-LM's parser"
    except MegatronUnavailableError:
        sys.path.insert(0, str(STAND_IN))
        parser = load_megatron_parser()
        which = "the stand-in parser (Megatron-LM not importable here)"
    runs = 0
    real_parse = parser.parse_args

    def counting(args: Any = None, namespace: Any = None) -> Any:
        nonlocal runs
        runs += 1
        return real_parse(args, namespace)

    parser.parse_args = counting  # type: ignore[method-assign]

    from oellm_autoexp.config.loader import load_config
    from oellm_autoexp.planning import build_plan

    with tempfile.TemporaryDirectory() as tmp:
        cfg = Path(tmp) / "megatron_sweep.yaml"
        _config(cfg, ns.jobs, swept_key=ns.swept_key, out=Path(tmp) / "out")
        root = load_config(cfg).root
        start = time.perf_counter()
        result = build_plan(root)
        elapsed = time.perf_counter() - start
        jobs = result.plan.jobs
        command = list(jobs[0].command)
        entry = next(i for i, token in enumerate(command) if token.endswith("pretrain_gpt.py"))
        argv = command[entry + 1 :]  # the Megatron arguments of one job
        start = time.perf_counter()
        for _ in range(200):
            real_parse(argv)
        per_parse = (time.perf_counter() - start) / 200

    options = len(schema_from_parser(parser, origin=which))
    print(f"validated against {which}: {options} destinations")
    print(
        f"build_plan, {len(jobs)} Megatron jobs: {elapsed:.2f} s "
        f"({elapsed / len(jobs) * 1000:.2f} s per 1,000 jobs)"
    )
    print(f"Megatron parser runs: {runs} (one per argv shape), not {len(jobs)}")
    print(
        f"one parse of a job's argv: {per_parse * 1e3:.2f} ms; parsing every job would add "
        f"{per_parse * len(jobs):.1f} s ({per_parse * len(jobs) / elapsed:.1f}x this plan)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
