"""End to end: plan runs inside the container, sbatch on the host (stand-in runtime and sbatch).

`apptainer`/`singularity` and `sbatch` are stand-ins placed first on PATH (see stand_in/): the
runtime records its argv and runs the command locally as a container would (in `--pwd`, with
`APPTAINER_CONTAINER` set and without the host's sbatch on PATH); sbatch records its argv and
whether it ran inside a container. Everything else is real: the runner script, the planning CLI
(`python -m oellm_autoexp.cli submit --dry-run`), the rendered scripts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
RUNNER = HERE.parents[1] / "scripts" / "run_autoexp_container.py"

CONFIG = """\
project:
  name: split
  base_output_dir: ./runs
backend:
  class_name: CommandBackend
  argv: [python3, -c, "print('{name}')"]
sweep:
  axes:
    lr: [1.0e-4, 3.0e-4]
  name_template: "split_lr{lr}"
slurm:
  array: false
  use_srun: false
  test_only: never
  sbatch:
    time: "00:05:00"
"""


@dataclass
class Env:
    """A working directory with the stand-ins on PATH."""

    cwd: Path
    log: Path
    image: Path
    environ: dict[str, str]

    def run(self, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, str(RUNNER), *args]
        return subprocess.run(
            cmd,
            cwd=self.cwd,
            env={**self.environ, **env},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    def calls(self, tool: str | None = None) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        records = [json.loads(line) for line in self.log.read_text(encoding="utf-8").splitlines()]
        return [r for r in records if tool is None or r["tool"] == tool]

    def write_config(self, container: str) -> Path:
        path = self.cwd / "cfg.yaml"
        path.write_text(CONFIG + container, encoding="utf-8")
        return path


def _install(bin_dir: Path, name: str, source: Path) -> None:
    target = bin_dir / name
    target.write_text(
        f"#!{sys.executable}\n" + source.read_text(encoding="utf-8"), encoding="utf-8"
    )
    target.chmod(0o755)


@pytest.fixture
def env(tmp_path: Path) -> Env:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for runtime in ("apptainer", "singularity"):
        _install(bin_dir, runtime, HERE / "stand_in" / "container_runtime.py")
    _install(bin_dir, "sbatch", HERE / "stand_in" / "sbatch.py")
    cwd = tmp_path / "work"
    cwd.mkdir()
    image = tmp_path / "images" / "train.sif"
    image.parent.mkdir()
    image.write_bytes(b"not really an image")
    environ = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "STANDIN_LOG": str(tmp_path / "calls.jsonl"),
    }
    return Env(cwd=cwd, log=tmp_path / "calls.jsonl", image=image, environ=environ)


def _plan_argv(python: str) -> list[str]:
    return [python, "-m", "oellm_autoexp.cli", "submit", "cfg.yaml", "--dry-run"]


def test_plan_inside_container_sbatch_on_host(env: Env) -> None:
    env.write_config(f"container:\n  image: {env.image}\n  runtime: apptainer\n")
    done = env.run("cfg.yaml", "--no-monitor", "--container-python", sys.executable)
    assert done.returncode == 0, done.stderr

    runtime_calls = env.calls("apptainer")
    assert len(runtime_calls) == 1
    assert runtime_calls[0]["argv"] == [
        "exec",
        "--bind",
        str(env.cwd),
        "--pwd",
        str(env.cwd),
        str(env.image),
        *_plan_argv(sys.executable),
    ]
    sbatch_calls = env.calls("sbatch")
    scripts = sorted((env.cwd / "runs" / "plans").glob("*/scripts/*.sbatch"))
    assert [s.name for s in scripts] == ["split_lr0.0001.sbatch", "split_lr0.0003.sbatch"]
    assert [c["argv"] for c in sbatch_calls] == [["--parsable", str(s)] for s in scripts]
    assert not any(c["in_container"] for c in sbatch_calls)  # sbatch ran on the host only

    assert f"submitted {scripts[0]} as job 1001" in done.stdout
    assert f"submitted {scripts[1]} as job 1002" in done.stdout
    (record,) = (scripts[0].parent.parent / "submissions").glob("*.json")
    data = json.loads(record.read_text(encoding="utf-8"))
    assert data["image"] == str(env.image)
    assert [s["job_id"] for s in data["submissions"]] == ["1001", "1002"]
    assert data["plan"] == str(scripts[0].parent.parent / "plan.json")


def test_no_run_prints_the_host_commands_and_submits_nothing(env: Env) -> None:
    env.write_config(f"container:\n  image: {env.image}\n  runtime: singularity\n")
    done = env.run("cfg.yaml", "--no-run", "--container-python", sys.executable)
    assert done.returncode == 0, done.stderr
    assert [c["tool"] for c in env.calls()] == ["singularity"]
    scripts = sorted((env.cwd / "runs" / "plans").glob("*/scripts/*.sbatch"))
    printed = done.stdout.split("sbatch commands (--no-run: nothing submitted):\n", 1)[
        1
    ].splitlines()
    assert printed == [f"sbatch --parsable {s}" for s in scripts]


def test_image_flag_overrides_a_config_without_container(env: Env) -> None:
    env.write_config("container: null\n")
    done = env.run(
        "cfg.yaml", "--no-run", "--image", str(env.image), "--runtime", "singularity",
        "--env", "A=1 2", "--container-python", sys.executable,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (call,) = env.calls()
    assert call["tool"] == "singularity"
    assert call["argv"][: call["argv"].index(str(env.image))] == [
        "exec", "--bind", str(env.cwd), "--env", "A=1 2", "--pwd", str(env.cwd),
    ]  # fmt: skip


def test_without_container_everything_runs_on_the_host(env: Env) -> None:
    env.write_config("container: null\n")
    done = env.run("cfg.yaml", "--no-monitor")
    assert done.returncode == 0, done.stderr
    assert env.calls("apptainer") == [] and env.calls("singularity") == []
    assert [c["argv"][0] for c in env.calls("sbatch")] == ["--parsable", "--parsable"]
    assert "plan on the host:" in done.stdout


def test_config_error_inside_the_container_is_exit_2_with_its_message(env: Env) -> None:
    env.write_config(f"container:\n  image: {env.image}\n")
    (env.cwd / "cfg.yaml").write_text(
        (env.cwd / "cfg.yaml").read_text(encoding="utf-8").replace("max_array_size", "x")
        + "slurm_typo: 1\n",
        encoding="utf-8",
    )
    done = env.run(
        "cfg.yaml",
        "--no-monitor",
        "--image",
        str(env.image),
        "--runtime",
        "apptainer",
        "--container-python",
        sys.executable,
    )
    assert done.returncode == 2
    assert "the plan step failed" in done.stderr and "slurm_typo" in done.stderr
    assert env.calls("sbatch") == []
    assert "Traceback" not in done.stderr


def test_failed_sbatch_keeps_the_earlier_submission_and_exits_1(env: Env) -> None:
    env.write_config(f"container:\n  image: {env.image}\n")
    done = env.run(
        "cfg.yaml", "--no-monitor", "--container-python", sys.executable, STANDIN_SBATCH_FAIL_AT="2"
    )
    assert done.returncode == 1
    assert "Invalid account" in done.stderr
    (record,) = (env.cwd / "runs" / "plans").glob("*/submissions/*.json")
    data = json.loads(record.read_text(encoding="utf-8"))
    assert [s["job_id"] for s in data["submissions"]] == ["1001"]


def test_missing_image_is_reported_by_the_runtime(env: Env) -> None:
    env.write_config(f"container:\n  image: {env.image}.missing\n")
    done = env.run("cfg.yaml", "--no-run", "--container-python", sys.executable)
    assert done.returncode == 1
    assert "could not open image" in done.stderr
    assert "\n" not in done.stderr.strip().splitlines()[-1]
