"""`plan` / `submit` with `sweep.filter`, the cost line and the confirmation gate."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import yaml

from oellm_autoexp.cli import main

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "hello_sweep.yaml"


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


def _gpu_config(tmp_path: Path, **sweep: object) -> Path:
    path = tmp_path / "gpu.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "project": {"name": "gpu", "base_output_dir": str(tmp_path / "out")},
                "backend": {"class_name": "CommandBackend", "argv": ["train", "{lr}", "{batch}"]},
                "sweep": {
                    "axes": {"lr": [0.1, 0.2, 0.3], "batch": [1, 2, 4]},
                    "name_template": "lr{lr}_b{batch}",
                    **sweep,
                },
                "slurm": {
                    "sbatch": {"time": "04:00:00", "nodes": 2, "gres": "gpu:4"},
                    "use_srun": False,
                    "test_only": "never",
                },
                "scheduler": {"confirm_above_hours": 100},
            }
        )
    )
    return path


def test_plan_reports_how_many_combinations_the_filter_kept_and_the_gpu_hours(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _gpu_config(tmp_path, filter="lr * batch <= 0.5")
    code, out, err = _run(["plan", str(config)], capsys)
    assert code == 0, err
    assert "sweep.filter: 6 of 9 combinations kept" in out
    assert "cost: requests 192.0 GPU-hours = 6 job(s) x 2 node(s) x 4 GPU(s) x 4.00 h" in out
    plan = json.loads(next((tmp_path / "out").glob("plans/*/plan.json")).read_text())
    assert sorted(job["name"] for job in plan["jobs"]) == sorted(
        ["lr0.1_b1", "lr0.1_b2", "lr0.1_b4", "lr0.2_b1", "lr0.2_b2", "lr0.3_b1"]
    )


def test_a_bad_filter_is_one_line_naming_file_and_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _gpu_config(tmp_path, filter="__import__('os').getcwd() == lr")
    code, out, err = _run(["plan", str(config)], capsys)
    assert code == 2 and out == ""
    assert err.startswith(f"oellm-autoexp: error: {config}: sweep.filter: ")
    assert "is not allowed" in err and err.count("\n") == 1
    assert not (tmp_path / "out").exists()


def test_submit_above_the_threshold_without_a_terminal_or_yes_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # pytest's stdin is not a terminal: nobody to ask.
    code, out, err = _run(["submit", str(_gpu_config(tmp_path))], capsys)
    assert code == 2 and out == ""
    assert "plan " in err and "requests 288.0 GPU-hours" in err
    assert err.strip().splitlines()[-1] == (
        "oellm-autoexp: error: the plan requests 288.0 GPU-hours = 9 job(s) x 2 node(s) x "
        "4 GPU(s) x 4.00 h, above scheduler.confirm_above_hours=100; pass --yes to submit it "
        "(no terminal to ask on)"
    )
    assert not (tmp_path / "out" / "monitoring_state").exists()  # nothing was submitted


def test_submit_asks_on_a_terminal_and_a_no_submits_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr("sys.stdin", Terminal("n\n"))
    code, out, err = _run(["submit", str(_gpu_config(tmp_path))], capsys)
    assert code == 1 and out == ""
    assert "above scheduler.confirm_above_hours=100. Submit? [y/N]" in err
    assert err.strip().endswith("not submitted (the cost was not confirmed)")
    assert not (tmp_path / "out" / "monitoring_state").exists()


def test_dry_run_prints_the_cost_and_never_asks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _run(
        ["submit", str(EXAMPLE), f"project.base_output_dir={tmp_path}", "--dry-run"], capsys
    )
    assert code == 0, err
    assert "requests 0.33 node-hours (jobs without GPUs) = 4 job(s) x 1 node(s) x 0.08 h" in err
    assert "# ---- sbatch commands (dry run: nothing was submitted)" in out


def test_yes_submits_above_the_threshold_without_asking(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    submitted: list[int] = []
    # The boundary: what would call sbatch. The gate before it is what is tested.
    monkeypatch.setattr(
        "oellm_autoexp.cli.monitor.run_submit",
        lambda result, monitor, **_flags: submitted.append(len(result.plan.jobs)) or 0,
    )
    code, _out, err = _run(["submit", str(_gpu_config(tmp_path)), "--yes"], capsys)
    assert code == 0, err
    assert submitted == [9]
    assert "Submit?" not in err
