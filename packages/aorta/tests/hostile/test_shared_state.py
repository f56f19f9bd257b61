"""Hostile-input corpus: a run directory someone else can write steers nothing (issue 23 §1).

Trust by ownership (as OpenSSH's StrictModes): `--resume` refuses, in one line and before any
trial runs, a run directory (or the recipe, signature or SLURM state in it) that another user
owns or that group or others can write. Read-back variables pass an allowlist, not a denylist:
every variable the co-tenant attacks used is refused without `--trust-environments`, and a
real crafted `.pyc` behind a planted `PYTHONPYCACHEPREFIX` (shown to run when the variable
reaches an interpreter) never runs on a plain `--resume`.
"""

from __future__ import annotations

import importlib.util
import os
import py_compile
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

import aorta
from aorta.cli.main import main
from aorta.runner.models import RunRequest
from aorta.strict_modes import SharedStateError
from aorta.triage import lifecycle
from aorta.triage.recipe import (
    UntrustedRecipeError,
    check_trust,
    load_recipe,
    recipe_from_flags,
    resolved_recipe_dict,
)
from aorta.triage.run import local as triage_runner

pytestmark = pytest.mark.usefixtures("plugin")

ALLOW = "--allow-shared-writable"


def _resolved() -> dict[str, Any]:
    recipe = recipe_from_flags(
        workload="toy",
        mitigation_axis=["none", "plugin_fix"],
        environment_axis=["local"],
        trials=2,
        steps=2,
    )
    return resolved_recipe_dict(recipe)


def _run_dir(tmp_path: Path, data: dict[str, Any]) -> Path:
    run_dir = tmp_path / "shared" / "run"
    run_dir.mkdir(parents=True, mode=0o700)
    (run_dir / "recipe.resolved.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    (run_dir / "recipe.resolved.yaml").chmod(0o600)
    return run_dir


class _NoTrials:
    def __call__(self, request: RunRequest, reporter: object = None) -> list[object]:
        raise AssertionError(f"a trial ran for {request.output_dir}")


@pytest.fixture
def no_trials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(triage_runner, "run_trials", _NoTrials())


def _resume_refused(capsys: pytest.CaptureFixture[str], *argv: str) -> list[str]:
    assert main(["triage", "run", "--resume", *argv]) == 2
    return capsys.readouterr().err.strip().splitlines()


@pytest.mark.usefixtures("no_trials")
@pytest.mark.parametrize(
    ("target", "mode", "reason"),
    [
        ("", 0o770, "the run directory is writable by group (mode 0770)"),
        ("", 0o707, "the run directory is writable by group and others (mode 0707)"),
        ("recipe.resolved.yaml", 0o666, "writable by group and others (mode 0666)"),
        ("slurm/sessions", 0o775, "steers execution is writable by group (mode 0775)"),
        ("slurm/sessions/s1.json", 0o620, "writable by group (mode 0620)"),
    ],
)
def test_state_others_can_write_is_refused_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], target: str, mode: int, reason: str
) -> None:
    run_dir = _run_dir(tmp_path, _resolved())
    sessions = run_dir / "slurm" / "sessions"
    sessions.mkdir(parents=True, mode=0o700)
    (sessions / "s1.json").write_text("{}")
    (sessions / "s1.json").chmod(0o600)
    (run_dir / target).chmod(mode)
    (line,) = _resume_refused(capsys, str(run_dir))
    assert str(run_dir / target) in line or str(run_dir) in line
    assert reason in line
    assert ALLOW in line
    # The library entry point refuses too (the CLI is not the only way in).
    with pytest.raises(SharedStateError, match="someone else could change what it runs"):
        lifecycle.resume_run(run_dir)


@pytest.mark.skipif(os.geteuid() != 0, reason="planting another user's file needs root")
@pytest.mark.usefixtures("no_trials")
def test_a_session_file_another_user_owns_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = _run_dir(tmp_path, _resolved())
    planted = run_dir / "slurm" / "sessions" / "s1.json"
    planted.parent.mkdir(parents=True, mode=0o700)
    planted.write_text('{"config": {"slurm": {"submit_cmd": "touch /tmp/pwned; sbatch"}}}')
    planted.chmod(0o600)
    os.chown(planted, 4242, 4242)
    (line,) = _resume_refused(capsys, str(run_dir))
    assert f"{planted}: a run file that steers execution is owned by uid 4242" in line


def test_allow_shared_writable_waives_only_the_ownership_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _resolved()
    data["cells"][1]["environment"].update(name="venv1", kind="venv", python="/opt/evil/python")
    run_dir = _run_dir(tmp_path, data)
    run_dir.chmod(0o777)
    lines = _resume_refused(capsys, str(run_dir), ALLOW)
    assert lines[0] == (f"aorta triage: {ALLOW}: not checking who owns or can write {run_dir}")
    # Past the ownership check, the registry check still holds.
    assert "environment venv1 runs interpreter /opt/evil/python" in lines[1]
    assert "pass --trust-environments" in lines[1]


# Every variable the co-tenant attacks of issue 23 used; a denylist caught 3 of them.
ATTACK_VARIABLES = {
    "PYTHONPYCACHEPREFIX": "/shared/evil-pycache",
    "CXX": "/shared/evil/g++",
    "CC": "/shared/evil/gcc",
    "TRITON_PTXAS_PATH": "/shared/evil/ptxas",
    "CUDA_INJECTION64_PATH": "/shared/evil/inject.so",
    "NCCL_NET_PLUGIN": "/shared/evil/plugin.so",
    "PYTHONWARNINGS": "ignore::evil.Module",
    "GCONV_PATH": "/shared/evil/gconv",
    "SHELLOPTS": "xtrace",
    "PS4": "$(touch /tmp/pwned)",
    "OMP_TOOL_LIBRARIES": "/shared/evil/tool.so",
    "LD_PRELOAD": "/shared/evil.so",
    "PYTHONHOME": "/shared/evil",
    "LD_AUDIT": "/shared/audit.so",
    "PYTHONPATH": "/shared/evil",
    "BASH_ENV": "/shared/evil.sh",
    "TORCHINDUCTOR_CACHE_DIR": "/shared/evil-cache",
    "TRITON_CACHE_DIR": "/shared/evil-cache",
    "NODE_OPTIONS": "--require /shared/evil.js",
}


@pytest.mark.parametrize("name", sorted(ATTACK_VARIABLES))
def test_a_read_back_variable_outside_the_allowlist_needs_trust(tmp_path: Path, name: str) -> None:
    data = _resolved()
    data["cells"][0]["extra_env"][name] = ATTACK_VARIABLES[name]
    data["cells"][0]["env"][name] = ATTACK_VARIABLES[name]
    recipe_path = _run_dir(tmp_path, data) / "recipe.resolved.yaml"
    with pytest.raises(UntrustedRecipeError, match=f"cell none-local: sets {name}="):
        check_trust(load_recipe(recipe_path), label=str(recipe_path), trusted=False)


@pytest.mark.parametrize(
    ("name", "value", "vouched"),
    [
        ("CUDA_VISIBLE_DEVICES", "0,1", True),
        ("OMP_NUM_THREADS", "4", True),
        ("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True", True),
        ("AORTA_TOY_FIX", "1", True),  # what the registered plugin_fix sets
        ("AORTA_TOY_FIX", "2", False),  # ... but not to this value
        ("CUDA_VISIBLE_DEVICES", "/shared/evil", False),  # an allowlisted name with a path
        ("SOMETHING_NEW", "1", False),
    ],
)
def test_the_registry_and_a_short_allowlist_vouch_for_plain_settings(
    tmp_path: Path, name: str, value: str, vouched: bool
) -> None:
    data = _resolved()
    data["cells"][0]["extra_env"][name] = value
    data["cells"][0]["env"][name] = value
    recipe_path = _run_dir(tmp_path, data) / "recipe.resolved.yaml"
    actions = check_trust(load_recipe(recipe_path), label=str(recipe_path), trusted=True)
    assert (actions == []) is vouched


@pytest.mark.usefixtures("no_trials")
def test_a_planted_pycache_prefix_is_refused_on_resume(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _resolved()
    data["cells"][1]["extra_env"]["PYTHONPYCACHEPREFIX"] = str(tmp_path / "evil")
    data["cells"][1]["env"]["PYTHONPYCACHEPREFIX"] = str(tmp_path / "evil")
    run_dir = _run_dir(tmp_path, data)
    (line,) = _resume_refused(capsys, str(run_dir))
    assert "cell plugin_fix-local: sets PYTHONPYCACHEPREFIX=" in line
    assert "not in the read-back allowlist" in line


def _plant_pyc(prefix: Path, module_file: str, canary: Path) -> Path:
    """A real crafted bytecode file under the cache prefix `prefix`: the module's own code,
    followed by a line that writes `canary`. Unchecked-hash bytecode is never compared with
    its source, so an interpreter with ``PYTHONPYCACHEPREFIX=prefix`` runs it instead."""
    source = Path(module_file).read_text(encoding="utf-8")
    evil = prefix / "evil_source.py"
    prefix.mkdir()
    evil.write_text(f"{source}\nopen({str(canary)!r}, 'w').write('pwned')\n", encoding="utf-8")
    saved = sys.pycache_prefix
    sys.pycache_prefix = str(prefix)  # where `cache_from_source` then looks, as the child will
    try:
        cached = importlib.util.cache_from_source(module_file)
    finally:
        sys.pycache_prefix = saved
    py_compile.compile(
        str(evil),
        cfile=cached,
        dfile=module_file,
        doraise=True,
        invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
    )
    return Path(cached)


def test_a_real_planted_pyc_never_runs_on_resume_without_trust(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    canary = tmp_path / "canary"
    prefix = tmp_path / "evil-pycache"
    # Every trial child starts with `python -m aorta.runner.child`: aorta's __init__ comes first.
    planted = _plant_pyc(prefix, aorta.__file__, canary)
    assert planted.is_relative_to(prefix)
    # The attack works: an interpreter given the variable runs the planted code.
    env = {**os.environ, "PYTHONPYCACHEPREFIX": str(prefix)}
    subprocess.run([sys.executable, "-c", "import aorta"], env=env, check=True, timeout=60)
    assert canary.read_text() == "pwned"
    canary.unlink()
    # The run directory's resolved recipe gained the variable, and its mitigation was made
    # process-scoped, so that the trials run in fresh interpreters, where the variable acts.
    data = _resolved()
    for cell in data["cells"]:
        cell["extra_env"]["PYTHONPYCACHEPREFIX"] = str(prefix)
        cell["env"]["PYTHONPYCACHEPREFIX"] = str(prefix)
    data["cells"][1]["mitigations"][0]["process_scoped"] = True
    run_dir = _run_dir(tmp_path, data)
    (line,) = _resume_refused(capsys, str(run_dir))
    assert "sets PYTHONPYCACHEPREFIX=" in line and "--trust-environments" in line
    assert not canary.exists()
    assert not any(run_dir.glob("cells/*/trial_*.json"))  # refused before any trial
    # What the refusal prevented: the user who vouches for it runs the planted code.
    assert main(["triage", "run", "--resume", str(run_dir), "--trust-environments"]) == 0
    assert "trusted (--trust-environments): cell plugin_fix-local: sets PYTHONPYCACHEPREFIX" in (
        capsys.readouterr().err
    )
    assert canary.read_text() == "pwned"


def test_the_refusal_never_prints_a_secret_it_lists(tmp_path: Path) -> None:
    data = _resolved()
    token = "hf_" + "a1B2c3D4" * 5
    data["cells"][0]["extra_env"]["HF_TOKEN"] = token
    data["cells"][0]["env"]["HF_TOKEN"] = token
    recipe_path = _run_dir(tmp_path, data) / "recipe.resolved.yaml"
    with pytest.raises(UntrustedRecipeError) as caught:
        check_trust(load_recipe(recipe_path), label=str(recipe_path), trusted=False)
    assert "HF_TOKEN='<redacted>'" in str(caught.value)
    assert token not in str(caught.value)
