"""What Megatron would reject at start-up is rejected at plan time.

Two paths: Megatron's own `validate_args` (here the stand-in module, which has the same shape:
asserts over ``args.<dest>``; the real Megatron-LM in `test_real_megatron.py`) and the rules
table checked from a dumped schema, which is what CI runs. Plus the smaller items of the same
issue: an explicit `megatron_path` that fails, the validation record in plan.json, `extra_args`
that repeat a configured key, values equal to Megatron's defaults, `--no-*` flag twins.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import compoconf
import pytest

from oellm_autoexp.backends.base import BackendInterface, JobContext
from oellm_autoexp.backends.megatron import MegatronBackend, MegatronBackendConfig
from oellm_autoexp.backends.megatron.argspec import ArgSchema
from oellm_autoexp.backends.megatron.rules import check_rules
from oellm_autoexp.backends.megatron.runtime import namespace_for
from oellm_autoexp.errors import ConfigError

STAND_IN = Path(__file__).resolve().with_name("stand_in")

ARGS = {
    "num_layers": 2,
    "hidden_size": 64,
    "seq_length": 128,
    "micro_batch_size": 2,
    "global_batch_size": 16,
    "train_iters": 10,
    "lr": 1.0e-3,
    "bf16": True,
}


def _backend(megatron: dict[str, Any] | None = None, **fields: Any) -> MegatronBackend:
    data = {"class_name": "MegatronBackend", "megatron": {**ARGS, **(megatron or {})}, **fields}
    cfg = compoconf.parse_config(BackendInterface.cfgtype, data)
    assert isinstance(cfg, MegatronBackendConfig)
    backend = cfg.instantiate(BackendInterface)  # type: ignore[no-untyped-call]
    assert isinstance(backend, MegatronBackend)
    return backend


def _job(
    params: dict[str, Any] | None = None, *, index: int = 0, world: int | None = 8
) -> JobContext:
    return JobContext(
        job_id=f"j{index:04d}",
        name=f"gpt_{index}",
        index=index,
        params=dict(params or {}),
        output_dir=Path(f"/scratch/gpt_{index}"),
        project="gpt",
        world_size=world,
    )


def _rejected(backend: MegatronBackend, *jobs: JobContext) -> ConfigError:
    with pytest.raises(ConfigError) as err:
        backend.validate(list(jobs) or [_job()])
    assert "\n" not in str(err.value)
    return err.value


def _megatron_argv(argv: tuple[str, ...]) -> list[str]:
    return list(argv[argv.index("pretrain_gpt.py") + 1 :])


# --- the rules table (the dumped-schema path) -------------------------------------------------


def test_rules_refuse_options_that_exclude_each_other(schema: ArgSchema) -> None:
    both = check_rules({**ARGS, "fp16": True}, schema, world_size=8)
    assert both is not None and both.dest == "bf16" and "fp16 and bf16" in both.message
    warmup = check_rules(
        {**ARGS, "lr_warmup_fraction": 0.1, "lr_warmup_iters": 5}, schema, world_size=8
    )
    assert warmup is not None and warmup.dest == "lr_warmup_iters"
    # the warm-up iterations at their default (0) do not count as set
    assert check_rules({**ARGS, "lr_warmup_fraction": 0.1}, schema, world_size=8) is None
    floor = check_rules({**ARGS, "min_lr": 1e-2}, schema, world_size=8)
    assert floor is not None and floor.dest == "min_lr" and "min_lr <= lr" in floor.message


def test_rules_refuse_a_sequence_longer_than_the_position_embeddings(schema: ArgSchema) -> None:
    longer = check_rules(
        {**ARGS, "seq_length": 4096, "max_position_embeddings": 2048}, schema, world_size=8
    )
    assert longer is not None and longer.dest == "seq_length"
    assert longer.message == (
        "seq_length 4096 is above max_position_embeddings 2048; Megatron requires "
        "max_position_embeddings >= seq_length"
    )
    assert "\n" not in longer.message
    equal = {**ARGS, "seq_length": 2048, "max_position_embeddings": 2048}
    assert check_rules(equal, schema, world_size=8) is None
    # only max_position_embeddings configured (seq_length from ARGS, 128): fine
    assert check_rules({**ARGS, "max_position_embeddings": 512}, schema, world_size=8) is None


def test_rules_check_parallel_sizes_and_batch_against_the_world_size(schema: ArgSchema) -> None:
    tp3 = check_rules({**ARGS, "tensor_model_parallel_size": 3}, schema, world_size=8)
    assert tp3 is not None and tp3.dest == "tensor_model_parallel_size"
    assert "= 3 does not divide the world size 8" in tp3.message
    # TP 2 on 8 processes: data-parallel size 4, so 16 = 2 x 4 x 2 is fine, 12 is not
    assert check_rules({**ARGS, "tensor_model_parallel_size": 2}, schema, world_size=8) is None
    batch = check_rules(
        {**ARGS, "tensor_model_parallel_size": 2, "global_batch_size": 12}, schema, world_size=8
    )
    assert batch is not None and batch.dest == "global_batch_size"
    assert "micro_batch_size 2 x data-parallel size 4 = 8" in batch.message
    # world size unknown: only what holds for every world size (a multiple of the micro batch)
    assert check_rules({**ARGS, "global_batch_size": 7}, schema, world_size=None) is not None
    assert check_rules({**ARGS, "global_batch_size": 12}, schema, world_size=None) is None


def test_dumped_schema_path_rejects_with_job_name_and_key(
    schema_file: Path, megatron_absent: None
) -> None:
    backend = _backend({"fp16": True}, arg_source="schema", schema_file=str(schema_file))
    err = _rejected(backend)
    assert err.key == "backend.megatron.bf16"
    assert "would refuse job gpt_0 at start-up (world size 8): fp16 and bf16" in err.detail
    # the world size is per job (nodes can be swept): TP 8 fits 8 processes but not 4
    tp8 = _backend(
        {"tensor_model_parallel_size": 8, "global_batch_size": 2},
        arg_source="schema",
        schema_file=str(schema_file),
    )
    tp8.validate([_job(world=8)])
    err = _rejected(tp8, _job(world=8), _job(index=1, world=4))
    assert err.key == "backend.megatron.tensor_model_parallel_size"
    assert "job gpt_1" in err.detail and "world size 4" in err.detail


# --- Megatron's own validate_args (stand-in module) --------------------------------------------


def test_validate_args_assertion_is_one_line_with_job_and_key(megatron_importable: Path) -> None:
    err = _rejected(_backend({"fp16": True}))
    assert err.key == "backend.megatron.bf16"  # the configured argument on the failing assert
    assert err.detail == (
        "Megatron's validate_args rejects job gpt_0 (world size 8): assert not args.bf16"
    )
    warmup = _rejected(_backend({"lr_warmup_fraction": 0.1, "lr_warmup_iters": 5}))
    assert warmup.key == "backend.megatron.lr_warmup_iters"
    assert warmup.detail.endswith("can only specify one of lr-warmup-fraction and lr-warmup-iters")


def test_world_size_comes_from_the_job_and_blames_the_slurm_settings(
    megatron_importable: Path,
) -> None:
    backend = _backend({"tensor_model_parallel_size": 3, "global_batch_size": 12})
    backend.validate([_job(world=6)])
    err = _rejected(backend, _job(world=6), _job(index=1, world=8))
    assert err.key == "slurm.sbatch"
    assert "job gpt_1 (world size 8): world size (8) is not divisible" in err.detail


def test_batch_rule_is_checked_where_megatron_has_no_calculator(megatron_importable: Path) -> None:
    # the stand-in has no megatron.core micro-batch calculator: the documented rule steps in
    err = _rejected(_backend({"global_batch_size": 12}))
    assert err.key == "backend.megatron.global_batch_size"
    assert "not a multiple of micro_batch_size 2 x data-parallel size 8 = 16" in err.detail


def test_validate_args_runs_once_per_distinct_argument_set(
    megatron_importable: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = _backend()
    backend.argument_source()
    module = sys.modules["megatron.training.arguments"]
    seen: list[tuple[int, float]] = []
    real = module.validate_args

    def counting(args: Any, defaults: Any = None) -> Any:
        seen.append((args.world_size, args.lr))
        return real(args, defaults or {})

    monkeypatch.setattr(module, "validate_args", counting)
    parser = backend.argument_source().parser
    assert parser is not None
    parses: list[Any] = []
    real_parse = parser.parse_args
    monkeypatch.setattr(parser, "parse_args", lambda a: parses.append(a) or real_parse(a))
    # 4 learning rates x 5 seeds (free params: same argv) x 2 world sizes = 40 jobs, 8 sets
    jobs = [
        _job({"backend.megatron.lr": lr, "seed": seed}, index=i, world=world)
        for i, (lr, seed, world) in enumerate(
            (lr, seed, world)
            for lr in (1e-4, 2e-4, 3e-4, 4e-4)
            for seed in range(5)
            for world in (4, 8)
        )
    ]
    backend.validate(jobs)
    assert sorted(seen) == sorted({(w, lr) for lr in (1e-4, 2e-4, 3e-4, 4e-4) for w in (4, 8)})
    for job in jobs:  # building the commands afterwards validates nothing again
        backend.build_launch(job)
    assert len(seen) == 8
    assert len(parses) == 1  # one argv shape: each set's namespace is derived, not re-parsed


def test_derived_namespace_is_what_megatrons_parser_returns(megatron_importable: Path) -> None:
    backend = _backend({"data_path": [0.5, "/a", 0.5, "/b"], "attention_backend": "flash"})
    source = backend.argument_source()
    assert source.parser is not None
    base = _job({"backend.megatron.lr": 1e-4})
    backend.validate([base])
    (shape,) = source.parsed_shapes
    for values in (
        {"lr": 3e-4, "micro_batch_size": 4, "global_batch_size": 32},
        {"lr": 1.5e-3, "data_path": [0.25, "/c", 0.75, "/d"], "seq_length": 64},
    ):
        job = _job({f"backend.megatron.{k}": v for k, v in values.items()}, index=1)
        argv = _megatron_argv(backend.build_launch(job).argv)
        normalised = source.argv_memo[next(reversed(source.argv_memo))][1]
        derived = namespace_for(source.parsed_shapes[shape], normalised, source.schema)
        assert vars(derived) == vars(source.parser.parse_args(argv))


def test_megatron_output_is_captured_and_logged(
    megatron_importable: Path, capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO", logger="oellm_autoexp.megatron")
    _backend({"yarn_correction_range_round_to_int": False}).validate([_job()])
    out, err = capfd.readouterr()
    assert "stand-in Megatron" not in out + err
    logged = [r.getMessage() for r in caplog.records]
    assert any("Apex is not installed" in m for m in logged)  # import-time warning
    assert any("YaRN correction range is not rounded" in m for m in logged)  # validate_args


# --- sources, provenance, extra_args, default values -------------------------------------------


def test_explicit_megatron_path_that_fails_is_an_error_not_a_fallback(
    tmp_path: Path, schema_file: Path, megatron_absent: None
) -> None:
    backend = _backend(
        megatron_path=str(tmp_path / "no-megatron-here"), schema_file=str(schema_file)
    )
    with pytest.raises(ConfigError) as err:
        backend.argument_source()
    assert err.value.key == "backend.megatron_path"
    assert "no fallback to schema_file" in err.value.detail


def test_validation_record_names_schema_file_or_megatron_commit(
    tmp_path: Path, schema_file: Path, megatron_absent: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    by_schema = _backend(arg_source="schema", schema_file=str(schema_file)).validation_record()
    assert by_schema["validated_by"] == "schema_file"
    assert by_schema["schema_file"] == str(schema_file.resolve())
    assert len(by_schema["schema_sha256"]) == 64
    # a Megatron checkout that is a git tree: its commit is recorded
    checkout = tmp_path / "Megatron-LM"
    shutil.copytree(STAND_IN, checkout, ignore=shutil.ignore_patterns("__pycache__"))
    git = ["git", "-C", str(checkout), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "checkout"], check=True)
    head = subprocess.run(
        [*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()
    monkeypatch.setattr(sys, "path", list(sys.path))
    record = _backend(megatron_path=str(checkout)).validation_record()
    assert record["validated_by"] == "megatron"
    assert record["megatron_commit"] == head
    assert record["validate_args"] is True


def test_extra_args_repeating_a_configured_key_is_an_error(megatron_importable: Path) -> None:
    err = _rejected(_backend(extra_args=["--vocab-size", "64", "--num-layers=4"]))
    assert err.key == "backend.extra_args[2]"
    assert "--num-layers repeats backend.megatron.num_layers" in err.detail
    # an option that is not configured is fine
    _backend(extra_args=["--vocab-size", "1000"]).validate([_job()])
    flag = _rejected(_backend(extra_args=["--bf16"]))
    assert flag.key == "backend.extra_args[0]"


def test_defaults_of_list_options_and_no_flag_twins_are_accepted(
    megatron_importable: Path, schema_file: Path
) -> None:
    values = {
        "cuda_graph_modules": [],  # nargs="+" whose default is []
        "moe_aux_loss_coeff": 0.0,  # nargs="+" whose default is the scalar 0.0
        "yarn_correction_range_round_to_int": False,  # --no-... twin of a store_true
    }
    for source in ({}, {"arg_source": "schema", "schema_file": str(schema_file)}):
        backend = _backend(values, **source)
        argv = backend.build_launch(_job()).argv
        assert "--no-yarn-correction-range-round-to-int" in argv
        assert not any(a.startswith(("--cuda-graph-modules", "--moe-aux")) for a in argv)
    parser = _backend().argument_source().parser
    assert parser is not None
    coeff = _backend({"moe_aux_loss_coeff": 0.01}).build_launch(_job()).argv
    assert coeff[coeff.index("--moe-aux-loss-coeff") + 1] == "0.01"
    parsed = parser.parse_args(_megatron_argv(coeff))
    assert parsed.moe_aux_loss_coeff == [0.01]
    flags = _backend({"yarn_correction_range_round_to_int": False}).build_launch(_job()).argv
    assert parser.parse_args(_megatron_argv(flags)).yarn_correction_range_round_to_int is False


# --- end to end through the CLI ------------------------------------------------------------------

CONFIG = """\
project: {{name: gpt, base_output_dir: {root}}}
backend:
  class_name: MegatronBackend
  launcher: [torchrun]
  megatron: {{num_layers: 2, hidden_size: 64, seq_length: 128, micro_batch_size: 2,
             global_batch_size: 16, train_iters: 10, lr: 1.0e-3, bf16: true{extra}}}
sweep: {{axes: {{slurm.sbatch.nodes: [1, 2]}}, name_template: "gpt_n{{slurm_sbatch_nodes}}"}}
slurm:
  sbatch: {{gres: "gpu:4", ntasks_per_node: 1}}
  distributed: {{mode: torchrun}}
  test_only: never
"""


def _plan(tmp_path: Path, extra: str, *flags: str) -> subprocess.CompletedProcess[str]:
    config = tmp_path / "gpt.yaml"
    config.write_text(CONFIG.format(root=tmp_path / "out", extra=extra), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(STAND_IN)}
    return subprocess.run(
        [sys.executable, "-m", "oellm_autoexp.cli", *flags, "plan", str(config)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_cli_rejects_at_plan_time_with_one_line_and_shows_megatron_output_with_v(
    tmp_path: Path,
) -> None:
    # TP 8 fits the 2-node job (8 GPUs) but not the 1-node one (4 GPUs)
    done = _plan(tmp_path, ", tensor_model_parallel_size: 8")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("oellm-autoexp: error: ")
    assert "gpt.yaml: slurm.sbatch: Megatron's validate_args rejects job gpt_n1 (world size 4)" in (
        done.stderr
    )
    verbose = _plan(tmp_path, ", tensor_model_parallel_size: 8", "-v")
    assert "Apex is not installed" in verbose.stderr
    assert verbose.stderr.strip().splitlines()[-1] == done.stderr.strip()


def test_cli_plan_json_records_what_validated_the_plan(tmp_path: Path) -> None:
    done = _plan(tmp_path, "")
    assert done.returncode == 0, done.stderr
    (plan_json,) = (tmp_path / "out" / "plans").glob("*/plan.json")
    record = json.loads(plan_json.read_text())["validation"]
    assert record["validated_by"] == "megatron"
    assert record["module"] == "megatron.training.arguments"
    assert record["module_file"].startswith(str(STAND_IN))


def test_a_class_name_the_sweep_cannot_switch_is_one_line_with_its_key(tmp_path: Path) -> None:
    from oellm_autoexp.config.loader import load_config
    from oellm_autoexp.planning import build_plan

    config = tmp_path / "c.yaml"
    config.write_text(
        json.dumps(
            {
                "project": {"name": "p", "base_output_dir": str(tmp_path)},
                "backend": {"class_name": "CommandBackend", "argv": ["echo"]},
                "sweep": {"axes": {"backend.class_name": ["MegatronBackendx"]}},
            }
        )
    )
    with pytest.raises(ConfigError) as err:
        build_plan(load_config(str(config), []).root)
    assert err.value.key == "backend.class_name"
    assert err.value.detail.startswith("class_name 'MegatronBackendx' does not name CommandBackend")
