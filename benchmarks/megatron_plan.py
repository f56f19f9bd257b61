"""Plan a 10,000-job Megatron sweep and count how often Megatron's parser runs.

The claims (docs/oellm-autoexp.md, "Megatron backend"): every job's Megatron arguments are
validated; the argparse check runs once per argv *shape*; Megatron's own `validate_args` runs
once per distinct argument set (with the parser, `--source parser`), or the documented rules
check each set from a dumped schema (`--source schema`). Uses Megatron-LM's parser when
`megatron.training.arguments` imports (e.g. with OELLM_AUTOEXP_MEGATRON_PATH on PYTHONPATH),
otherwise the test suite's stand-in parser. Prints the plan time (per 1,000 jobs), the parser
runs, and what parsing every job costs in the same run.

    python benchmarks/megatron_plan.py [--jobs 10000] [--swept-key] [--source parser|schema]
        [--no-validate-args]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "packages" / "oellm-autoexp"
STAND_IN = PACKAGE / "tests" / "megatron" / "stand_in"
ARGV_SHAPES = 1  # the sweep below changes one value, never which flags a job has


def _config(path: Path, jobs: int, *, swept_key: bool, out: Path, backend: dict[str, Any]) -> None:
    data: dict[str, Any] = yaml.safe_load((PACKAGE / "examples" / "megatron_gpt.yaml").read_text())
    data["backend"].update(backend)
    # above the example's min_lr (3e-5): Megatron's validate_args asserts min_lr <= lr
    lrs = [round(1e-4 + 1e-8 * i, 10) for i in range(jobs)]
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
    cli.add_argument("--source", choices=["parser", "schema"], default="parser")
    cli.add_argument(
        "--no-validate-args", action="store_true", help="skip Megatron's validate_args"
    )
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
        backend: dict[str, Any] = {"validate_args": not ns.no_validate_args}
        if ns.source == "schema":
            schema_file = Path(tmp) / "megatron-args.json"
            schema_file.write_text(schema_from_parser(parser, origin=which).to_json())
            backend.update(arg_source="schema", schema_file=str(schema_file))
            which = f"a schema dumped from {which}"
        _config(cfg, ns.jobs, swept_key=ns.swept_key, out=Path(tmp) / "out", backend=backend)
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
    record = result.plan.validation
    print(
        f"validation record: validated_by={record.get('validated_by')}, "
        f"validate_args={record.get('validate_args')}"
    )
    print(
        f"Megatron parser runs: {runs} (one per argv shape; validate_args checks a "
        f"namespace derived from it per distinct argument set) for {len(jobs)} jobs; "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    print(
        f"one parse of a job's argv: {per_parse * 1e3:.2f} ms; parsing every job would add "
        f"{per_parse * len(jobs):.1f} s ({per_parse * len(jobs) / elapsed:.1f}x this plan)"
    )
    # Every job of this sweep has the same argv shape (only a value differs): one parse.
    ok = runs <= ARGV_SHAPES
    print(f"parser runs {runs} <= {ARGV_SHAPES} argv shape(s): {'ok' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
