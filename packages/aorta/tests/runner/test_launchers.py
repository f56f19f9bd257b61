"""docker/venv dispatch: the docker run argv, and a full trial through a stand-in engine."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest

from aorta.registry import Environment
from aorta.runner import RunRequest, run_trials
from aorta.runner.launchers import docker_run_argv, gpu_device_args, image_digest

IMAGE = "rocm/pytorch:rocm6.2_ubuntu22.04"


def test_docker_argv_passes_env_mounts_devices_and_image_as_separate_items(tmp_path: Path) -> None:
    env = Environment(
        name="_inline_1234abcd", kind="docker", image=IMAGE, description="", env={"IN_IMAGE": "1"}
    )
    out, spec_dir = tmp_path / "out dir", tmp_path / "spec"
    argv = docker_run_argv(
        env,
        ["/spec/request.json", "3"],
        {"HSA_XNACK": "1", "TRICKY": "a b; rm -rf / $(x)"},
        [out, spec_dir],
        device_args=["--device=/dev/kfd", "--device=/dev/dri", "--group-add=video"],
        user="1000:1000",
    )
    assert argv[:3] == ["docker", "run", "--rm"]
    assert "--user=1000:1000" in argv
    assert f"--volume={out}:{out}" in argv and f"--volume={spec_dir}:{spec_dir}" in argv
    assert "--env=HSA_XNACK=1" in argv and "--env=IN_IMAGE=1" in argv
    # A hostile value stays one argv item: no shell ever sees it.
    assert "--env=TRICKY=a b; rm -rf / $(x)" in argv
    assert "--device=/dev/kfd" in argv and f"--workdir={out}" in argv
    image_at = argv.index(IMAGE)
    assert argv[image_at + 1 :] == ["python", "-m", "aorta.runner.child", "/spec/request.json", "3"]


def test_gpu_device_args_follow_the_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi
    assert gpu_device_args(tmp_path) == []
    (tmp_path / "kfd").write_text("")
    assert gpu_device_args(tmp_path)[:2] == ["--device=/dev/kfd", "--device=/dev/dri"]
    (tmp_path / "kfd").unlink()
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\n")
    smi.chmod(smi.stat().st_mode | stat.S_IEXEC)
    assert gpu_device_args(tmp_path) == ["--gpus=all"]


# A stand-in `docker` (boundary fake): answers `version` and runs `run`'s command locally with
# the --env variables, so the whole dispatch path runs without an engine.
FAKE_DOCKER = """#!{python}
import os, sys
args = sys.argv[1:]
if args[0] == "version":
    print("27.0-fake"); sys.exit(0)
if args[:2] == ["image", "inspect"]:
    digest = os.environ.get("FAKE_DOCKER_DIGEST")
    if not digest:
        print("Error: No such image", file=sys.stderr); sys.exit(1)
    print(digest); sys.exit(0)
assert args[0] == "run", args
env = dict(os.environ)
rest = args[1:]
while rest[0].startswith("--"):
    flag = rest.pop(0)
    if flag.startswith("--env="):
        key, _, value = flag[len("--env="):].partition("=")
        env[key] = value
image = rest.pop(0)
env["FAKE_DOCKER_IMAGE"] = image
with open(os.environ["FAKE_DOCKER_LOG"], "a") as log:
    log.write(" ".join(args) + "\\n")
cmd = [sys.executable if rest[0] == "python" else rest[0], *rest[1:]]
os.execve(cmd[0], cmd, env)
"""


@pytest.mark.usefixtures("plugin")
def test_docker_trials_run_through_the_engine_with_their_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "docker"
    fake.write_text(FAKE_DOCKER.format(python=sys.executable))
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    log = tmp_path / "docker.log"
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_DOCKER_LOG", str(log))
    env = Environment(name="_inline_0badcafe", kind="docker", image="busybox:1", description="")
    request = RunRequest(
        workload="toy",
        output_dir=tmp_path / "out",
        mitigations=("plugin_fix",),
        environment=env,
        trials=2,
        steps=3,
    )
    results = run_trials(request)
    assert [r.passed for r in results] == [True, True]
    assert all(r.execution == "child_process" for r in results)
    assert results[0].observed["AORTA_TOY_FIX"] == "1"  # the mitigation reached the container
    assert results[0].environment == "_inline_0badcafe"
    calls = log.read_text().splitlines()
    assert len(calls) == 2 and all("busybox:1 python -m aorta.runner.child" in c for c in calls)
    saved = json.loads((tmp_path / "out" / "trial_1.json").read_text())
    assert saved["env_applied"] == {"AORTA_TOY_FIX": "1", "AORTA_SEED": "1", "PYTHONHASHSEED": "1"}
    # Each trial's own seed reached its container.
    assert "--env=AORTA_SEED=0" in calls[0] and "--env=AORTA_SEED=1" in calls[1]


def _fake_docker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "docker"
    fake.write_text(FAKE_DOCKER.format(python=sys.executable))
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_DOCKER_LOG", str(tmp_path / "docker.log"))


DIGEST = "busybox@sha256:" + "ab" * 32


def test_image_digest_is_what_the_engine_reports_or_unresolved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no docker client at all
    assert image_digest("busybox:1") == "unresolved"
    assert image_digest(DIGEST) == DIGEST  # a pinned reference is its own digest
    _fake_docker(tmp_path, monkeypatch)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}/usr/bin:/bin")
    assert image_digest("busybox:1") == "unresolved"  # the engine does not hold it
    monkeypatch.setenv("FAKE_DOCKER_DIGEST", DIGEST)
    assert image_digest("busybox:1") == DIGEST


@pytest.mark.usefixtures("plugin")
def test_triage_records_the_digest_of_the_image_that_ran(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from aorta.triage.lifecycle import run_recipe
    from aorta.triage.recipe import recipe_from_flags

    _fake_docker(tmp_path, monkeypatch)
    monkeypatch.setenv("FAKE_DOCKER_DIGEST", DIGEST)
    recipe = recipe_from_flags(
        workload="toy",
        mitigation_axis=["none"],
        environment_axis=["local", "image:busybox:1"],
        trials=1,
        steps=2,
    )
    report = run_recipe(recipe, tmp_path / "results")
    data = json.loads((report.run_dir / "matrix.json").read_text())
    environments = {c["name"]: c["environment"] for c in data["cells"]}
    docker_cell = next(name for name in environments if "_inline_" in name)
    assert environments[docker_cell]["image_digest"] == DIGEST
    assert "image_digest" not in environments["none-local"]
    env_name = environments[docker_cell]["name"]
    recorded = json.loads((report.run_dir / "environments" / env_name / "image.json").read_text())
    assert recorded == {"image": "busybox:1", "digest": DIGEST}
