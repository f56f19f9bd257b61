"""plan.json and sweep.json lines, encoded piecewise, are exactly `json.dumps` of the job."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from oellm_autoexp.config.loader import parse_config
from oellm_autoexp.planning import plan_stream
from oellm_autoexp.planning.build import ScriptChunk, sweep_entry
from oellm_autoexp.planning.write import _JobLines


def _chunks(root: Path, **extra: Any) -> list[ScriptChunk]:
    config = parse_config(
        {
            "project": {"name": "proj", "base_output_dir": str(root)},
            "backend": {
                "class_name": "CommandBackend",
                "argv": ["run", "--lr", "{lr}", "ünï 'q' \"dq\"", "{output_dir}"],
                "env": {"RUN": "{name}", "TAB": "a\tb"},
            },
            "sweep": {
                "axes": {"lr": [0.1, 0.25], "slurm.sbatch.nodes": [1, 2]},
                "base": {"nested": {"k": [1, None, True]}, "text": "é\u2028"},
                "name_template": "j{lr}_{slurm_sbatch_nodes}",
            },
            "slurm": {"use_srun": False, "test_only": "never", "max_array_size": 3},
            **extra,
        }
    )
    return list(plan_stream(config).chunks())


@pytest.mark.parametrize(
    "extra",
    [
        {},  # arrays, two directive sets (interleaved scripts)
        {"slurm": {"use_srun": False, "test_only": "never", "array": False}},  # one job each
        {"stages": [{"name": "train"}, {"name": "cool", "after": "train"}]},  # stage links
    ],
)
def test_each_line_is_the_jobs_json(tmp_path: Path, extra: dict[str, Any]) -> None:
    chunks = _chunks(tmp_path, **extra)
    lines = _JobLines()
    checked = 0
    for chunk in chunks:
        lines.start(chunk)
        jobs = chunk.jobs()
        assert len(jobs) == len(chunk.rows)
        for task_index, (row, job) in enumerate(zip(chunk.rows, jobs, strict=True)):
            entry, line = lines(row, task_index)
            assert entry == json.dumps(sweep_entry(job), allow_nan=False)
            assert line == json.dumps(job.to_dict(), allow_nan=False)
            # the same text from the JobPlan a PlanResult holds (`write_plan`)
            again = ScriptChunk.of_jobs(chunk.script, chunk.text, jobs)
            lines.start(again)
            assert lines(again.rows[task_index], task_index) == (entry, line)
            lines.start(chunk)
            checked += 1
    assert checked == 4 * (2 if "stages" in extra else 1)
    assert len(chunks) > 1  # the shared part changed along the way
