"""`migrate` on upstream's own experiment configs, compared with upstream's own planner.

Needs an OpenEuroLLM/oellm-autoexp checkout: ``AUTOEXP_UPSTREAM_DIR=/path/to/oellm-autoexp``
(its ``config/experiments`` are the inputs) and, on the same PYTHONPATH as the checkout, the
packages upstream imports that this project does not ship (``tqdm tyro pydantic jsonschema``;
``AUTOEXP_UPSTREAM_PYTHONPATH=/dir`` where ``pip install --target /dir`` put them). Upstream's
planner runs in a subprocess (`upstream_driver.py`); for every experiment it plans, the
migrated config must plan the same jobs (count, names, order) and, for Megatron jobs, the same
Megatron arguments as upstream's ``oc.argsmegatron`` renders (``--opt value`` there, ``--opt=value``
here: compared as option -> values). Our Megatron schema is built from upstream's generated
description of Megatron's command line, since Megatron-LM itself is not installed here.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from oellm_autoexp.config.loader import load_config
from oellm_autoexp.config.yaml_text import dump_text
from oellm_autoexp.errors import ConfigError
from oellm_autoexp.migrate import migrate_file

UPSTREAM = os.environ.get("AUTOEXP_UPSTREAM_DIR", "")
DRIVER = Path(__file__).with_name("upstream_driver.py")
# Upstream's presets read these without defaults; both planners see the same values.
ENV = {
    "HF_HOME": "/hf",
    "OELLM_DATASETS_TOKENIZED_DIR": "/datasets",
    "DATA_DIR": "/data",
    "OUTPUT_DIR": "./output",
    "OELLM_SITEPACKAGES": "/site-packages",
    "CONTAINER_CACHE_DIR": "/containers",
    "USER": "user",
    "HOME": "/home/user",
}

# Where upstream's own rendering contradicts its config, the migrated config keeps what the
# config says. (experiment, option) -> why. Checked: each entry must still differ.
KNOWN_DIFFERENCES = {
    ("experiments/korbi/open_sci_ref_1T_leonardo", "--wandb-exp-name"): (
        "wandb_exp_name is ${job.name}, whose ${oc.select:backend.megatron.aux.dataset,''} and "
        "aux.model_name upstream resolves inside the detached copy of backend.megatron its "
        "oc.argsmegatron receives: they come out empty, and all four runs share one W&B name "
        "(opensciref_clLEONARDO_D_schedWSD_m_...); ours writes the job's name"
    ),
}

pytestmark = pytest.mark.skipif(
    not UPSTREAM,
    reason="no upstream checkout: set AUTOEXP_UPSTREAM_DIR to an OpenEuroLLM/oellm-autoexp "
    "checkout (and AUTOEXP_UPSTREAM_PYTHONPATH to its extra packages) to compare migrate with "
    "upstream's own planner",
)


def _experiments() -> list[str]:
    if not UPSTREAM:
        return []
    root = Path(UPSTREAM) / "config"
    return sorted(
        p.relative_to(root).with_suffix("").as_posix()
        for p in (root / "experiments").rglob("*.yaml")
    )


@pytest.fixture(scope="module")
def environment() -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in ENV}
    os.environ.update(ENV)
    yield
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture(scope="module")
def upstream(environment: None, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Upstream's planner over every experiment (one process): name -> result, + options."""
    paths = [UPSTREAM, os.environ.get("AUTOEXP_UPSTREAM_PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}
    work = tmp_path_factory.mktemp("upstream")
    done = subprocess.run(
        [sys.executable, str(DRIVER), str(Path(UPSTREAM) / "config"), *_experiments()],
        capture_output=True,
        text=True,
        env=env,
        cwd=work,
        timeout=1800,
        check=False,
    )
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    if not lines or "megatron_options" not in lines[-1]:
        pytest.fail(f"upstream's planner did not run: {done.stderr[-800:]}")
    return {
        "results": {line["name"]: line for line in lines[:-1]},
        "options": lines[-1]["megatron_options"],
    }


@pytest.fixture(scope="module")
def schema_file(upstream: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Our Megatron argument schema, from upstream's description of Megatron's command line."""
    from oellm_autoexp.backends.megatron.argspec import schema_from_parser

    types = {"int": int, "float": float, "str": str}
    parser = argparse.ArgumentParser(add_help=False)
    for dest, spec in upstream["options"].items():
        if spec["action"] in ("store_true", "store_false"):
            parser.add_argument(
                *spec["option_strings"], dest=dest, action=spec["action"], default=spec["default"]
            )
            continue
        if spec["nargs"] == 0:  # `--x/--no-x`, a BooleanOptionalAction
            positive = [o for o in spec["option_strings"] if not o.startswith("--no-")]
            parser.add_argument(
                *positive,
                dest=dest,
                action=argparse.BooleanOptionalAction,
                default=spec["default"],
            )
            continue
        kind = types.get(spec["element_type"] or spec["type"] or "")
        parser.add_argument(
            *spec["option_strings"],
            dest=dest,
            nargs=spec["nargs"],
            default=spec["default"],
            type=kind,
            # enum-typed options (attention_backend) list enum values; their type maps names
            choices=spec["choices"]
            if all(isinstance(c, str) for c in spec["choices"] or ())
            else None,
        )
    path = tmp_path_factory.mktemp("schema") / "megatron_schema.json"
    path.write_text(schema_from_parser(parser, origin="upstream cli_metadata").to_json())
    return path


def _options(tokens: list[str]) -> dict[str, list[str]]:
    """``--a 1 --b --c=x y`` -> {--a: [1], --b: [], --c: [x, y]} (values as numbers if numeric)."""
    out: dict[str, list[str]] = {}
    current: list[str] | None = None
    for token in tokens:
        if token.startswith("--"):
            option, _, value = token.partition("=")
            current = out.setdefault(option, [])
            if value:
                current.append(_number(value))
        elif current is not None:
            current.append(_number(token))
    return out


def _defaults(options: dict[str, Any]) -> dict[str, list[Any]]:
    """Option -> its default as `_options` writes values (upstream writes some list options at
    their default; Megatron reads the same value either way, and ours leaves defaults out)."""
    out: dict[str, list[Any]] = {}
    for spec in options.values():
        default = spec["default"]
        if spec["action"] == "store" and default is not None and default is not False:
            values = default if isinstance(default, list) else [default]
            out[spec["option_strings"][0]] = [_number(str(v)) for v in values]
    return out


def _number(text: str) -> Any:
    try:
        return float(text)
    except ValueError:
        return text


@pytest.mark.parametrize("name", _experiments())
def test_migrated_config_plans_upstreams_jobs_with_upstreams_arguments(
    name: str, upstream: dict[str, Any], schema_file: Path, tmp_path: Path
) -> None:
    from oellm_autoexp.planning import build_plan

    result = upstream["results"][name]
    if "error" in result:
        pytest.skip(f"upstream's own planner refuses it: {result['error']}")
    source = Path(UPSTREAM) / "config" / f"{name}.yaml"
    try:
        migration = migrate_file(source)
    except ConfigError as exc:
        # only a backend without a counterpart here may stop the translation
        assert exc.key == "backend.class_name", str(exc)
        pytest.skip(f"not translated: {exc.detail}")
    jobs = result["jobs"]
    assert migration.jobs + migration.dependent == len(jobs), migration.notes
    ours_path = tmp_path / "ours.yaml"
    ours_path.write_text(dump_text(migration.config))
    megatron = migration.config["backend"]["class_name"] == "MegatronBackend"
    overrides = ["+backend.arg_source=schema", f"+backend.schema_file={schema_file}"]
    root = load_config(ours_path, overrides if megatron else []).root
    try:
        plan = build_plan(root, cwd=tmp_path).plan
    except ConfigError as exc:
        # ours checks Megatron's start-up rules at plan time; upstream's job would fail there
        assert "Megatron would refuse" in exc.detail, str(exc)
        pytest.skip(f"ours refuses it at plan time: {exc}")
    names = [job.name for job in plan.jobs]
    if any(n.startswith("job.name: not unique") for n in migration.notes):
        names = [name.rsplit("_", 1)[0] for name in names]  # ours appends _<index>
    # Upstream's jobs in order, each of ours matched to the next one of its name (stages may
    # share a name; jobs waiting on a sibling stage are left out, the rest keep their order).
    pending = iter(jobs)
    matched = [next((j for j in pending if j["name"] == name), None) for name in names]
    assert None not in matched, (names, [j["name"] for j in jobs])
    if migration.dependent == 0:
        assert names == [j["name"] for j in jobs]
    for job, theirs in zip(plan.jobs, matched, strict=True):
        assert theirs is not None
        if megatron:
            entry = root.backend.entrypoint
            argv = list(job.command)
            ours = argv[argv.index(entry) + 1 :]
            at_default = _defaults(upstream["options"])
            expected = {
                k: v for k, v in _options(theirs["megatron"]).items() if at_default.get(k) != v
            }
            got = _options(ours)
            for experiment, option in KNOWN_DIFFERENCES:
                if experiment == name:
                    assert got.pop(option) != expected.pop(option), f"{option} agrees now"
            assert got == expected, job.name
        else:
            assert list(job.command)[-1] == theirs["command"]
        # the same SBATCH directives (those our planner sets itself aside: output, job name)
        wanted = {  # ours spells directives as sbatch does; a true flag has no value
            k.replace("_", "-"): "" if v is True else str(v)
            for k, v in theirs["sbatch"].items()
            if v not in (None, False) and k not in ("output", "error", "job_name", "array")
        }
        ours_sbatch = {k: job.sbatch.get(k) for k in wanted}
        assert ours_sbatch == wanted, job.name
