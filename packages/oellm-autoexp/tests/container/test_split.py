"""End to end: the plan runs inside the container, sbatch and monitoring on the host.

`apptainer` / `singularity` are stand-ins placed first on PATH (stand_in/container_runtime.py):
they record their argv and run the command locally as a container would (in `--pwd`, with
`APPTAINER_CONTAINER` set, without the stand-in's directory on PATH). Everything else is real:
the runner script, the planning CLI (`python -m oellm_autoexp.cli submit --dry-run`) inside, and
on the host the session file, sbatch and squeue of a real single-node SLURM (`slurm_cluster`).
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
  argv: [python3, -c, "print('done {name}')"]
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
monitoring:
  class_name: LogMonitor
  termination_str: done split_lr
  poll_interval_seconds: 0.5
"""


@dataclass
class Env:
    """A working directory with the stand-in runtimes first on PATH."""

    cwd: Path
    log: Path
    image: Path
    environ: dict[str, str]

    def run(self, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, str(RUNNER), *args],
            cwd=self.cwd,
            env={**self.environ, **env},
            capture_output=True,
            text=True,
            timeout=240,
            check=False,
        )

    def calls(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text(encoding="utf-8").splitlines()]

    def write_config(self, container: str) -> Path:
        path = self.cwd / "cfg.yaml"
        path.write_text(CONFIG + container, encoding="utf-8")
        return path

    def scripts(self) -> list[Path]:
        return sorted((self.cwd / "runs" / "plans").glob("*/scripts/*.sbatch"))


@pytest.fixture
def env(tmp_path: Path) -> Env:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    source = (HERE / "stand_in" / "container_runtime.py").read_text(encoding="utf-8")
    for runtime in ("apptainer", "singularity"):
        tool = bin_dir / runtime
        tool.write_text(f"#!{sys.executable}\n{source}", encoding="utf-8")
        tool.chmod(0o755)
    cwd = tmp_path / "work"
    cwd.mkdir()
    image = tmp_path / "images" / "train.sif"
    image.parent.mkdir()
    image.write_bytes(b"stand-in image")
    log = tmp_path / "runtime_calls.jsonl"
    path = f"{bin_dir}{os.pathsep}{os.environ['PATH']}"
    return Env(cwd, log, image, {**os.environ, "PATH": path, "STANDIN_LOG": str(log)})


def _inner_plan(python: str) -> list[str]:
    return [python, "-m", "oellm_autoexp.cli", "submit", "cfg.yaml", "--dry-run"]


def test_no_run_plans_inside_the_container_and_prints_host_commands(env: Env) -> None:
    env.write_config(f"container:\n  image: {env.image}\n  runtime: apptainer\n")
    done = env.run("cfg.yaml", "--no-run", "--container-python", sys.executable)
    assert done.returncode == 0, done.stderr
    (call,) = env.calls()
    assert call["tool"] == "apptainer"
    assert call["argv"] == [
        "exec",
        "--bind",
        str(env.cwd),
        "--pwd",
        str(env.cwd),
        str(env.image),
        *_inner_plan(sys.executable),
    ]
    assert [s.name for s in env.scripts()] == ["split_lr0.0001.sbatch", "split_lr0.0003.sbatch"]
    printed = done.stdout.split("(--no-run: nothing submitted):\n", 1)[1].splitlines()
    assert printed == [f"sbatch --parsable {s}" for s in env.scripts()]
    assert not (env.cwd / "runs" / "monitoring_state").exists()  # nothing submitted


def test_image_flag_overrides_a_config_without_container(env: Env) -> None:
    env.write_config("container: null\n")
    done = env.run(
        "cfg.yaml",
        "--no-run",
        "--image",
        str(env.image),
        "--runtime",
        "singularity",
        "--env",
        "A=1 2",
        "--container-python",
        sys.executable,
    )
    assert done.returncode == 0, done.stderr
    (call,) = env.calls()
    assert call["tool"] == "singularity"
    before_image = call["argv"][: call["argv"].index(str(env.image))]
    assert before_image == ["exec", "--bind", str(env.cwd), "--env", "A=1 2", "--pwd", str(env.cwd)]


def test_image_flag_does_not_load_the_config_or_hydra_on_the_host(env: Env) -> None:
    # The host never parses the config here: a config the host could not even read is fine,
    # because only the plan step inside the container reads it.
    env.write_config("container: null\n")
    probe = (
        "import runpy, sys\n"
        f"sys.argv = [{str(RUNNER)!r}, 'cfg.yaml', '--no-run', '--image', {str(env.image)!r},\n"
        f"            '--runtime', 'apptainer', '--container-python', {sys.executable!r}]\n"
        "try:\n"
        "    runpy.run_path(sys.argv[0], run_name='__main__')\n"
        "except SystemExit as exc:\n"
        "    code = exc.code\n"
        "print('RC', code, 'HYDRA', 'hydra' in sys.modules, 'LOADER', "
        "'oellm_autoexp.config.loader' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=env.cwd,
        env=env.environ,
        capture_output=True,
        text=True,
        check=False,
    )
    assert "RC 0 HYDRA False LOADER False" in done.stdout, done.stderr


def test_config_error_inside_the_container_is_exit_2_with_its_message(env: Env) -> None:
    env.write_config("container: null\nslurm_typo: 1\n")
    done = env.run(
        "cfg.yaml",
        "--no-run",
        "--image",
        str(env.image),
        "--runtime",
        "apptainer",
        "--container-python",
        sys.executable,
    )
    assert done.returncode == 2
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("run_autoexp_container.py: error: the plan step failed")
    assert "slurm_typo: unknown key" in last
    assert "Traceback" not in done.stderr


def test_config_error_while_detecting_the_container_is_exit_2(env: Env) -> None:
    env.write_config("container: {image: 3}\nslurm_typo: 1\n")
    done = env.run("cfg.yaml", "--no-run")
    assert done.returncode == 2
    assert "cfg.yaml: slurm_typo: unknown key" in done.stderr
    assert env.calls() == []


def test_missing_image_is_reported_by_the_runtime(env: Env) -> None:
    env.write_config(f"container:\n  image: {env.image}.missing\n")
    done = env.run("cfg.yaml", "--no-run", "--container-python", sys.executable)
    assert done.returncode == 1
    assert "could not open image" in done.stderr
    assert "Traceback" not in done.stderr


def test_scripts_not_visible_on_the_host_are_refused_before_sbatch(
    env: Env, tmp_path: Path
) -> None:
    # The plan step writes its output where the host cannot see it (a path outside every bind
    # that the stand-in "container" then removes): the runner must stop, not submit.
    elsewhere = tmp_path / "container-only"
    env.write_config(f"container:\n  image: {env.image}\n")
    text = (env.cwd / "cfg.yaml").read_text(encoding="utf-8").replace("./runs", str(elsewhere))
    (env.cwd / "cfg.yaml").write_text(text, encoding="utf-8")
    wrapper = tmp_path / "inner_python"
    wrapper.write_text(
        f'#!/bin/sh\n"{sys.executable}" "$@"; rc=$?; rm -rf "{elsewhere}"; exit $rc\n',
        encoding="utf-8",
    )
    wrapper.chmod(0o755)
    done = env.run("cfg.yaml", "--no-monitor", "--container-python", str(wrapper))
    assert done.returncode == 2
    assert "is not visible on this host; bind the output directory" in done.stderr


# --- with a real SLURM on the host ---------------------------------------------------------


def _with_slurm(env: Env, cluster: Any) -> dict[str, str]:
    return {
        "SLURM_CONF": cluster.env["SLURM_CONF"],
        "PATH": f"{env.environ['PATH']}{os.pathsep}{cluster.env['PATH']}",
    }


@pytest.mark.slurm
def test_submit_on_the_host_then_monitor_to_completion(env: Env, slurm_cluster: Any) -> None:
    env.write_config(f"container:\n  image: {env.image}\n  runtime: apptainer\n")
    done = env.run(
        "cfg.yaml", "--container-python", sys.executable, **_with_slurm(env, slurm_cluster)
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert [c["tool"] for c in env.calls()] == ["apptainer"]  # planning only, inside
    (session_file,) = (env.cwd / "runs" / "monitoring_state").glob("*.json")
    session = json.loads(session_file.read_text(encoding="utf-8"))
    jobs = session["jobs"]
    assert sorted(j["name"] for j in jobs) == ["split_lr0.0001", "split_lr0.0003"]
    # a finished job's SLURM id is kept in its last attempt
    assert all(j["state"] == "completed" and j["attempts"][-1]["job_id"].isdigit() for j in jobs)
    # sbatch ran on the host against the real cluster: SLURM wrote the logs of those job ids.
    for job in jobs:
        log = Path(job["log_path"].replace("%j", job["attempts"][-1]["job_id"]))
        assert f"done {job['name']}" in log.read_text(encoding="utf-8")


@pytest.mark.slurm
def test_no_monitor_returns_after_submission_and_monitor_only_resumes(
    env: Env, slurm_cluster: Any
) -> None:
    env.write_config("container: null\n")  # no container: everything on the host
    extra = _with_slurm(env, slurm_cluster)
    done = env.run("cfg.yaml", "--no-monitor", **extra)
    assert done.returncode == 0, done.stdout + done.stderr
    assert env.calls() == []
    assert "plan on the host:" in done.stdout and "2 job(s) submitted" in done.stdout
    (session_file,) = (env.cwd / "runs" / "monitoring_state").glob("*.json")
    submitted = json.loads(session_file.read_text(encoding="utf-8"))["jobs"]
    # (a job that already finished within the submitting poll keeps its id in its last attempt)
    ids = [j["job_id"] or j["attempts"][-1]["job_id"] for j in submitted]
    assert all(i.isdigit() for i in ids)

    resumed = env.run("cfg.yaml", "--monitor-only", **extra)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    jobs = json.loads(session_file.read_text(encoding="utf-8"))["jobs"]
    # the same SLURM jobs, driven to the end by the resumed monitor
    assert [j["attempts"][-1]["job_id"] for j in jobs] == ids
    assert all(j["state"] == "completed" for j in jobs)


def test_config_outside_the_working_directory_is_bound_too(env: Env, tmp_path: Path) -> None:
    configs = tmp_path / "configs"
    configs.mkdir()
    config = configs / "cfg.yaml"
    config.write_text(
        CONFIG.replace("./runs", str(env.cwd / "runs")) + f"container:\n  image: {env.image}\n",
        encoding="utf-8",
    )
    done = env.run(str(config), "--no-run", "--container-python", sys.executable)
    assert done.returncode == 0, done.stderr
    (call,) = env.calls()
    binds = [call["argv"][i + 1] for i, a in enumerate(call["argv"]) if a == "--bind"]
    assert binds == [str(env.cwd), str(configs)]
    assert len(env.scripts()) == 2


def test_image_and_no_run_need_nothing_but_the_stdlib_on_the_host(env: Env) -> None:
    # `python -S`: no site-packages at all on the "host" (the script finds the package source
    # next to it); the plan step runs with the image's Python, which has the dependencies.
    env.write_config("container: null\n")
    args = [
        "cfg.yaml",
        "--image",
        str(env.image),
        "--runtime",
        "apptainer",
        "--container-python",
        sys.executable,
    ]
    bare = [sys.executable, "-S", str(RUNNER), *args]
    done = subprocess.run(
        [*bare, "--no-run"],
        cwd=env.cwd,
        env=env.environ,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert [f"sbatch --parsable {s}" for s in env.scripts()] == done.stdout.strip().splitlines()[
        -2:
    ]
    # submitting needs the package's dependencies on the host: one line, exit 2
    submit = subprocess.run(
        [*bare, "--no-monitor"],
        cwd=env.cwd,
        env=env.environ,
        capture_output=True,
        text=True,
        check=False,
    )
    assert submit.returncode == 2
    assert "install oellm-autoexp here" in submit.stderr and "Traceback" not in submit.stderr
