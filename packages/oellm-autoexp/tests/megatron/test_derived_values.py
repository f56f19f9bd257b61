"""Derived values follow the sweep (issue 16 §2): interpolations resolve per job.

Planned with the stand-in Megatron parser; each job's rendered command must carry the value its
own sweep point implies.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from oellm_autoexp.config.loader import load_config
from oellm_autoexp.errors import ConfigError
from oellm_autoexp.planning import build_plan

CONFIG = """\
project: {{name: gpt, base_output_dir: {root}}}
backend:
  class_name: MegatronBackend
  launcher: [torchrun]
  megatron:
    num_layers: 2
    hidden_size: 64
    num_attention_heads: 4
    seq_length: 128
{megatron}
sweep:
  name_template: "gpt_{{index}}"
  axes:
{axes}
slurm: {{use_srun: false, test_only: never, sbatch: {sbatch}}}
"""


GBS_SWEPT = "    backend.megatron.global_batch_size: [256, 512]"
GBS_COMMENT = '{comment: "gbs${backend.megatron.global_batch_size}"}'


def _write(tmp_path: Path, megatron: str, axes: str, sbatch: str = "{}") -> Path:
    path = tmp_path / "gpt.yaml"
    path.write_text(CONFIG.format(root=tmp_path, megatron=megatron, axes=axes, sbatch=sbatch))
    return path


def _commands(tmp_path: Path, megatron: str, axes: str, sbatch: str = "{}") -> list[list[str]]:
    result = build_plan(load_config(str(_write(tmp_path, megatron, axes, sbatch))).root)
    return [list(job.command) for job in result.plan.jobs]


def _value(argv: list[str], option: str) -> str:
    """The value of `option` in `argv` (``--opt=value`` or ``--opt value``)."""
    for i, arg in enumerate(argv):
        if arg.startswith(option + "="):
            return arg.split("=", 1)[1]
        if arg == option:
            return argv[i + 1]
    raise AssertionError(f"{option} not in {argv}")


def test_a_value_derived_from_a_swept_config_key_follows_each_job(
    tmp_path: Path, megatron_importable: Path
) -> None:
    # The form: global_batch_size has a base value and is swept.
    commands = _commands(
        tmp_path,
        "    global_batch_size: 128\n"
        "    train_iters: ${oc.divi:1024000,${backend.megatron.global_batch_size}}",
        GBS_SWEPT,
    )
    assert [_value(c, "--train-iters") for c in commands] == ["4000", "2000"]
    assert [_value(c, "--global-batch-size") for c in commands] == ["256", "512"]


def test_a_value_may_reference_a_key_only_the_sweep_sets_and_a_free_param(
    tmp_path: Path, megatron_importable: Path
) -> None:
    # global_batch_size exists only in the sweep; `steps` is a free param (no section prefix);
    # a derived value may itself refer to another derived value, and directives may be derived.
    commands = _commands(
        tmp_path,
        "    train_iters: ${oc.divi:${steps},${backend.megatron.global_batch_size}}\n"
        "    lr_decay_iters: ${backend.megatron.train_iters}",
        GBS_SWEPT + "\n    steps: [1024000]",
        sbatch=GBS_COMMENT,
    )
    assert [_value(c, "--train-iters") for c in commands] == ["4000", "2000"]
    assert [_value(c, "--lr-decay-iters") for c in commands] == ["4000", "2000"]


def test_per_job_directives_and_sweep_json_carry_the_derived_values(
    tmp_path: Path, megatron_importable: Path
) -> None:
    path = _write(tmp_path, "    global_batch_size: 128", GBS_SWEPT, GBS_COMMENT)
    result = build_plan(load_config(str(path)).root)
    assert [job.sbatch["comment"] for job in result.plan.jobs] == ["gbs256", "gbs512"]
    assert [entry["params"]["slurm.sbatch.comment"] for entry in result.sweep] == [
        "gbs256",
        "gbs512",
    ]


def test_a_derived_value_outside_backend_and_sbatch_is_refused_with_its_key(
    tmp_path: Path, megatron_importable: Path
) -> None:
    path = _write(tmp_path, "    global_batch_size: 128", GBS_SWEPT)
    path.write_text(
        path.read_text().replace(
            "name: gpt,", "name: gpt, description: '${backend.megatron.global_batch_size}',"
        )
    )
    with pytest.raises(ConfigError) as info:
        load_config(str(path))
    assert str(info.value).startswith(f"{path}: project.description: ")
    assert "only backend.* and slurm.sbatch.* values can differ per job" in str(info.value)
