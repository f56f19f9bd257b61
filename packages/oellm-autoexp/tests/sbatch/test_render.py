"""SBATCH rendering: quoting (scripts really run under bash), templates, static checks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from oellm_autoexp.config.loader import parse_config
from oellm_autoexp.config.schema import RootConfig
from oellm_autoexp.errors import ConfigError
from oellm_autoexp.planning import build_plan, write_plan
from oellm_autoexp.slurm.render import quoted_tokens
from oellm_autoexp.slurm.validate import check_script, lint_script

EVIL = ["$(touch PWNED)", "`touch PWNED`", "a'b\"c", "x; touch PWNED", "$HOME", "\\n", "  sp  "]
# A command that records exactly the argv and env it received.
# Literal braces are doubled: argv elements are str.format templates.
RECORDER = [
    sys.executable,
    "-c",
    "import json,os,sys; json.dump({{'argv': sys.argv[1:], "
    "'env': os.environ.get('EVIL', '')}}, open('got.json', 'w'))",
]


def config(tmp_path: Path, **slurm: Any) -> RootConfig:
    return parse_config(
        {
            "project": {"name": "q", "base_output_dir": str(tmp_path / "out")},
            "backend": {
                "class_name": "CommandBackend",
                "argv": [*RECORDER, "{value}", "{name}"],
                "env": {"EVIL": "{value}"},
            },
            "sweep": {"axes": {"value": EVIL}, "name_template": "q_{index}"},
            "slurm": {"use_srun": False, "test_only": "never", **slurm},
        }
    )


def run_task(script: Path, task: int | None, cwd: Path) -> dict[str, Any]:
    env = {"PATH": os.environ["PATH"], "HOME": "/nonexistent"}
    if task is not None:
        env["SLURM_ARRAY_TASK_ID"] = str(task)
    subprocess.run(["bash", str(script)], cwd=cwd, env=env, check=True, capture_output=True)
    got: dict[str, Any] = json.loads((cwd / "got.json").read_text())
    return got


@pytest.mark.parametrize("array", [True, False])
def test_hostile_values_reach_the_command_unchanged_and_never_run(
    tmp_path: Path, array: bool
) -> None:
    result = build_plan(config(tmp_path, array=array))
    write_plan(result, test_only="never")
    for job in result.plan.jobs:
        cwd = tmp_path / f"run{job.index}"
        cwd.mkdir()
        task = job.array.task_index if job.array else None
        got = run_task(job.script, task, cwd)
        assert got == {"argv": [EVIL[job.index], job.name], "env": EVIL[job.index]}
        assert job.output_dir.is_dir()  # the script creates the job's own directory
    assert not list(tmp_path.rglob("PWNED"))


def test_unknown_array_task_exits_with_an_error(tmp_path: Path) -> None:
    result = build_plan(config(tmp_path))
    write_plan(result, test_only="never")
    done = subprocess.run(
        ["bash", str(result.plan.scripts[0].path)],
        env={"PATH": os.environ["PATH"], "SLURM_ARRAY_TASK_ID": "99"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert "no task 99 in this array" in done.stderr


def test_cluster_specifics_come_from_config(tmp_path: Path) -> None:
    cfg = config(
        tmp_path,
        use_srun=True,
        srun_args="--cpu-bind=none --export='ALL'",
        launcher_cmd="apptainer exec --nv '/images/a b.sif'",
        sbatch={"partition": "gpu", "gres": "gpu:4", "exclusive": True, "qos": None},
        extra_directives=["--constraint=a100&ib"],
        env={"NCCL_DEBUG": "INFO", "WEIRD": "a b$c"},
        prologue=['export MASTER_ADDR="$(hostname)"'],
    )
    text = next(iter(build_plan(cfg).scripts.values()))
    lines = text.splitlines()
    assert "#SBATCH --partition=gpu" in lines
    assert "#SBATCH --gres=gpu:4" in lines
    assert "#SBATCH --exclusive" in lines
    assert not any("qos" in line for line in lines)
    assert "#SBATCH --constraint=a100&ib" in lines
    assert "export WEIRD='a b$c'" in lines
    assert 'export MASTER_ADDR="$(hostname)"' in lines  # prologue is verbatim config code
    assert "srun --cpu-bind=none --export=ALL apptainer exec --nv '/images/a b.sif' " in text


def test_config_command_strings_are_split_like_a_shell_and_every_token_quoted() -> None:
    assert quoted_tokens("a; rm -rf /", key="k") == "'a;' rm -rf /"
    assert quoted_tokens("exec --bind '/x y:/z' img", key="k") == "exec --bind '/x y:/z' img"
    assert quoted_tokens("$(id)", key="k") == "'$(id)'"


def test_template_missing_required_placeholder_is_rejected(tmp_path: Path) -> None:
    template = tmp_path / "t.j2"
    template.write_text("#!/bin/bash\n#SBATCH --job-name={{ job_name }}\n{{ tasks }}\n")
    with pytest.raises(ConfigError, match=r"never uses required placeholder \{\{ log_path \}\}"):
        build_plan(config(tmp_path, template=str(template)))


def test_template_with_undefined_variable_is_rejected_before_rendering(tmp_path: Path) -> None:
    builtin = Path(__file__).resolve().parents[2] / "src/oellm_autoexp/slurm/templates"
    template = tmp_path / "t.j2"
    template.write_text((builtin / "default.sbatch.j2").read_text() + "{{ partition }}\n")
    with pytest.raises(ConfigError) as info:
        build_plan(config(tmp_path, template=str(template)))
    assert str(info.value).startswith(f"{template}: template uses undefined variable 'partition'")


def test_template_attribute_error_is_caught_by_strict_undefined(tmp_path: Path) -> None:
    builtin = Path(__file__).resolve().parents[2] / "src/oellm_autoexp/slurm/templates"
    template = tmp_path / "t.j2"
    text = (builtin / "default.sbatch.j2").read_text()
    assert '{{ task["name"] }}' in text
    template.write_text(text.replace('{{ task["name"] }}', "{{ task.nmae }}"))
    with pytest.raises(ConfigError, match=r"template uses an undefined value: .*nmae"):
        build_plan(config(tmp_path, template=str(template)))


def test_template_syntax_error_names_the_line(tmp_path: Path) -> None:
    template = tmp_path / "t.j2"
    template.write_text("#!/bin/bash\n{% for x in tasks %}\n")
    with pytest.raises(ConfigError) as info:
        build_plan(config(tmp_path, template=str(template)))
    assert str(info.value).startswith(f"{template}:")
    assert "template syntax error" in str(info.value)


def test_missing_template_file_and_unknown_builtin(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        build_plan(config(tmp_path, template=str(tmp_path / "nope.j2")))
    assert info.value.key == "slurm.template" and "template file not found" in str(info.value)
    with pytest.raises(ConfigError, match="no built-in template 'fancy'"):
        build_plan(config(tmp_path, template="fancy"))


GOOD = "#!/bin/bash\n#SBATCH --job-name=a\n#SBATCH --array=0-3%2\n#SBATCH -N 2\nset -e\necho hi\n"


def test_lint_accepts_a_good_script() -> None:
    assert lint_script(GOOD, job_name="a", array_spec="0-3%2") == []


@pytest.mark.parametrize(
    ("text", "job_name", "array_spec", "words"),
    [
        (GOOD, "b", "0-3%2", "--job-name=a but the plan says b"),
        (GOOD, "a", "0-1", "expected one #SBATCH --array=0-1"),
        (GOOD, "a", None, "--array in a single-job script"),
        (GOOD + "#SBATCH --time=1\n", "a", "0-3%2", "ignored by sbatch"),
        (GOOD.replace("-N 2", "--time 1:00 extra"), "a", "0-3%2", "malformed directive"),
        (GOOD.replace("#!/bin/bash\n", ""), "a", "0-3%2", "#! interpreter"),
        (GOOD.replace("#SBATCH --job-name=a\n", ""), "a", "0-3%2", "found 0"),
    ],
)
def test_lint_finds_each_problem(
    text: str, job_name: str, array_spec: str | None, words: str
) -> None:
    messages = [
        issue.message for issue in lint_script(text, job_name=job_name, array_spec=array_spec)
    ]
    assert any(words in m for m in messages), messages


def test_check_script_names_file_and_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        check_script(
            tmp_path / "s.sbatch", GOOD + "#SBATCH --time=1\n", job_name="a", array_spec="0-3%2"
        )
    assert str(info.value).startswith(f"{tmp_path / 's.sbatch'}:7: ")


def test_every_rendered_script_passes_the_static_checks(tmp_path: Path) -> None:
    result = build_plan(config(tmp_path, sbatch={"time": "00:01:00"}, max_array_size=3))
    for script in result.plan.scripts:
        text = result.scripts[script.path]
        assert lint_script(text, job_name=script.job_name, array_spec=script.array_spec) == []


@settings(
    max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(
        st.text(
            st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=12
        ),
        min_size=1,
        max_size=4,
        unique=True,
    )
)
def test_any_text_value_reaches_the_command_byte_for_byte(
    tmp_path: Path, values: list[str]
) -> None:
    root = Path(tempfile.mkdtemp(dir=tmp_path))  # one fresh root per example
    cfg = parse_config(
        {
            "project": {"name": "h", "base_output_dir": str(root / "out")},
            "backend": {
                "class_name": "CommandBackend",
                "argv": [*RECORDER, "{value}", "{name}"],
                "env": {"EVIL": "{value}"},
            },
            "sweep": {"axes": {"value": values}, "name_template": "h_{index}"},
            "slurm": {"use_srun": False, "test_only": "never"},
        }
    )
    result = build_plan(cfg)
    write_plan(result, test_only="never")
    for job in result.plan.jobs:
        cwd = root / f"run{job.index}"
        cwd.mkdir(parents=True)
        task = job.array.task_index if job.array else None
        assert run_task(job.script, task, cwd) == {
            "argv": [values[job.index], job.name],
            "env": values[job.index],
        }
