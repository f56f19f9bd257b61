"""Run upstream oellm-autoexp's own planner on experiment configs and print their jobs as JSON.

Started by `test_upstream_checkout.py` in a subprocess whose PYTHONPATH puts the upstream
checkout first (both projects' packages are named `oellm_autoexp`). Arguments: the config dir,
then config names. Prints one JSON line per name, ``{"name", "jobs": [{"name", "megatron":
[cli tokens] | null, "command": str | null, "sbatch"}]}`` or ``{"name", "error"}`` (the
Megatron tokens are what upstream's `oc.argsmegatron` renders), then a last line
``{"megatron_options": {dest: {...}}}``: upstream's generated description of Megatron's
command line, from which the test builds an argparse parser for our schema.
"""

from __future__ import annotations

import json
import sys
import traceback
from typing import Any


def main(config_dir: str, config_name: str) -> dict[str, Any]:
    from compoconf import asdict
    from oellm_autoexp.orchestrator import build_execution_plan
    from omegaconf import OmegaConf

    from oellm_autoexp.config.loader import load_config_reference
    from oellm_autoexp.config.schema import ConfigSetup

    setup = ConfigSetup(config_name=config_name, config_dir=config_dir, overrides=[])
    root = load_config_reference(config_setup=setup)
    plan = build_execution_plan(root, config_setup=setup)
    resolver = OmegaConf._get_resolver("oc.argsmegatron")  # registered by upstream's backend
    jobs = []
    for job in plan.jobs:
        config = asdict(job.config)
        backend = config.get("backend") or {}
        megatron = None
        if backend.get("class_name") == "MegatronBackend" and resolver is not None:
            args = OmegaConf.create(backend["megatron"])
            megatron = [str(t) for t in _argsmegatron(args)]
        jobs.append(
            {
                "name": config["job"]["name"],
                "megatron": megatron,
                "command": backend.get("command"),
                "sbatch": config["slurm"]["sbatch"],
            }
        )
    return {"jobs": jobs}


def _argsmegatron(args: Any) -> list[str]:
    from omegaconf import OmegaConf

    cfg = OmegaConf.create({"m": args, "out": "${oc.argsmegatron:${m}}"})
    return list(OmegaConf.to_container(cfg, resolve=True)["out"])  # type: ignore[index]


def megatron_options() -> dict[str, Any]:
    from oellm_autoexp.backends.megatron.cli_metadata import (
        MEGATRON_ACTION_SPECS,
        MEGATRON_ARG_METADATA,
    )

    options = {}
    for dest, spec in MEGATRON_ACTION_SPECS.items():
        meta = MEGATRON_ARG_METADATA.get(dest)
        options[dest] = {
            "option_strings": list(spec.option_strings),
            "action": spec.action_type,
            "nargs": spec.nargs,
            "const": spec.const,
            "default": spec.default,
            "type": getattr(getattr(meta, "arg_type", None), "__name__", None),
            "element_type": getattr(getattr(meta, "element_type", None), "__name__", None),
            "choices": list(meta.choices) if meta is not None and meta.choices else None,
        }
    return options


if __name__ == "__main__":
    for config_name in sys.argv[2:]:
        try:
            result = {"name": config_name, **main(sys.argv[1], config_name)}
        except BaseException as exc:
            last = traceback.format_exception_only(type(exc), exc)[-1].strip()
            result = {"name": config_name, "error": last.splitlines()[0][:300]}
        print(json.dumps(result, default=str), flush=True)
    print(json.dumps({"megatron_options": megatron_options()}, default=str))
