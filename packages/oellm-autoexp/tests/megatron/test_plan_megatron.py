"""`oellm-autoexp plan` with the Megatron backend, and what planning imports (subprocesses).

The stand-in Megatron-LM argument module is put on PYTHONPATH of the child only, as a Megatron-LM
checkout or container would provide the real one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

STAND_IN = Path(__file__).resolve().with_name("stand_in")
PACKAGE = Path(__file__).resolve().parents[2]

MEGATRON_CONFIG = """\
project:
  name: gpt
  base_output_dir: {root}
backend:
  class_name: MegatronBackend
  entrypoint: /opt/Megatron-LM/pretrain_gpt.py
  launcher: [torchrun, --nproc-per-node=4]
  env: {{CUDA_DEVICE_MAX_CONNECTIONS: "1"}}
  megatron:
    num_layers: 2
    hidden_size: 64
    num_attention_heads: 4
    seq_length: 128
    lr: "{{lr}}"
    bf16: true
    check_for_nan_in_loss_and_grad: false
    save: "{{output_dir}}/checkpoints"
    data_path: [0.5, /data/a, 0.5, /data/b]
sweep:
  axes:
    lr: [1.0e-4, 3.0e-4]
    backend.megatron.micro_batch_size: [1, 2]
  name_template: "gpt_lr{{lr}}_mbs{{backend_megatron_micro_batch_size}}"
slurm:
  use_srun: false
  test_only: never
"""

# Prints the top-level names of torch/megatron modules imported while planning, then exits
# with the CLI's exit code.
PROBE = (
    "import json, sys\n"
    "from oellm_autoexp.cli import main\n"
    "rc = main(sys.argv[1:])\n"
    "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'megatron', 'triton'})\n"
    "print('HEAVY=' + json.dumps(heavy))\n"
    "sys.exit(rc)\n"
)


def _run(
    args: list[str], *, cwd: Path, pythonpath: Path | None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    return subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _heavy(stdout: str) -> list[str]:
    line = next(ln for ln in stdout.splitlines() if ln.startswith("HEAVY="))
    return list(json.loads(line.removeprefix("HEAVY=")))


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "gpt.yaml"
    path.write_text(text.format(root=tmp_path / "out"), encoding="utf-8")
    return path


def test_plan_writes_megatron_commands_checked_by_megatron_parser(tmp_path: Path) -> None:
    config = _write(tmp_path, MEGATRON_CONFIG)
    done = _run(["plan", str(config)], cwd=tmp_path, pythonpath=STAND_IN)
    assert done.returncode == 0, done.stderr
    assert _heavy(done.stdout) == ["megatron"]  # the parser was imported, torch was not
    (plan_json,) = (tmp_path / "out" / "plans").glob("*/plan.json")
    jobs = json.loads(plan_json.read_text(encoding="utf-8"))["jobs"]
    commands = {job["name"]: job["command"] for job in jobs}
    assert sorted(commands) == [
        "gpt_lr0.0001_mbs1",
        "gpt_lr0.0001_mbs2",
        "gpt_lr0.0003_mbs1",
        "gpt_lr0.0003_mbs2",
    ]
    job = next(j for j in jobs if j["name"] == "gpt_lr0.0003_mbs2")
    assert job["command"] == [
        "torchrun",
        "--nproc-per-node=4",
        "/opt/Megatron-LM/pretrain_gpt.py",
        "--num-layers=2",
        "--hidden-size=64",
        "--num-attention-heads=4",
        "--seq-length=128",
        "--lr=0.0003",
        "--bf16",
        "--no-check-for-nan-in-loss-and-grad",
        f"--save={job['output_dir']}/checkpoints",
        "--data-path",
        "0.5",
        "/data/a",
        "0.5",
        "/data/b",
        "--micro-batch-size=2",
    ]
    assert job["env"] == {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}


@pytest.mark.parametrize(
    ("replace", "expected"),
    [
        (
            ("num_layers: 2", "num_layer: 2"),
            "backend.megatron.num_layer: unknown Megatron argument 'num_layer'; "
            "did you mean 'num_layers'?",
        ),
        (
            ("hidden_size: 64", "hidden_size: 64.5"),
            "backend.megatron.hidden_size: expected an integer for --hidden-size, got 64.5",
        ),
        (
            ("bf16: true", "bf16: maybe"),
            "backend.megatron.bf16: expected true or false for --bf16, got 'maybe'",
        ),
    ],
)
def test_bad_megatron_argument_is_one_line_exit_2(
    tmp_path: Path, replace: tuple[str, str], expected: str
) -> None:
    config = _write(tmp_path, MEGATRON_CONFIG.replace(*replace))
    done = _run(["plan", str(config)], cwd=tmp_path, pythonpath=STAND_IN)
    assert done.returncode == 2
    assert expected in done.stderr
    assert "(the value of job" not in done.stderr  # the base config is wrong, not one job
    assert len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out" / "plans").exists()  # nothing written


def test_bad_sweep_value_for_megatron_names_the_job(tmp_path: Path) -> None:
    config = _write(
        tmp_path,
        MEGATRON_CONFIG.replace("micro_batch_size: [1, 2]", "micro_batch_size: [one, two]"),
    )
    done = _run(["plan", str(config)], cwd=tmp_path, pythonpath=STAND_IN)
    assert done.returncode == 2
    assert "backend.megatron.micro_batch_size" in done.stderr and "'one'" in done.stderr
    assert "(the value of job gpt_lr0.0001_mbsone)" in done.stderr


def test_planning_with_the_command_backend_imports_no_megatron_or_torch(tmp_path: Path) -> None:
    done = _run(
        ["plan", str(PACKAGE / "examples" / "hello_sweep.yaml")], cwd=tmp_path, pythonpath=STAND_IN
    )
    assert done.returncode == 0, done.stderr
    assert _heavy(done.stdout) == []  # even though a megatron package is importable here


def test_importing_the_package_and_megatron_backend_imports_nothing_heavy() -> None:
    code = (
        "import sys, oellm_autoexp, oellm_autoexp.backends.megatron, oellm_autoexp.container\n"
        "from oellm_autoexp.config.registrations import load_registrations\n"
        "load_registrations()\n"
        "heavy = {'torch', 'megatron', 'triton', 'hydra'}\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & heavy))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(STAND_IN)}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize(
    "ref",
    [
        [str(PACKAGE / "examples" / "megatron_gpt.yaml")],
        ["autoexp", "backend=megatron", "project.base_output_dir=out"],
    ],
    ids=["example", "hydra-group"],
)
def test_shipped_megatron_configs_plan_where_megatron_imports(
    tmp_path: Path, ref: list[str]
) -> None:
    done = _run(["plan", *ref, "--test-only", "never"], cwd=tmp_path, pythonpath=STAND_IN)
    assert done.returncode == 0, done.stderr
    (plan_json,) = tmp_path.glob("*/**/plans/*/plan.json")
    jobs = json.loads(plan_json.read_text(encoding="utf-8"))["jobs"]
    assert all(j["command"][0] == "torchrun" and "--bf16" in j["command"] for j in jobs)
    assert all(f"--save={j['output_dir']}/checkpoints" in j["command"] for j in jobs)

    without = _run(["plan", *ref, "--test-only", "never"], cwd=tmp_path, pythonpath=None)
    assert without.returncode == 2
    assert "backend.schema_file: cannot validate Megatron arguments" in without.stderr


def test_example_sweep_reaches_megatron_arguments(tmp_path: Path) -> None:
    ref = str(PACKAGE / "examples" / "megatron_gpt.yaml")
    done = _run(["plan", ref, "--test-only", "never"], cwd=tmp_path, pythonpath=STAND_IN)
    assert done.returncode == 0, done.stderr
    (plan_json,) = tmp_path.glob("autoexp_runs/gpt_small/plans/*/plan.json")
    jobs = json.loads(plan_json.read_text(encoding="utf-8"))["jobs"]
    pairs = sorted(
        (
            next(a for a in j["command"] if a.startswith("--lr=")),
            next(a for a in j["command"] if a.startswith("--global-batch-size=")),
        )
        for j in jobs
    )
    assert pairs == [
        (f"--lr={lr}", f"--global-batch-size={gbs}")
        for lr in ("0.0003", "0.0006", "0.001")
        for gbs in (256, 512)
    ]


@pytest.mark.slurm
@pytest.mark.parametrize(
    "ref",
    [
        # the example asks for 2 GPU nodes; the one-node test cluster has no GPUs, so torchrun
        # gets its process count from procs_per_node instead
        [
            str(PACKAGE / "examples" / "megatron_gpt.yaml"),
            "slurm.sbatch.nodes=1",
            "slurm.sbatch.gres=null",
            "slurm.sbatch.cpus_per_task=1",
            "+slurm.distributed.procs_per_node=2",
        ],
        ["autoexp", "backend=megatron", "slurm=local"],
    ],
    ids=["example", "hydra-group"],
)
def test_megatron_scripts_pass_sbatch_test_only(
    slurm_cluster: Any, tmp_path: Path, ref: list[str]
) -> None:
    env = {**slurm_cluster.env, "PYTHONPATH": str(STAND_IN)}
    exe = Path(sys.executable).with_name("oellm-autoexp")
    done = subprocess.run(
        [exe, "plan", *ref, f"project.base_output_dir={tmp_path}", "--test-only", "always"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    scripts = sorted(tmp_path.glob("plans/*/scripts/*.sbatch"))
    assert (
        scripts and f"sbatch --test-only accepted {len(scripts)} of {len(scripts)}" in done.stdout
    )
    assert "--no-check-for-nan-in-loss-and-grad" not in scripts[0].read_text(encoding="utf-8")
    assert "pretrain_gpt.py --num-layers=12" in scripts[0].read_text(encoding="utf-8")
