"""GPU-hours a plan requests, and the confirmation gate before submitting it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from oellm_autoexp.config.loader import parse_config
from oellm_autoexp.errors import AutoexpRunError, AutoexpUsageError, ConfigError
from oellm_autoexp.plan_cost import (
    JobShape,
    PlanCost,
    confirm_cost,
    job_shape,
    plan_cost,
    time_limit_hours,
)
from oellm_autoexp.planning import build_plan


@pytest.mark.parametrize(
    ("text", "hours"),
    [
        ("90", 1.5),  # minutes
        ("30:00", 0.5),  # minutes:seconds
        ("04:00:00", 4.0),
        ("1-12", 36.0),  # days-hours
        ("2-00:30", 48.5),
        ("1-01:00:36", 25.01),
        ("UNLIMITED", None),
        ("infinite", None),
    ],
)
def test_every_slurm_time_format(text: str, hours: float | None) -> None:
    result = time_limit_hours(text)
    assert result == pytest.approx(hours) if hours is not None else result is None


def test_a_bad_time_names_the_directive() -> None:
    with pytest.raises(ConfigError, match=r"^slurm\.sbatch\.time: '4h' is not a SLURM time"):
        time_limit_hours("4h")


@pytest.mark.parametrize(
    ("sbatch", "shape"),
    [
        ({"time": "01:00:00"}, JobShape(1, 0, 1.0)),
        ({"time": "60", "nodes": "2", "gres": "gpu:4"}, JobShape(2, 4, 1.0)),
        ({"time": "60", "nodes": "2-4", "gres": "gpu:a100:4,nvme:1"}, JobShape(4, 4, 1.0)),
        ({"time": "60", "nodes": "3", "gpus": "h100:8"}, JobShape(3, 3, 1.0)),  # 8 over 3 nodes
        ({"time": "60", "gpus-per-node": "4"}, JobShape(1, 4, 1.0)),
        ({"time": "60", "gpus-per-task": "1", "ntasks-per-node": "4"}, JobShape(1, 4, 1.0)),
        ({"time": "60", "nodes": "2", "gpus-per-task": "1", "ntasks": "8"}, JobShape(2, 4, 1.0)),
        ({"gres": "gpu:4", "exclusive": ""}, JobShape(1, 4, None)),
    ],
)
def test_job_shapes_from_directives(sbatch: dict[str, str], shape: JobShape) -> None:
    assert job_shape(sbatch) == shape


def _plan(tmp_path: Path, **slurm: Any) -> Any:
    data: dict[str, Any] = {
        "project": {"name": "proj", "base_output_dir": str(tmp_path / "out")},
        "backend": {"class_name": "CommandBackend", "argv": ["run", "{lr}"]},
        "sweep": {"axes": {"lr": [0.1, 0.2, 0.3]}},
        "slurm": {"use_srun": False, "test_only": "never", **slurm},
    }
    return build_plan(parse_config(data)).plan


def test_a_gpu_sweep_costs_jobs_x_nodes_x_gpus_x_hours(tmp_path: Path) -> None:
    plan = _plan(tmp_path, sbatch={"time": "04:00:00", "nodes": 2, "gres": "gpu:4"})
    cost = plan_cost(plan)
    assert cost.gpu_hours == pytest.approx(3 * 2 * 4 * 4.0)
    assert cost.node_hours == 0
    assert cost.describe() == ("requests 96.0 GPU-hours = 3 job(s) x 2 node(s) x 4 GPU(s) x 4.00 h")


def test_jobs_without_gpus_count_node_hours(tmp_path: Path) -> None:
    cost = plan_cost(_plan(tmp_path, sbatch={"time": "00:05:00", "nodes": 1}))
    assert cost.gpu_hours == 0
    assert cost.node_hours == pytest.approx(0.25)
    assert cost.describe() == (
        "requests 0.25 node-hours (jobs without GPUs) = 3 job(s) x 1 node(s) x 0.08 h"
    )


def test_per_job_directives_give_several_shapes_and_missing_times_are_not_guessed(
    tmp_path: Path,
) -> None:
    data: dict[str, Any] = {
        "project": {"name": "proj", "base_output_dir": str(tmp_path / "out")},
        "backend": {"class_name": "CommandBackend", "argv": ["run", "{name}"]},
        "sweep": {"axes": {"slurm.sbatch.nodes": [1, 2], "slurm.sbatch.time": ["60", None]}},
        "slurm": {"use_srun": False, "test_only": "never", "sbatch": {"gres": "gpu:4"}},
    }
    cost = plan_cost(build_plan(parse_config(data)).plan)
    assert cost.jobs == 4 and cost.jobs_without_time == 2
    assert cost.gpu_hours == pytest.approx(1 * 4 + 2 * 4)
    assert cost.describe() == (
        "requests 12.0 GPU-hours = 1 job(s) x 1 node(s) x 4 GPU(s) x 1.00 h + 1 job(s) x "
        "2 node(s) x 4 GPU(s) x 1.00 h; 2 job(s) set no time limit (slurm.sbatch.time) and "
        "are not counted"
    )


def _cost(hours: float) -> PlanCost:
    return PlanCost(shapes=((JobShape(1, 1, hours), 1),))


class _Asker:
    def __init__(self, answer: bool) -> None:
        self.answer = answer
        self.questions: list[str] = []

    def __call__(self, question: str) -> bool:
        self.questions.append(question)
        return self.answer


def test_the_gate_asks_only_above_the_threshold_and_only_without_yes() -> None:
    ask = _Asker(True)
    confirm_cost(_cost(10), 10.0, assume_yes=False, interactive=True, ask=ask)
    confirm_cost(_cost(50), None, assume_yes=False, interactive=True, ask=ask)
    confirm_cost(_cost(50), 10.0, assume_yes=True, interactive=False, ask=ask)
    assert ask.questions == []
    confirm_cost(_cost(50), 10.0, assume_yes=False, interactive=True, ask=ask)
    assert ask.questions == [
        "the plan requests 50.0 GPU-hours = 1 job(s) x 1 node(s) x 1 GPU(s) x 50.0 h, above "
        "scheduler.confirm_above_hours=10. Submit?"
    ]


def test_a_no_answer_stops_and_no_terminal_is_a_usage_error() -> None:
    with pytest.raises(AutoexpRunError, match="not submitted"):
        confirm_cost(_cost(50), 10.0, assume_yes=False, interactive=True, ask=_Asker(False))
    with pytest.raises(AutoexpUsageError, match="pass --yes to submit it") as caught:
        confirm_cost(_cost(50), 10.0, assume_yes=False, interactive=False, ask=_Asker(True))
    assert caught.value.exit_code == 2
    with pytest.raises(ConfigError, match=r"scheduler\.confirm_above_hours: expected a number"):
        confirm_cost(_cost(1), -1.0, assume_yes=False, interactive=True, ask=_Asker(True))
