"""The built-in template rendered without Jinja2 gives exactly what Jinja2 gives for the .j2."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from jinja2 import Environment, StrictUndefined

from oellm_autoexp.config.schema import SlurmConfig
from oellm_autoexp.slurm.default_script import render_default
from oellm_autoexp.slurm.render import BUILTIN_TEMPLATES, Renderer, ScriptSpec, TaskSpec

TEMPLATE = (BUILTIN_TEMPLATES / "default.sbatch.j2").read_text(encoding="utf-8")
# The settings `Renderer` gives Jinja2 for a template file.
JINJA = Environment(
    undefined=StrictUndefined, keep_trailing_newline=True, autoescape=False
).from_string(TEMPLATE)


def _jinja(values: dict[str, Any]) -> str:
    return str(JINJA.render(**values))


def _task(index: int, env_lines: int) -> dict[str, Any]:
    return {
        "index": index,
        "job_id": f"id{index:03d}",
        "name": f"job_{index}",
        "output_dir": f"/out/jobs/job_{index}",
        "env_exports": [f"export E{n}='v {n}'" for n in range(env_lines)],
        "command": f"python train.py --lr 0.{index} 'a b'",
    }


CASES = list(
    itertools.product(
        (None, "0-2%4"),  # array spec
        (0, 1, 3),  # tasks
        (0, 2),  # export lines per task
        ([], ["--time=01:00:00", "--nodes=2"]),  # directives
        ([], ["export A=1", "export B='x y'"]),  # cluster env
        ([], ["module load x", "ulimit -c 0"]),  # prologue
        ("", "srun --mpi=pmix "),  # launch prefix
    )
)


@pytest.mark.parametrize(
    ("array_spec", "tasks", "task_env", "directives", "env", "prologue", "prefix"), CASES
)
def test_every_branch_renders_as_the_jinja_template_does(
    array_spec: str | None,
    tasks: int,
    task_env: int,
    directives: list[str],
    env: list[str],
    prologue: list[str],
    prefix: str,
) -> None:
    values: dict[str, Any] = {
        "job_name": "proj_a0",
        "log_path": "/out/logs/proj_a0_%A_%a.out",
        "array_spec": array_spec,
        "directives": directives,
        "env_exports": env,
        "tasks": [_task(i, task_env) for i in range(tasks)],
        "prologue": prologue,
        "launch_prefix": prefix,
        "plan_id": "abc123def456",
    }
    assert render_default(**values) == _jinja(values)


def test_the_renderer_uses_jinja_only_for_a_template_file(tmp_path: Path) -> None:
    custom = tmp_path / "custom.sbatch.j2"
    custom.write_text(TEMPLATE)  # the same text, as a user's copy: rendered by Jinja2
    spec = ScriptSpec(
        "p_a0",
        "/out/logs/p_a0_%A_%a.out",
        "0-1",
        ("--time=01:00:00",),
        [
            TaskSpec(i, f"id{i}", f"j{i}", f"/out/jobs/j{i}", {"X": "1"}, ["run", "a b"])
            for i in (0, 1)
        ],
    )
    builtin = Renderer(SlurmConfig(use_srun=False), plan_id="p")
    copied = Renderer(SlurmConfig(use_srun=False, template=str(custom)), plan_id="p")
    assert builtin.render(spec) == copied.render(spec)
    assert "AUTOEXP_CMD=(run 'a b')" in builtin.render(spec)
