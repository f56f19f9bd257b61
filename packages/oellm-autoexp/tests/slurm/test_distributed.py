"""One world per job: what each slurm.distributed mode renders, and what the static check refuses.

The real proof that the rendered launch forms one world is `tests/integration/test_one_world.py`
(two processes on the local SLURM all-reduce to 2); here every shipped cluster preset is planned
with every kind of launcher, and each combination either renders a launch that joins all
processes into one world or is refused with one line.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from oellm_autoexp.backends.base import JobContext
from oellm_autoexp.config.loader import load_config, package_config_dir
from oellm_autoexp.errors import ConfigError
from oellm_autoexp.planning import build_plan
from oellm_autoexp.slurm.distributed import is_torchrun
from oellm_autoexp.slurm.topology import topology, with_world_sizes

PRESETS = sorted(p.stem for p in (package_config_dir() / "slurm").glob("*.yaml"))
LAUNCHERS = {
    "torchrun": "backend.argv=[torchrun,train.py]",
    "python": "backend.argv=[python3,train.py]",
}
# What a user fills in for every preset that leaves it open (`???`).
FILLED = [
    "+slurm.sbatch.account=my_budget",
    "+slurm.sbatch.partition=gpu",
    "+slurm.sbatch.qos=acc_debug",
]


def _fills(preset: str) -> list[str]:
    """The overrides for the preset's `???` values (set, not added: the preset has the key)."""
    text = (package_config_dir() / "slurm" / f"{preset}.yaml").read_text()
    return [
        fill[1:]
        for fill in FILLED
        if re.search(rf"^\s+{fill.split('=')[0].rsplit('.', 1)[1]}: \?\?\?", text, re.M)
    ]


def _plan_preset(preset: str, launcher: str, tmp_path: Path) -> Any:
    overrides = [f"slurm={preset}", LAUNCHERS[launcher], f"project.base_output_dir={tmp_path}"]
    return build_plan(load_config("autoexp", [*overrides, *_fills(preset)]).root)


def _forms_one_world(script: str, sbatch: dict[str, str], command: list[str], mode: str) -> bool:
    topo = topology(sbatch)
    if mode == "torchrun":
        return (
            is_torchrun(command)
            and topo.tasks_per_node in (None, 1)
            and 'PET_RDZV_ENDPOINT="$MASTER_ADDR:$MASTER_PORT"' in script
            and 'PET_NNODES="$SLURM_JOB_NUM_NODES"' in script
        )
    if mode == "srun":
        return not is_torchrun(command) and 'RANK="$SLURM_PROCID"' in script
    # mode none: one process, or a non-torchrun program started once per task
    return not is_torchrun(command) or (topo.nodes == 1 and topo.tasks_per_node in (None, 1))


@pytest.mark.parametrize("launcher", sorted(LAUNCHERS))
@pytest.mark.parametrize("preset", PRESETS)
def test_every_preset_and_launcher_forms_one_world_or_is_refused(
    preset: str, launcher: str, tmp_path: Path
) -> None:
    try:
        result = _plan_preset(preset, launcher, tmp_path)
    except ConfigError as exc:
        assert "\n" not in str(exc)
        assert exc.key in ("slurm.distributed.mode", "slurm.sbatch.ntasks_per_node"), str(exc)
        return
    mode = result.config["slurm"]["distributed"]["mode"]
    for job in result.plan.jobs:
        script = result.scripts[job.script]
        assert _forms_one_world(script, dict(job.sbatch), list(job.command), mode), script


def test_gpu_presets_refuse_a_plain_command_and_accept_torchrun(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        _plan_preset("juwels_booster", "python", tmp_path)
    assert err.value.key == "slurm.distributed.mode"
    assert "does not start with torchrun" in err.value.detail
    result = _plan_preset("juwels_booster", "torchrun", tmp_path)
    (script,) = result.scripts.values()
    assert "#SBATCH --nodes=4" in script and "#SBATCH --ntasks-per-node=1" in script
    assert "PET_NPROC_PER_NODE=4 " in script
    assert re.search(r"^srun .*\"\$\{AUTOEXP_CMD\[@\]\}\"$", script, re.M)


# --- the static check, case by case ------------------------------------------------------------


def _plan(tmp_path: Path, argv: list[str], slurm: dict[str, Any], **sweep: Any) -> Any:
    config = {
        "project": {"name": "w", "base_output_dir": str(tmp_path)},
        "backend": {"class_name": "CommandBackend", "argv": argv},
        "slurm": {"test_only": "never", **slurm},
        "sweep": {"axes": sweep},
    }
    path = tmp_path / "w.yaml"
    path.write_text(json.dumps(config))
    return build_plan(load_config(str(path), []).root)


def _refused(tmp_path: Path, argv: list[str], slurm: dict[str, Any], **sweep: Any) -> ConfigError:
    with pytest.raises(ConfigError) as err:
        _plan(tmp_path, argv, slurm, **sweep)
    assert "\n" not in str(err.value)
    return err.value


GPU4 = {"gres": "gpu:4", "ntasks_per_node": 1}


@pytest.mark.parametrize(
    ("argv", "slurm", "key", "says"),
    [
        # independent torchruns on two nodes: no common rendezvous
        (
            ["torchrun", "t.py"],
            {"sbatch": {"nodes": 2, **GPU4}},
            "slurm.distributed.mode",
            "2 separate worlds",
        ),
        # four torchruns per node
        (
            ["torchrun", "t.py"],
            {"sbatch": {"nodes": 1, "gres": "gpu:4", "ntasks_per_node": 4}},
            "slurm.sbatch.ntasks_per_node",
            "separate worlds",
        ),
        (
            ["torchrun", "t.py"],
            {
                "sbatch": {"nodes": 2, "gres": "gpu:4", "ntasks_per_node": 4},
                "distributed": {"mode": "torchrun"},
            },
            "slurm.sbatch.ntasks_per_node",
            "4 torchruns per node",
        ),
        # the command brings its own rendezvous settings
        (
            ["torchrun", "--standalone", "t.py"],
            {"sbatch": {"nodes": 2, **GPU4}, "distributed": {"mode": "torchrun"}},
            "backend.launcher",
            "sets --standalone",
        ),
        # one task per process, but each task is a torchrun
        (
            ["torchrun", "t.py"],
            {
                "sbatch": {"nodes": 2, "gres": "gpu:4", "ntasks_per_node": 4},
                "distributed": {"mode": "srun"},
            },
            "slurm.distributed.mode",
            "world of its own",
        ),
        (
            ["python3", "t.py"],
            {
                "sbatch": {"nodes": 2, "gres": "gpu:4", "ntasks_per_node": 2},
                "distributed": {"mode": "srun"},
            },
            "slurm.sbatch.ntasks_per_node",
            "expected ntasks_per_node 4, got 2",
        ),
        # no GPUs requested and no procs_per_node: the per-node process count is unknown
        (
            ["torchrun", "t.py"],
            {"sbatch": {"nodes": 2}, "distributed": {"mode": "torchrun"}},
            "slurm.distributed.procs_per_node",
            "no GPUs are requested",
        ),
        # without srun only the first node runs the command
        (
            ["torchrun", "t.py"],
            {
                "sbatch": {"nodes": 2, **GPU4},
                "use_srun": False,
                "distributed": {"mode": "torchrun"},
            },
            "slurm.use_srun",
            "the other nodes would idle",
        ),
        (
            ["torchrun", "t.py"],
            {"sbatch": GPU4, "distributed": {"mode": "mpi"}},
            "slurm.distributed.mode",
            "expected one of none, torchrun, srun",
        ),
    ],
)
def test_settings_that_cannot_form_one_world_are_refused(
    tmp_path: Path, argv: list[str], slurm: dict[str, Any], key: str, says: str
) -> None:
    err = _refused(tmp_path, argv, slurm)
    assert err.key == key
    assert says in err.detail


def test_sweeping_the_gpus_per_node_needs_an_explicit_process_count(tmp_path: Path) -> None:
    slurm = {"sbatch": {"nodes": 2, **GPU4}, "distributed": {"mode": "torchrun"}}
    err = _refused(
        tmp_path, ["torchrun", "t.py"], slurm, **{"slurm.sbatch.gres": ["gpu:4", "gpu:2"]}
    )
    assert err.key == "slurm.distributed.procs_per_node"


def test_srun_mode_renders_per_task_ranks_that_bash_accepts(tmp_path: Path) -> None:
    slurm = {
        "sbatch": {"nodes": 2, "gres": "gpu:4", "ntasks_per_node": 4},
        "distributed": {"mode": "srun", "master_port": 23456},
        "launcher_cmd": "apptainer exec --nv img.sif",
    }
    result = _plan(tmp_path, ["python3", "train.py"], slurm)
    (script,) = result.scripts.values()
    assert "export MASTER_PORT=23456" in script
    launch = next(ln for ln in script.splitlines() if ln.startswith("srun "))
    # srun -> per-task rank wrapper -> container -> command
    assert launch.index("bash -c") < launch.index("apptainer") < launch.index("AUTOEXP_CMD")
    assert 'RANK="$SLURM_PROCID"' in launch and 'WORLD_SIZE="$SLURM_NTASKS"' in launch


def test_world_size_of_each_job_follows_its_nodes(tmp_path: Path) -> None:
    result = _plan(
        tmp_path,
        ["torchrun", "t.py"],
        {"sbatch": GPU4, "distributed": {"mode": "torchrun"}},
        **{"slurm.sbatch.nodes": [1, 2, 3]},
    )
    root = load_config(str(tmp_path / "w.yaml"), []).root
    contexts = [
        JobContext(j.job_id, j.name, j.index, j.params, j.output_dir, "w") for j in result.plan.jobs
    ]
    assert [c.world_size for c in with_world_sizes(root.slurm, contexts)] == [4, 8, 12]
