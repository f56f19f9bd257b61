"""build_plan / write_plan: jobs, arrays, paths, per-job config, artifacts."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from compoconf import register

from oellm_autoexp.config.interfaces import MonitorConfigBase, MonitorInterface
from oellm_autoexp.config.loader import parse_config
from oellm_autoexp.config.schema import RootConfig
from oellm_autoexp.errors import ConfigError
from oellm_autoexp.plan import JobPlan, Plan
from oellm_autoexp.planning import build_plan, write_plan


@dataclass
class _PlanTestMonitorConfig(MonitorConfigBase):
    """A monitor config registered by this test: the extension point works for any monitor."""

    check_every: float = 1.0


@register
class _PlanTestMonitor(MonitorInterface):
    config_class = _PlanTestMonitorConfig


def config(tmp_path: Path, **sections: Any) -> RootConfig:
    data: dict[str, Any] = {
        "project": {"name": "proj", "base_output_dir": str(tmp_path / "out")},
        "backend": {"class_name": "CommandBackend", "argv": ["run", "--lr", "{lr}", "{name}"]},
        "sweep": {"axes": {"lr": [0.1, 0.2, 0.3]}},
        "slurm": {"use_srun": False, "test_only": "never"},
    }
    for key, value in sections.items():
        data[key] = {**data.get(key, {}), **value} if isinstance(value, dict) else value
    return parse_config(data)


def test_a_sweep_becomes_one_array_with_a_job_plan_per_point(tmp_path: Path) -> None:
    result = build_plan(config(tmp_path))
    plan = result.plan
    assert len(plan.jobs) == 3 and len(plan.scripts) == 1
    script = plan.scripts[0]
    assert script.array_spec == "0-2"
    assert script.job_ids == tuple(job.job_id for job in plan.jobs)
    job = plan.jobs[1]
    assert job.command == ("run", "--lr", "0.2", job.name)
    assert job.name == f"proj_{job.job_id}"
    assert job.array is not None and job.array.task_index == 1
    assert job.output_dir == tmp_path / "out" / "jobs" / job.name
    assert job.log_path == str(tmp_path / "out" / "logs" / "proj_a0_%A_%a.out")
    assert job.resolved_log_path("4711_1") == tmp_path / "out" / "logs" / "proj_a0_4711_1.out"
    assert plan.plan_dir == tmp_path / "out" / "plans" / plan.plan_id


def test_same_config_gives_same_ids_and_plan_dir(tmp_path: Path) -> None:
    first = build_plan(config(tmp_path)).plan
    second = build_plan(config(tmp_path)).plan
    assert first.plan_id == second.plan_id
    assert [j.job_id for j in first.jobs] == [j.job_id for j in second.jobs]
    changed = build_plan(config(tmp_path, slurm={"sbatch": {"time": "01:00:00"}})).plan
    assert changed.plan_id != first.plan_id
    assert [j.job_id for j in changed.jobs] == [j.job_id for j in first.jobs]  # params unchanged


def test_max_array_size_splits_and_throttle_is_appended(tmp_path: Path) -> None:
    cfg = config(
        tmp_path,
        sweep={"axes": {"lr": list(range(25))}},
        slurm={"max_array_size": 10, "array_throttle": 3},
    )
    plan = build_plan(cfg).plan
    assert [s.array_spec for s in plan.scripts] == ["0-9%3", "0-9%3", "0-4%3"]
    assert [s.job_name for s in plan.scripts] == ["proj_a0", "proj_a1", "proj_a2"]
    last = plan.jobs[-1]
    assert last.array is not None and (last.array.array_name, last.array.task_index) == (
        "proj_a2",
        4,
    )


def test_array_false_gives_one_script_per_job(tmp_path: Path) -> None:
    plan = build_plan(config(tmp_path, slurm={"array": False})).plan
    assert len(plan.scripts) == 3
    assert all(s.array_spec is None for s in plan.scripts)
    assert [s.job_name for s in plan.scripts] == [j.name for j in plan.jobs]
    assert plan.jobs[0].log_path.endswith(f"{plan.jobs[0].name}_%j.out")
    assert plan.jobs[0].resolved_log_path("99").name == f"{plan.jobs[0].name}_99.out"


def test_jobs_with_different_directives_go_to_different_arrays(tmp_path: Path) -> None:
    cfg = config(
        tmp_path,
        sweep={"axes": {"lr": [0.1, 0.2], "slurm.sbatch.time": ["00:10:00", "02:00:00"]}},
    )
    plan = build_plan(cfg).plan
    assert len(plan.scripts) == 2
    by_time = {job.sbatch["time"] for job in plan.jobs}
    assert by_time == {"00:10:00", "02:00:00"}
    result = build_plan(cfg)
    texts = list(result.scripts.values())
    assert "#SBATCH --time=00:10:00" in texts[0] and "#SBATCH --time=02:00:00" in texts[1]


def test_backend_params_from_the_sweep_are_type_checked_against_the_backend_config(
    tmp_path: Path,
) -> None:
    cfg = config(tmp_path, sweep={"axes": {"lr": [0.1], "backend.argv": [["a", "b"], ["c"]]}})
    plan = build_plan(cfg).plan
    assert [job.command for job in plan.jobs] == [("a", "b"), ("c",)]
    bad = config(tmp_path, sweep={"axes": {"lr": [0.1], "backend.argv": ["a b"]}})
    with pytest.raises(ConfigError) as info:
        build_plan(bad)
    assert info.value.key == "backend.argv"
    assert "set by the sweep in job 0" in str(info.value)
    unknown = config(tmp_path, sweep={"axes": {"lr": [0.1], "backend.argvv": [["a"]]}})
    with pytest.raises(ConfigError, match="did you mean 'argv'"):
        build_plan(unknown)


def test_a_sweep_cannot_change_other_config_sections(tmp_path: Path) -> None:
    cfg = config(tmp_path, sweep={"axes": {"lr": [0.1], "project.name": ["a", "b"]}})
    with pytest.raises(ConfigError) as info:
        build_plan(cfg)
    assert info.value.key == "sweep param project.name"
    # a free param that merely starts like a section name is fine
    free = config(tmp_path, sweep={"axes": {"lr": [0.1], "restart_count": [0, 1]}})
    assert len(build_plan(free).plan.jobs) == 2


def test_undefined_placeholder_in_backend_argv_names_the_element(tmp_path: Path) -> None:
    cfg = config(tmp_path, backend={"argv": ["run", "{lr}", "{batch}"]})
    with pytest.raises(ConfigError) as info:
        build_plan(cfg)
    assert info.value.key == "backend.argv[2]"
    assert "undefined placeholder {batch}" in str(info.value)


def test_placeholder_missing_in_one_sweep_branch_is_an_error(tmp_path: Path) -> None:
    cfg = config(tmp_path, sweep={"axes": [{"lr": [0.1], "wd": [1]}, {"lr": [0.2]}]})
    cfg.backend.argv.append("{wd}")
    with pytest.raises(ConfigError, match=r"undefined placeholder \{wd\}"):
        build_plan(cfg)


def test_monitoring_without_a_termination_criterion_is_rejected(tmp_path: Path) -> None:
    cfg = config(tmp_path, monitoring={"class_name": "_PlanTestMonitor"})
    with pytest.raises(ConfigError) as info:
        build_plan(cfg)
    assert info.value.key == "monitoring"
    assert "no termination criterion" in str(info.value)
    ok = config(tmp_path, monitoring={"class_name": "_PlanTestMonitor", "termination_str": "done"})
    assert len(build_plan(ok).plan.jobs) == 3


def test_monitoring_output_paths_may_use_only_job_fields(tmp_path: Path) -> None:
    cfg = config(
        tmp_path,
        monitoring={
            "class_name": "_PlanTestMonitor",
            "termination_str": "done",
            "output_paths": ["{output_dir}/train.log", "{outdir}/x"],
        },
    )
    with pytest.raises(ConfigError) as info:
        build_plan(cfg)
    assert info.value.key == "monitoring.output_paths[1]"
    assert "did you mean {output_dir}" in str(info.value)


@pytest.mark.parametrize(
    ("template", "words"),
    [
        ("../{lr}", "not a safe name"),
        ("{project}/{lr}", "not a safe name"),
        ("same", "both get the name 'same'"),
    ],
)
def test_job_names_never_escape_the_output_root_and_are_unique(
    tmp_path: Path, template: str, words: str
) -> None:
    cfg = config(tmp_path, sweep={"name_template": template})
    with pytest.raises(ConfigError) as info:
        build_plan(cfg)
    assert info.value.key == "sweep.name_template"
    assert words in str(info.value)


def test_unsafe_project_name_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        build_plan(config(tmp_path, project={"name": "../evil"}))
    assert info.value.key == "project.name"


@pytest.mark.parametrize(
    ("slurm", "key"),
    [
        ({"max_array_size": 0}, "slurm.max_array_size"),
        ({"array_throttle": 0}, "slurm.array_throttle"),
        ({"test_only": "sometimes"}, "slurm.test_only"),
        ({"sbatch": {"job_name": "x"}}, "slurm.sbatch.job_name"),
        ({"sbatch": {"comment": "two words"}}, "slurm.sbatch.comment"),
        ({"extra_directives": ["--output=/tmp/x"]}, "slurm.extra_directives[0]"),
        ({"env": {"BAD-NAME": "1"}}, "slurm.env.BAD-NAME"),
        ({"launcher_cmd": "apptainer exec 'unclosed"}, "slurm.launcher_cmd"),
    ],
)
def test_invalid_slurm_settings_name_the_key(
    tmp_path: Path, slurm: dict[str, Any], key: str
) -> None:
    with pytest.raises(ConfigError) as info:
        build_plan(config(tmp_path, slurm=slurm))
    assert info.value.key == key


def test_write_plan_writes_artifacts_atomically_and_they_read_back(tmp_path: Path) -> None:
    result = build_plan(config(tmp_path))
    notes = write_plan(result, test_only="never")
    plan = result.plan
    assert notes == []
    files = sorted(p.relative_to(plan.plan_dir).as_posix() for p in plan.plan_dir.rglob("*"))
    assert files == ["config.yaml", "plan.json", "scripts", "scripts/proj_a0.sbatch", "sweep.json"]
    assert Plan.from_dict(json.loads((plan.plan_dir / "plan.json").read_text())) == plan
    sweep = json.loads((plan.plan_dir / "sweep.json").read_text())
    assert [j["params"] for j in sweep["jobs"]] == [{"lr": 0.1}, {"lr": 0.2}, {"lr": 0.3}]
    assert [j["job_id"] for j in sweep["jobs"]] == [j.job_id for j in plan.jobs]
    script = plan.scripts[0].path
    assert script.stat().st_mode & 0o111  # executable
    assert (tmp_path / "out" / "logs").is_dir()  # sbatch does not create the --output directory
    # the dumped config is itself a valid config that plans to the same jobs
    import yaml

    again = build_plan(parse_config(yaml.safe_load((plan.plan_dir / "config.yaml").read_text())))
    assert again.plan == plan
    # re-planning the same config rewrites identical files; nothing else appears
    write_plan(build_plan(config(tmp_path)), test_only="never")
    assert (
        sorted(p.relative_to(plan.plan_dir).as_posix() for p in plan.plan_dir.rglob("*")) == files
    )


def test_store_sweep_json_false_skips_only_sweep_json(tmp_path: Path) -> None:
    result = build_plan(config(tmp_path, sweep={"store_sweep_json": False}))
    write_plan(result, test_only="never")
    assert not (result.plan.plan_dir / "sweep.json").exists()
    assert (result.plan.plan_dir / "plan.json").is_file()


def test_job_plan_dict_round_trip() -> None:
    job = JobPlan(
        job_id="abc",
        name="n",
        index=0,
        params={"lr": 0.1},
        command=("a", "b c"),
        env={"X": "1"},
        output_dir=Path("/o/n"),
        log_path="/o/logs/n_%j.out",
        script=Path("/o/s.sbatch"),
        sbatch={"time": "1"},
    )
    assert JobPlan.from_dict(json.loads(json.dumps(job.to_dict()))) == job


def test_planning_with_the_command_backend_never_imports_torch_or_megatron(tmp_path: Path) -> None:
    code = f"""
import sys
from oellm_autoexp.config.loader import load_config
from oellm_autoexp.planning import build_plan, write_plan
loaded = load_config({str(Path(__file__).resolve().parents[2] / "examples" / "hello_sweep.yaml")!r},
                     ["project.base_output_dir={tmp_path}"])
write_plan(build_plan(loaded.root), test_only="never")
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "megatron", "triton"))
print(",".join(heavy) or "none")
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "none"
