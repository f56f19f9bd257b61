"""Container command construction (apptainer and singularity), bind/env checks, dry-run parsing."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from oellm_autoexp.container import (
    ContainerSpec,
    check_binds,
    exec_argv,
    find_runtime,
    parse_dry_run,
    parse_env,
    plan_command,
)
from oellm_autoexp.errors import AutoexpRunError, AutoexpUsageError, ConfigError


@pytest.mark.parametrize("runtime", ["apptainer", "singularity"])
def test_exec_argv_binds_env_pwd_then_image_and_command(runtime: str, tmp_path: Path) -> None:
    spec = ContainerSpec(
        image="/images/megatron 25.04.sif",
        runtime=runtime,
        binds=("/scratch:/scratch", "/data:/data:ro"),
        env={"WANDB_MODE": "offline", "NOTE": "it's $HOME; `rm -rf /`"},
        extra_args=("--nv",),
    )
    command = plan_command("cfg.yaml", ["sweep.axes.lr=[1,2]"], config_dir=None, python="python3")
    argv = exec_argv(spec, command, workdir=tmp_path)
    assert argv == [
        runtime,
        "exec",
        "--bind",
        str(tmp_path),
        "--bind",
        "/scratch:/scratch",
        "--bind",
        "/data:/data:ro",
        "--env",
        "WANDB_MODE=offline",
        "--env",
        "NOTE=it's $HOME; `rm -rf /`",
        "--pwd",
        str(tmp_path),
        "--nv",
        "/images/megatron 25.04.sif",
        "python3",
        "-m",
        "oellm_autoexp.cli",
        "submit",
        "cfg.yaml",
        "sweep.axes.lr=[1,2]",
        "--dry-run",
    ]
    # What the user is shown pastes back into a shell as the same argv.
    assert shlex.split(shlex.join(argv)) == argv


def test_unknown_runtime_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="expected apptainer or singularity, got 'docker'"):
        exec_argv(ContainerSpec(image="x.sif", runtime="docker"), ["true"], workdir=tmp_path)


def test_binds_are_made_absolute_and_missing_sources_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "data").mkdir()
    monkeypatch.chdir(tmp_path)
    assert check_binds(["data:/data:ro", str(tmp_path)], key="container.bind") == (
        f"{tmp_path / 'data'}:/data:ro",
        str(tmp_path),
    )
    with pytest.raises(ConfigError) as err:
        check_binds(["data", "nope:/nope"], key="container.bind")
    assert str(err.value) == "container.bind[1]: bind source 'nope' does not exist on this host"
    with pytest.raises(ConfigError, match="no source path"):
        check_binds([":/x"], key="--bind")
    # --bind splits on ',' (several binds): a path holding one would be misread
    (tmp_path / "a,b").mkdir()
    with pytest.raises(ConfigError, match="cannot be passed to --bind"):
        check_binds(["a,b"], key="--bind")


def test_a_working_directory_bind_cannot_express_is_refused(tmp_path: Path) -> None:
    odd = tmp_path / "run:1"
    with pytest.raises(AutoexpUsageError, match="contains ',' or ':'"):
        exec_argv(ContainerSpec(image="x.sif"), ["true"], workdir=odd)


def test_env_items_need_a_variable_name() -> None:
    assert parse_env(["A=1", "B_2=x=y", "EMPTY="]) == {"A": "1", "B_2": "x=y", "EMPTY": ""}
    for bad in ["NOVALUE", "=1", "1A=2", "A-B=3"]:
        with pytest.raises(AutoexpUsageError, match="expected NAME=VALUE"):
            parse_env([bad])


def test_runtime_from_path_or_explicit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(AutoexpUsageError, match="neither apptainer nor singularity is on PATH"):
        find_runtime(None)
    tool = tmp_path / "singularity"
    tool.write_text("#!/bin/sh\n", encoding="utf-8")
    tool.chmod(0o755)
    assert find_runtime(None) == "singularity"
    assert find_runtime("apptainer") == "apptainer"  # explicit wins, even if absent here
    with pytest.raises(AutoexpUsageError):
        find_runtime("podman")


def test_dry_run_output_is_parsed_after_the_last_marker() -> None:
    stdout = "\n".join(
        [
            "# ---- /out/plans/p/scripts/a.sbatch",
            "#!/bin/bash",
            "# ---- sbatch commands (a script could contain this line)",
            "echo hi",
            "# ---- sbatch commands (dry run: nothing was submitted)",
            "sbatch --parsable /out/plans/p/scripts/a.sbatch",
            "sbatch --parsable '/out/with space/plans/p/scripts/b.sbatch'",
            "",
        ]
    )
    assert parse_dry_run(stdout) == [
        ["sbatch", "--parsable", "/out/plans/p/scripts/a.sbatch"],
        ["sbatch", "--parsable", "/out/with space/plans/p/scripts/b.sbatch"],
    ]
    with pytest.raises(AutoexpRunError, match="no dry-run marker"):
        parse_dry_run("plan abc: 2 jobs\n")
    with pytest.raises(AutoexpRunError, match="unreadable sbatch command"):
        parse_dry_run("# ---- sbatch commands\nsbatch 'unclosed\n")
