"""The streamed plan (what `oellm-autoexp plan` runs): same files as the in-memory plan,
one script's jobs in memory, and nothing left behind when a late job is rejected."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from oellm_autoexp.config.loader import parse_config
from oellm_autoexp.config.schema import RootConfig
from oellm_autoexp.errors import ConfigError
from oellm_autoexp.plan import Plan
from oellm_autoexp.planning import build_plan, plan_stream, write_plan, write_stream
from oellm_autoexp.planning.write import KEPT_JOBS


def config(root: Path, axes: dict[str, Any], **slurm: Any) -> RootConfig:
    return parse_config(
        {
            "project": {"name": "proj", "base_output_dir": str(root)},
            "backend": {
                "class_name": "CommandBackend",
                "argv": ["run", "--lr", "{lr}", "--seed", "{seed}", "{output_dir}"],
                "env": {"RUN": "{name}"},
            },
            "sweep": {"axes": axes, "name_template": "j{lr}_{seed}"},
            "slurm": {"use_srun": False, "test_only": "never", "max_array_size": 400, **slurm},
        }
    )


def _files(plan_dir: Path) -> dict[str, Any]:
    return {
        name: json.loads((plan_dir / name).read_text(encoding="utf-8"))
        for name in ("plan.json", "sweep.json")
    } | {path.name: path.read_text(encoding="utf-8") for path in (plan_dir / "scripts").iterdir()}


def test_the_streamed_plan_writes_what_the_in_memory_plan_writes(tmp_path: Path) -> None:
    axes = {"lr": [0.1, 0.2, 0.3], "seed": list(range(350))}  # 1,050 jobs: 3 arrays of <= 400
    in_memory = build_plan(config(tmp_path / "a", axes))
    write_plan(in_memory, test_only="never")
    memory_files = _files(in_memory.plan.plan_dir)
    shutil.rmtree(tmp_path / "a")
    written = write_stream(plan_stream(config(tmp_path / "a", axes)), test_only="never")

    assert _files(written.plan.plan_dir) == memory_files
    assert len(memory_files["plan.json"]["jobs"]) == written.jobs == 1050
    assert [s["array_spec"] for s in memory_files["plan.json"]["scripts"]] == [
        "0-399",
        "0-399",
        "0-249",
    ]
    # The caller gets every script but only the first jobs: memory holds one script's jobs.
    assert len(written.plan.jobs) == KEPT_JOBS and len(written.plan.scripts) == 3
    assert written.plan.jobs == in_memory.plan.jobs[:KEPT_JOBS]
    assert Plan.from_dict(memory_files["plan.json"]) == in_memory.plan
    assert sum(written.sbatch_counts.values()) == 1050


def test_a_job_rejected_after_scripts_were_written_leaves_nothing_behind(tmp_path: Path) -> None:
    # Job 1,000 repeats job 0's name (the template ignores `x`): found after two arrays of
    # 400 were rendered and written.
    root = tmp_path / "out"
    axes = {"x": [1, 2], "lr": [0.1], "seed": list(range(1000))}
    stream = plan_stream(config(root, axes))
    with pytest.raises(ConfigError, match="both get the name"):
        write_stream(stream, test_only="never")
    assert stream.jobs >= 800  # scripts had been written before the error
    assert not root.exists()


def test_a_rejected_plan_keeps_an_earlier_plan_and_the_directories_it_found(
    tmp_path: Path,
) -> None:
    root = tmp_path / "out"
    good = write_stream(plan_stream(config(root, {"lr": [0.1], "seed": [1, 2]})), test_only="never")
    before = sorted(str(p.relative_to(root)) for p in root.rglob("*"))
    axes = {"x": [1, 2], "lr": [0.1], "seed": list(range(1000))}
    with pytest.raises(ConfigError):
        write_stream(plan_stream(config(root, axes)), test_only="never")
    assert sorted(str(p.relative_to(root)) for p in root.rglob("*")) == before
    assert (good.plan.plan_dir / "plan.json").is_file()
