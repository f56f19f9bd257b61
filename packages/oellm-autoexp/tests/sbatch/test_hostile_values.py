"""Hostile values at every place a config value lands in a rendered SBATCH script (issue 18 §1).

Each value of the corpus is put in one place at a time. Either the planner refuses it with one
line naming the key, or the rendered script, run under bash, hands the exact value to the command
and runs nothing else (no PWNED file), with its `#SBATCH` header unchanged.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest

from oellm_autoexp.cli import main
from oellm_autoexp.config.loader import parse_config
from oellm_autoexp.errors import ConfigError
from oellm_autoexp.planning import build_plan
from oellm_autoexp.slurm.render import shell_word
from oellm_autoexp.slurm.validate import check_script

CORPUS = [
    "a\nb",
    "x\n#SBATCH --job-name=evil\ntouch PWNED",
    "$(touch PWNED)",
    "`touch PWNED`",
    "a'b\"c",
    "x; touch PWNED",
    "x\x00y",
    "a\rb\x0b\x0c\x1b[31m\x7f",
    "a\u2028b\x85c",
    "back\\slash\\",
    "' ; touch PWNED ; '",
    "$'\\n'",
    "%j%%x",
]
# Records the argv and two env variables it receives, in bash (a Python recorder per value
# would make this test ten times slower). Doubled braces: argv are str.format templates.
RECORDER = [
    "bash",
    "-c",
    'printf \'%s\\0\' "$@" > argv.bin; printf %s "${{EVIL-}}" > env.bin; '
    'printf %s "${{CLUSTER-}}" > cluster.bin',
    "recorder",
]
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_SBATCH_UNSAFE = re.compile(r"[\s'\"\\\x00-\x1f\x7f]")


def _config(tmp_path: Path, value: str, place: str) -> dict[str, Any]:
    slurm: dict[str, Any] = {"use_srun": False, "test_only": "never", "array": False}
    backend: dict[str, Any] = {"class_name": "CommandBackend", "argv": [*RECORDER]}
    project = {"name": "q", "base_output_dir": str(tmp_path / "out")}
    sweep: dict[str, Any] = {"name_template": "q_{index}"}
    if place == "argv":
        backend["argv"].append(value.replace("{", "{{").replace("}", "}}"))
    elif place == "sweep param":
        backend["argv"].append("{value}")
        sweep["axes"] = {"value": [value]}
    elif place == "backend env":
        backend["env"] = {"EVIL": value.replace("{", "{{").replace("}", "}}")}
    elif place == "slurm env":
        slurm["env"] = {"CLUSTER": value}
    elif place == "launcher_cmd":
        # One token of the launcher (an env assignment), quoted so shlex.split keeps it whole.
        slurm["launcher_cmd"] = "env " + shlex.quote(f"CLUSTER={value}")
    elif place == "base_output_dir":
        project["base_output_dir"] = str(tmp_path / "out" / value)
    elif place == "sbatch value":
        slurm["sbatch"] = {"comment": value}
    elif place == "sbatch sweep param":
        sweep["axes"] = {"slurm.sbatch.comment": [value]}
    elif place == "extra_directives":
        slurm["extra_directives"] = [f"--comment={value}"]
    elif place == "prologue":
        slurm["prologue"] = [f": {value}"]
    elif place == "project name":
        project["name"] = value
    elif place == "name_template":
        sweep["name_template"] = value.replace("{", "{{").replace("}", "}}")
    return {"project": project, "backend": backend, "sweep": sweep, "slurm": slurm}


PLACES = [
    "argv",
    "sweep param",
    "backend env",
    "slurm env",
    "launcher_cmd",
    "base_output_dir",
    "sbatch value",
    "sbatch sweep param",
    "extra_directives",
    "prologue",
    "project name",
    "name_template",
]
# The key an error must name for a value refused at each place.
KEYS = {
    "argv": "job q_0: command argument",
    "sweep param": "job q_0: command argument",
    "backend env": "job q_0: backend env.EVIL",
    "slurm env": "slurm.env.CLUSTER",
    "launcher_cmd": "slurm.launcher_cmd",
    "base_output_dir": "project.base_output_dir",
    "sbatch value": "slurm.sbatch.comment",
    "sbatch sweep param": "slurm.sbatch.comment",
    "extra_directives": "slurm.extra_directives[0]",
    "prologue": "slurm.prologue[0]",
    "project name": "project.name",
    "name_template": "sweep.name_template",
}


def _must_refuse(place: str, value: str) -> bool:
    """Where a value cannot be represented safely (the renderer's contract)."""
    if "\0" in value:
        return True
    if place in ("project name", "name_template"):
        return True  # names are plain words; every corpus value has a character outside them
    if place in ("sbatch value", "sbatch sweep param", "base_output_dir"):
        if place == "base_output_dir" and "%" in value:
            return True
        return bool(_SBATCH_UNSAFE.search(value))
    if place == "extra_directives":
        return bool(re.search(r"[\s\x00-\x1f\x7f]", value))  # one option, one word
    if place == "prologue":
        return bool(_CONTROL.search(value.replace("\t", "")))
    return False


def _run(script: Path, cwd: Path) -> dict[str, Any]:
    env = {"PATH": os.environ["PATH"], "HOME": "/nonexistent"}
    done = subprocess.run(["bash", str(script)], cwd=cwd, env=env, capture_output=True, check=False)
    assert done.returncode == 0, done.stderr

    def read(name: str) -> str:
        return (cwd / name).read_bytes().decode("utf-8")

    return {
        "argv": read("argv.bin").split("\0")[:-1],
        "env": read("env.bin"),
        "cluster": read("cluster.bin"),
    }


@pytest.mark.parametrize("place", PLACES)
def test_every_hostile_value_is_refused_or_arrives_exactly_and_runs_nothing(
    tmp_path: Path, place: str
) -> None:
    for number, value in enumerate(CORPUS):
        base = tmp_path / str(number)
        base.mkdir()
        data = _config(base, value, place)
        if _must_refuse(place, value):
            with pytest.raises(ConfigError) as info:
                build_plan(parse_config(data))
            message = str(info.value)
            assert "\n" not in message and "\0" not in message, (place, value)
            assert KEYS[place] in message, (place, value, message)
            continue
        result = build_plan(parse_config(data))
        (job,) = result.plan.jobs
        text = result.scripts[job.script]
        # write_plan's checks without its fsync (this loop writes 150 scripts).
        check_script(job.script, text, job_name=job.name, array_spec=None)
        job.script.parent.mkdir(parents=True)
        job.script.write_text(text)
        header = [line for line in text.split("\n") if line.startswith("#SBATCH")]
        assert header[0] == "#SBATCH --job-name=q_0", (place, value)
        assert not any("evil" in line for line in header), (place, value)
        if place == "prologue":
            # Config-author shell code by design (it runs): it must stay one line of the script.
            assert f": {value}" in text.split("\n"), value
            continue
        cwd = base / "run"
        cwd.mkdir()
        got = _run(job.script, cwd)
        if place in ("argv", "sweep param"):
            assert got["argv"] == [value], (place, value)
        elif place == "backend env":
            assert got["env"] == value, (place, value)
        elif place in ("slurm env", "launcher_cmd"):
            assert got["cluster"] == value, (place, value)
        assert not list(base.rglob("PWNED")), (place, value)
        assert job.output_dir.is_dir()


def test_values_with_control_characters_stay_on_one_script_line() -> None:
    for value in CORPUS:
        if "\0" in value:
            with pytest.raises(ConfigError, match=r"k: .*NUL character"):
                shell_word(value, key="k")
            continue
        word = shell_word(value, key="k")
        assert "\n" not in word and "\r" not in word
        echoed = subprocess.run(
            ["bash", "-c", f"printf %s {word}"], capture_output=True, check=True
        ).stdout
        assert echoed.decode("utf-8", "surrogateescape") == value


def test_cli_refuses_a_newline_in_the_output_root_with_exit_2_and_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(
        json.dumps(
            {
                "project": {"name": "q", "base_output_dir": f"{tmp_path}/x\ntouch {tmp_path}/P"},
                "backend": {"class_name": "CommandBackend", "argv": ["true"]},
                "slurm": {"test_only": "never"},
            }
        )
    )
    code = main(["plan", str(config)])
    err = capsys.readouterr().err
    assert code == 2
    assert len(err.strip().splitlines()) == 1
    assert "project.base_output_dir" in err and "control character" in err
    assert not (tmp_path / "P").exists() and not (tmp_path / "plans").exists()


def test_a_tampered_directive_read_back_for_a_restart_script_is_refused() -> None:
    from oellm_autoexp.config.schema import SlurmConfig
    from oellm_autoexp.slurm.render import Renderer, ScriptSpec, TaskSpec

    renderer = Renderer(SlurmConfig(use_srun=False), plan_id="p")
    task = TaskSpec(0, "id", "job", "/o", {}, ["true"])
    for bad in ["--comment=a\ntouch PWNED", "--comment=a b", "partition=x"]:
        with pytest.raises(ConfigError, match="job job: directive"):
            renderer.render(ScriptSpec("job", "/l/job_%j.out", None, [bad], [task]))
    ok = renderer.render(ScriptSpec("job", "/l/job_%j.out", None, ["--comment=a"], [task]))
    assert "#SBATCH --comment=a\n" in ok
