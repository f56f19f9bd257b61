"""MegatronBackend through the compoconf registry: launch commands, sweeps, sources, errors."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import compoconf
import pytest

from oellm_autoexp.backends.base import BackendInterface, JobContext
from oellm_autoexp.backends.megatron import MegatronBackend, MegatronBackendConfig
from oellm_autoexp.errors import ConfigError

STAND_IN = Path(__file__).resolve().with_name("stand_in")


def _backend(**fields: Any) -> MegatronBackend:
    data = {"class_name": "MegatronBackend", **fields}
    cfg = compoconf.parse_config(BackendInterface.cfgtype, data)
    assert isinstance(cfg, MegatronBackendConfig)
    backend = cfg.instantiate(BackendInterface)  # type: ignore[no-untyped-call]
    assert isinstance(backend, MegatronBackend)
    return backend


def _job(params: Mapping[str, Any] | None = None, *, index: int = 0) -> JobContext:
    return JobContext(
        job_id=f"j{index:04d}",
        name=f"gpt_{index}",
        index=index,
        params=dict(params or {}),
        output_dir=Path(f"/scratch/runs/gpt_{index}"),
        project="gpt",
    )


BASE = {
    "entrypoint": "/opt/Megatron-LM/pretrain_gpt.py",
    "launcher": ["torchrun", "--nproc-per-node=4", "--rdzv-id={job_id}"],
    "env": {"CUDA_DEVICE_MAX_CONNECTIONS": "1", "RUN_NAME": "{name}"},
    "megatron": {
        "num_layers": 2,
        "hidden_size": 128,
        "lr": 3.0e-4,
        "bf16": True,
        "check_for_nan_in_loss_and_grad": False,
        "save": "{output_dir}/checkpoints",
        "data_path": [0.5, "/data/a", 0.5, "/data/b"],
        "load": None,
    },
}


def test_launch_command_is_launcher_entrypoint_and_serialised_args(
    megatron_importable: Path,
) -> None:
    backend = _backend(**BASE)
    job = _job()
    backend.validate([job])
    launch = backend.build_launch(job)
    assert launch.argv == (
        "torchrun",
        "--nproc-per-node=4",
        "--rdzv-id=j0000",
        "/opt/Megatron-LM/pretrain_gpt.py",
        "--num-layers=2",
        "--hidden-size=128",
        "--lr=0.0003",
        "--bf16",
        "--no-check-for-nan-in-loss-and-grad",
        "--save=/scratch/runs/gpt_0/checkpoints",
        "--data-path",
        "0.5",
        "/data/a",
        "0.5",
        "/data/b",
    )
    assert launch.env == {"CUDA_DEVICE_MAX_CONNECTIONS": "1", "RUN_NAME": "gpt_0"}
    assert backend.argument_source().parser is not None  # checked by the (stand-in) real parser


def test_sweep_params_override_config_args_per_job(megatron_importable: Path) -> None:
    backend = _backend(**BASE)
    jobs = [
        _job({"backend.megatron.lr": lr, "slurm.time": "1:00:00"}, index=i)
        for i, lr in enumerate([1e-4, 3e-3])
    ]
    backend.validate(jobs)
    lrs = [[a for a in backend.build_launch(j).argv if a.startswith("--lr=")] for j in jobs]
    assert lrs == [["--lr=0.0001"], ["--lr=0.003"]]


def test_bad_sweep_value_names_the_key_and_the_job(megatron_importable: Path) -> None:
    backend = _backend(**BASE)
    jobs = [
        _job({"backend.megatron.optimizer": "adam"}, index=0),
        _job({"backend.megatron.optimizer": "adamw"}, index=1),
    ]
    with pytest.raises(ConfigError) as err:
        backend.validate(jobs)
    assert err.value.key == "backend.megatron.optimizer"
    assert "'adamw' is not a valid choice for --optimizer" in str(err.value)
    assert "(the value of job gpt_1)" in str(err.value)


def test_typo_in_config_suggests_megatron_name(megatron_importable: Path) -> None:
    backend = _backend(megatron={"hiden_size": 64})
    with pytest.raises(ConfigError) as err:
        backend.validate([_job()])
    assert str(err.value) == (
        "backend.megatron.hiden_size: unknown Megatron argument 'hiden_size'; did you mean "
        "'hidden_size'? (checked against Megatron-LM parser (megatron.training.arguments))"
    )


def test_unknown_placeholder_is_a_config_error(megatron_importable: Path) -> None:
    backend = _backend(megatron={"save": "{outdir}/ckpt"})
    with pytest.raises(ConfigError) as err:
        backend.validate([_job()])
    assert err.value.key == "backend.megatron.save"
    assert "unknown placeholder {outdir}" in str(err.value) and "output_dir" in str(err.value)


def test_extra_args_are_checked_by_megatron_parser(megatron_importable: Path) -> None:
    ok = _backend(megatron={"num_layers": 2}, extra_args=["--fp16"])
    ok.validate([_job()])
    assert ok.build_launch(_job()).argv[-2:] == ("--num-layers=2", "--fp16")
    bad = _backend(megatron={"num_layers": 2}, extra_args=["--fp61"])
    with pytest.raises(ConfigError) as err:
        bad.validate([_job()])
    assert err.value.key == "backend.extra_args"
    assert "unrecognized arguments: --fp61" in str(err.value)


def test_without_megatron_or_schema_planning_stops_with_guidance(megatron_absent: None) -> None:
    backend = _backend(megatron={"num_layers": 2})
    with pytest.raises(ConfigError) as err:
        backend.validate([_job()])
    assert err.value.key == "backend.schema_file"
    assert "cannot import megatron.training.arguments" in str(err.value)
    assert "dump-schema" in str(err.value)


def test_arg_source_megatron_requires_megatron(megatron_absent: None) -> None:
    with pytest.raises(ConfigError) as err:
        _backend(arg_source="megatron").validate([_job()])
    assert err.value.key == "backend.arg_source"
    with pytest.raises(ConfigError, match="expected 'auto', 'megatron' or 'schema'"):
        _backend(arg_source="sometimes").validate([_job()])


def test_dumped_schema_validates_like_the_parser_on_a_host_without_megatron(
    tmp_path: Path, megatron_absent: None
) -> None:
    schema_file = tmp_path / "megatron-args.json"
    env = {**os.environ, "PYTHONPATH": str(STAND_IN)}
    cmd = [sys.executable, "-m", "oellm_autoexp.backends.megatron", "dump-schema", str(schema_file)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert "wrote 91 Megatron arguments" in done.stdout
    again = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    assert again.returncode == 2 and "already exists" in again.stderr

    backend = _backend(**BASE, arg_source="schema", schema_file=str(schema_file))
    job = _job()
    backend.validate([job])
    assert backend.argument_source().parser is None
    argv = backend.build_launch(job).argv
    assert "--no-check-for-nan-in-loss-and-grad" in argv and "--lr=0.0003" in argv
    with pytest.raises(ConfigError, match="did you mean 'hidden_size'"):
        _backend(megatron={"hidden_sise": 3}, schema_file=str(schema_file)).validate([job])


def test_dump_schema_without_megatron_is_exit_2(tmp_path: Path, megatron_absent: None) -> None:
    cmd = [
        sys.executable,
        "-m",
        "oellm_autoexp.backends.megatron",
        "dump-schema",
        str(tmp_path / "s.json"),
    ]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 2
    assert done.stderr.startswith("error: cannot import megatron.training.arguments")
    assert "Traceback" not in done.stderr


def test_whole_placeholder_keeps_the_sweep_value_type(megatron_importable: Path) -> None:
    backend = _backend(megatron={"lr": "{lr}", "wandb_exp_name": "{name}-lr{lr}"})
    job = _job({"lr": 3e-4})
    backend.validate([job])
    assert backend.build_launch(job).argv[-2:] == ("--lr=0.0003", "--wandb-exp-name=gpt_0-lr0.0003")
    with pytest.raises(ConfigError) as err:
        backend.validate([_job({"lr": "fast"})])
    assert err.value.key == "backend.megatron.lr"
    assert "expected a number for --lr, got 'fast' (the value of job gpt_0)" in str(err.value)


def test_parser_runs_once_per_argv_shape_not_once_per_job(
    megatron_importable: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # validate_args (which parses each distinct argument set) is counted in test_startup_checks
    backend = _backend(**BASE, validate_args=False)
    parser = backend.argument_source().parser
    assert parser is not None
    calls: list[list[str]] = []
    real_parse = parser.parse_args

    def counting(args: list[str]) -> Any:
        calls.append(args)
        return real_parse(args)

    monkeypatch.setattr(parser, "parse_args", counting)
    jobs = [_job({"backend.megatron.lr": 1e-5 * (i + 1)}, index=i) for i in range(50)]
    backend.validate(jobs)
    assert len(calls) == 1  # values the schema checks fully do not change the parse outcome
    assert [a for a in backend.build_launch(jobs[49]).argv if a.startswith("--lr=")] == [
        "--lr=0.0005"
    ]

    # a value only the parser can check (custom type function) is parsed per distinct value
    layouts = [
        _job({"backend.megatron.pipeline_model_parallel_layout": v}, index=i)
        for i, v in enumerate(["1,2", "(3,4)", "1,x"])
    ]
    with pytest.raises(ConfigError) as err:
        backend.validate(layouts)
    assert err.value.key == "backend.megatron.pipeline_model_parallel_layout"
    assert "invalid tuple_type value: '1,x'" in str(
        err.value
    ) and "(the value of job gpt_2)" in str(err.value)
    assert len(calls) == 4


def test_a_broken_megatron_is_an_error_not_a_fallback(
    tmp_path: Path, megatron_absent: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Importable but failing (e.g. a CUDA/version mismatch at import): even with a schema file
    # to fall back on, planning stops and says what failed.
    (tmp_path / "broken_megatron_args.py").write_text(
        "raise RuntimeError('CUDA driver version is insufficient')\n", encoding="utf-8"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    schema_file = tmp_path / "s.json"
    schema_file.write_text(
        '{"format": "oellm-autoexp/megatron-args/1", "args": []}', encoding="utf-8"
    )
    backend = _backend(megatron_module="broken_megatron_args", schema_file=str(schema_file))
    try:
        with pytest.raises(ConfigError) as err:
            backend.validate([_job()])
    finally:
        sys.modules.pop("broken_megatron_args", None)
    assert err.value.key == "backend.megatron_module"
    assert "RuntimeError: CUDA driver version is insufficient" in str(err.value)


def test_enum_choices_pass_megatron_parser_by_name_or_by_value(megatron_importable: Path) -> None:
    backend = _backend(
        megatron={"attention_backend": "flash", "non_persistent_ckpt_scope": "local"}
    )
    job = _job()
    backend.validate([job])  # both went through the (stand-in) parser without complaint
    assert backend.build_launch(job).argv[-2:] == (
        "--attention-backend=flash",
        "--non-persistent-ckpt-scope=local",
    )
    with pytest.raises(ConfigError, match="'LOCAL' is not a valid choice"):
        _backend(megatron={"non_persistent_ckpt_scope": "LOCAL"}).validate([job])
