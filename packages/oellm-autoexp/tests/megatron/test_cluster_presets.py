"""The cluster presets (config/slurm/<cluster>.yaml) with the Megatron backend.

Each preset: its GPUs per node and launch mode are the documented ones; what the user must fill
in (`???`) stops `plan` with one line naming the key; filled in, a Megatron plan renders scripts
that pass the static checks (lint, `bash -n`) and launch one world of nodes x GPUs processes, and
Megatron's start-up rules are checked with that world size. On the local SLURM (marked `slurm`),
`sbatch --test-only` accepts each preset's script once the values that only a real cluster has
(its partition, GPUs, node count and size) are replaced by the local ones.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from oellm_autoexp.config.loader import load_config
from oellm_autoexp.errors import ConfigError
from oellm_autoexp.planning import build_plan, write_plan
from oellm_autoexp.slurm.topology import topology

# preset -> (GPUs per node, launch mode, what the user must fill in)
PRESETS: dict[str, tuple[int, str, tuple[str, ...]]] = {
    "jupiter": (4, "torchrun", ("account", "partition")),
    "juwels_booster": (4, "torchrun", ("account", "partition")),
    "leonardo": (4, "torchrun", ("account", "partition")),
    "lumi": (8, "srun", ("account", "partition")),
    "marenostrum5": (4, "torchrun", ("account", "qos")),
    "snellius": (4, "torchrun", ("partition",)),
}
FILL = {"account": "my_budget", "partition": "gpu", "qos": "acc_debug"}


def _overrides(preset: str, schema_file: Path, out: Path, *, fill: bool = True) -> list[str]:
    _, mode, required = PRESETS[preset]
    overrides = [
        "backend=megatron",
        f"slurm={preset}",
        "backend.arg_source=schema",
        f"backend.schema_file={schema_file}",
        f"project.base_output_dir={out}",
    ]
    if mode == "srun":  # one task per GPU: the script itself, not torchrun
        overrides.append("backend.launcher=[python3]")
    if fill:
        overrides += [f"slurm.sbatch.{key}={FILL[key]}" for key in required]
    return overrides


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_preset_needs_its_user_values_and_says_which(preset: str, schema_file: Path) -> None:
    required = PRESETS[preset][2]
    with pytest.raises(ConfigError) as err:
        load_config("autoexp", _overrides(preset, schema_file, Path("/tmp/x"), fill=False))
    assert err.value.key == f"slurm.sbatch.{required[0]}"
    assert "required value is not set" in err.value.detail and "\n" not in str(err.value)


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_preset_plans_one_megatron_world_that_passes_static_checks(
    preset: str, schema_file: Path, megatron_absent: None, tmp_path: Path
) -> None:
    gpus, mode, _ = PRESETS[preset]
    root = load_config("autoexp", _overrides(preset, schema_file, tmp_path)).root
    assert root.slurm.distributed.mode == mode
    result = build_plan(root)
    write_plan(result, test_only="never")  # lint + bash -n; raises on a bad script
    (job,) = result.plan.jobs
    topo = topology(dict(job.sbatch))
    assert topo.gpus_per_node == gpus
    (script,) = result.scripts.values()
    if mode == "torchrun":
        assert topo.tasks_per_node == 1 and f"PET_NPROC_PER_NODE={gpus} " in script
        assert job.command[0] == "torchrun"
    else:
        assert topo.tasks_per_node == gpus and 'RANK="$SLURM_PROCID"' in script
    # the start-up rules ran with this world: a batch that does not fit it is refused
    world = (topo.nodes or 1) * gpus
    bad = [
        *_overrides(preset, schema_file, tmp_path),
        f"backend.megatron.global_batch_size={world * 4 + 4}",
    ]
    with pytest.raises(ConfigError) as err:
        build_plan(load_config("autoexp", bad).root)
    assert err.value.key == "backend.megatron.global_batch_size"
    assert f"world size {world})" in err.value.detail


def test_cli_names_the_missing_value_in_one_line(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "oellm_autoexp.cli",
            "plan",
            "autoexp",
            "slurm=lumi",
            f"project.base_output_dir={tmp_path}",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"oellm-autoexp: error: {_autoexp_yaml()}: slurm.sbatch.account: required value is not "
        "set ('???' in the config); set it, e.g. slurm.sbatch.account=<value>"
    ]


def _autoexp_yaml() -> str:
    from oellm_autoexp.config.loader import package_config_dir

    return str(package_config_dir() / "autoexp.yaml")


@pytest.mark.slurm
@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_preset_script_passes_sbatch_test_only_on_the_local_slurm(
    preset: str,
    schema_file: Path,
    megatron_absent: None,
    slurm_cluster: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in slurm_cluster.env.items():  # sbatch talks to the local cluster
        monkeypatch.setenv(name, value)
    # What only the real cluster has is replaced by the local cluster's: its partition, no GPUs
    # (2 processes per node instead), one node, CPUs that fit it; no QoS (no accounting here).
    root = load_config("autoexp", _overrides(preset, schema_file, tmp_path)).root
    sbatch = root.slurm.sbatch
    for key in ("gres", "gpus_per_node", "qos"):
        sbatch.pop(key, None)
    sbatch.update(partition=slurm_cluster.partition, nodes=1, cpus_per_task=1)
    if PRESETS[preset][1] == "srun":
        sbatch["ntasks_per_node"] = 2
    root.slurm.distributed.procs_per_node = 2
    root.backend.megatron["global_batch_size"] = 8
    result = build_plan(root)
    notes = write_plan(result, test_only="always")
    assert notes == ["sbatch --test-only accepted 1 of 1 script(s)"]
