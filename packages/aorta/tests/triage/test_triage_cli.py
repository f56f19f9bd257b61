"""`aorta triage` end to end: listing, dry run, bad recipes, real matrix runs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from aorta.cli.main import main
from aorta.triage.recipe import Recipe, load_recipe
from aorta.workloads.fsdp.config import DIVERGENT_PRESET, DIVERGENT_PRESET_STEPS

AORTA = str(Path(sys.executable).with_name("aorta"))
SMOKE = Path(__file__).parents[2] / "recipes" / "example-fsdp-smoke.yaml"
DEMO = Path(__file__).parents[2] / "recipes" / "demo-cpu-divergence.yaml"

TOY_RECIPE = """\
schema_version: 1
ticket: TOY-1
workload: toy
trials: 4
steps: 3
cells:
  - name: baseline-local
    mitigations: [none]
    environment: local
    extra_env: {AORTA_TOY_FAIL_AT: "1"}
  - name: fix-local
    mitigations: [plugin_fix]
    environment: local
    extra_env: {AORTA_TOY_FAIL_AT: "1"}
"""


def _only_run_dir(root: Path) -> Path:
    (run_dir,) = [p for p in root.glob("*/*/*") if p.is_dir()]
    return run_dir


def test_list_mitigations_tags_source_package_without_torch() -> None:
    probe = (
        "import sys, contextlib, io\n"
        "from aorta.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        "    code = main(['triage', '--list-mitigations', '--list-environments'])\n"
        "print(code, 'torch' in sys.modules, 'scipy' in sys.modules)\n"
        "print(out.getvalue())\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    first, *listing = done.stdout.splitlines()
    assert first == "0 False False"
    rows = {line.split()[0]: line for line in listing if line.strip()}
    assert "[aorta]" in rows["tf32_off"] and "[aorta]" in rows["fsdp_grad_clip"]
    assert "[aorta]" in rows["local"]


@pytest.mark.usefixtures("plugin")
def test_list_reports_broken_plugins_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["triage", "--list-mitigations"]) == 0
    out, err = capsys.readouterr()
    assert "plugin_fix" in out and "[aorta-test-plugin]" in out
    assert "skipped aorta.mitigations entry point 'plugin_broken'" in err


def test_dry_run_prints_resolved_cells_and_runs_nothing(tmp_path: Path) -> None:
    probe = (
        "import sys\n"
        "from aorta.cli.main import main\n"
        f"code = main(['triage', 'run', '--recipe', {str(SMOKE)!r}, '--dry-run',"
        f" '--output-dir', {str(tmp_path)!r}])\n"
        "print('exit', code, 'torch' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert "exit 0 False" in done.stdout
    assert "tf32_off-local: mitigations=tf32_off environment=local" in done.stdout
    assert "NVIDIA_TF32_OVERRIDE=0" in done.stdout
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("schema_version: 7\n", "schema_version"),
        (
            "schema_version: 1\nworkload: fsdp\ntrials: 1\nsteps: 1\ncells:\n"
            "  - {name: a, mitigations: [tf32of], environment: local}\n",
            "cells[0].mitigations[0]: unknown mitigation 'tf32of'; did you mean 'tf32_off'?",
        ),
        ("schema_version: 1\nworkload: fsdp: x\n", "line 2"),
        (
            "schema_version: 1\nworkload: fsdp\ntrials: 1\nsteps: 1\ncells:\n"
            "  - {name: ../x, mitigations: [none], environment: local}\n",
            "cells[0].name",
        ),
    ],
)
def test_bad_recipe_is_one_line_exit_2(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    done = subprocess.run(
        [AORTA, "triage", "run", "--recipe", str(path), "--dry-run"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "bad.yaml" in line and expected in line


def test_recipe_and_mode_are_mutually_exclusive(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["triage", "run"]) == 2
    assert (
        "exactly one of --recipe FILE, --mode matrix or --resume RUN_DIR" in capsys.readouterr().err
    )
    assert main(["triage", "run", "--mode", "matrix", "--workload", "fsdp"]) == 2
    assert "--mitigation-axis, --environment-axis, --trials" in capsys.readouterr().err


def test_flag_mode_builds_one_recipe_and_calls_the_lifecycle_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from aorta.triage import lifecycle

    calls: list[tuple[Recipe, Path]] = []

    class StopRunError(Exception):
        pass

    def fake_run(recipe: Recipe, target: Path, **kwargs: object) -> None:
        calls.append((recipe, target))
        raise StopRunError

    monkeypatch.setattr(lifecycle, "run", fake_run)
    with pytest.raises(StopRunError):
        main(
            ["triage", "run", "--mode", "matrix", "--workload", "fsdp",
             "--mitigation-axis", "none,tf32_off,xnack", "--environment-axis", "local",
             "--trials", "8", "--output-dir", str(tmp_path)]
        )  # fmt: skip
    (recipe, root), *rest = calls
    assert not rest and root == tmp_path
    assert [c.name for c in recipe.cells] == ["none-local", "tf32_off-local", "xnack-local"]
    assert all(c.trials == 8 for c in recipe.cells)


@pytest.mark.usefixtures("plugin")
def test_recipe_run_for_real_with_the_toy_workload(tmp_path: Path) -> None:
    path = tmp_path / "toy.yaml"
    path.write_text(TOY_RECIPE)
    out = tmp_path / "results"
    assert main(["triage", "run", "--recipe", str(path), "--output-dir", str(out)]) == 0
    run_dir = _only_run_dir(out)
    assert run_dir.parent == out / "TOY-1" / "toy"
    data = json.loads((run_dir / "matrix.json").read_text())
    text = json.dumps(data)
    assert "AORTA_TOY_FAIL_AT" in text  # extra_env recorded
    assert sorted(p.name for p in (run_dir / "cells" / "baseline-local").glob("trial_*.json")) == [
        f"trial_{i}.json" for i in range(4)
    ]
    md = (run_dir / "matrix.md").read_text()
    assert "baseline-local" in md and "fix-local" in md
    assert "(baseline)" in md
    resolved = (run_dir / "recipe.resolved.yaml").read_text()
    assert "AORTA_TOY_FIX" in resolved  # plugin_fix expanded to its env bundle

    # matrix.md says "re-run it to reproduce": the resolved recipe runs as a recipe and gives
    # the same cells, variables and outcomes (the toy workload is deterministic per seed).
    again = tmp_path / "again"
    rerun = ["triage", "run", "--recipe", str(run_dir / "recipe.resolved.yaml")]
    assert main([*rerun, "--output-dir", str(again)]) == 0
    second = json.loads((_only_run_dir(again) / "matrix.json").read_text())

    def cells(matrix: dict[str, object]) -> list[tuple[object, ...]]:
        return [
            (c["name"], c["env"], c["passed_count"], c["failed_count"], c["effective_trials"])
            for c in matrix["cells"]  # type: ignore[attr-defined]
        ]

    assert cells(second) == cells(data)
    assert second["recipe"]["source"] == str(run_dir / "recipe.resolved.yaml")


ERRORS_RECIPE = """\
schema_version: 1
workload: toy
trials: 4
steps: 3
cells:
  - name: baseline-local
    mitigations: [none]
    environment: local
    extra_env: {AORTA_TOY_FAIL_AT: "1", AORTA_TOY_ERROR_SEEDS: "2"}
  - name: never-trains
    mitigations: [plugin_fix]
    environment: local
    extra_env: {AORTA_TOY_RAISE: "1"}
"""


@pytest.mark.usefixtures("plugin")
def test_error_trials_are_counted_apart_and_fail_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "errors.yaml"
    path.write_text(ERRORS_RECIPE)
    out = tmp_path / "results"
    assert main(["triage", "run", "--recipe", str(path), "--output-dir", str(out)]) == 1
    err = capsys.readouterr().err
    assert "aorta triage: 5 trial(s) errored (could not measure)" in err
    run_dir = _only_run_dir(out)
    cells = {c["name"]: c for c in json.loads((run_dir / "matrix.json").read_text())["cells"]}
    base = cells["baseline-local"]
    # Seeds 1 and 3 diverge, seed 2 errors: 2 failed of 3 measured, the error apart.
    assert (base["passed_count"], base["failed_count"], base["error_count"]) == (1, 2, 1)
    assert base["nan_rate"] == pytest.approx(2 / 3)
    assert base["errors"] == ["trial 2: toy: setup"]
    assert [t["outcome"] for t in base["trials"]] == ["passed", "failed", "error", "failed"]
    never = cells["never-trains"]
    assert never["error_count"] == 4 and never["p_value"] is None and never["nan_rate"] is None
    assert never["confound"] == "error"
    assert never["error"] == (
        "all 4 trial(s) errored; first: trial 0: error before the first completed step: "
        "RuntimeError: toy workload asked to raise"
    )
    md = (run_dir / "matrix.md").read_text()
    summary = md.split("## Reproduction Summary", 1)[1].split("## Notes", 1)[0]
    rows = {
        cols[0]: cols
        for cols in (
            [c.strip() for c in line.strip("|").split("|")] for line in summary.splitlines()
        )
    }
    assert rows["baseline-local"][4] == "2 / 3 (+1 error)"
    assert rows["never-trains"][4] == "0 / 0 (+4 errors)"
    assert rows["never-trains"][-1] == "error"
    error_txt = (run_dir / "cells" / "never-trains" / "error.txt").read_text()
    assert error_txt.startswith("all 4 trial(s) errored; first: trial 0:")
    assert "log tail of the first errored trial:" in error_txt
    assert "RuntimeError: toy workload asked to raise" in error_txt
    assert not (run_dir / ".triage.lock").exists()


@pytest.mark.docker
@pytest.mark.usefixtures("plugin")
def test_flag_mode_with_an_image_cell_records_error_and_runs_the_rest(tmp_path: Path) -> None:
    # Real docker client, no engine (this machine and CI): the image cells are `error` rows.
    if shutil.which("docker") is None:
        pytest.skip("docker client not installed")
    if subprocess.run(["docker", "version"], capture_output=True, check=False).returncode == 0:
        pytest.skip("a docker engine answers here; this test is about a missing engine")
    code = main(
        ["triage", "run", "--mode", "matrix", "--workload", "toy",
         "--mitigation-axis", "none,plugin_fix", "--environment-axis", "local,image:busybox:1",
         "--trials", "2", "--steps", "2", "--ticket", "T-9", "--output-dir", str(tmp_path)]
    )  # fmt: skip
    assert code == 1  # a cell errored
    run_dir = _only_run_dir(tmp_path)
    assert run_dir.parent == tmp_path / "T-9" / "toy"
    cells = sorted(p.name for p in (run_dir / "cells").iterdir())
    assert len(cells) == 4  # the docker cells ran no trials but have their error.txt
    for name in cells:
        if "_inline_" in name:
            assert [p.name for p in (run_dir / "cells" / name).iterdir()] == ["error.txt"]
    md = (run_dir / "matrix.md").read_text()
    assert md.count("error") >= 2
    assert "no docker engine answered" in (run_dir / "matrix.json").read_text()


def test_smoke_recipe_runs_the_real_fsdp_matrix(tmp_path: Path) -> None:
    done = subprocess.run(
        [AORTA, "triage", "run", "--recipe", str(SMOKE), "--output-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    run_dir = _only_run_dir(tmp_path)
    assert f"matrix: {run_dir / 'matrix.md'}" in done.stdout
    data = json.loads((run_dir / "matrix.json").read_text())
    assert "tf32_off-local" in json.dumps(data)
    assert len(list((run_dir / "cells").glob("*/trial_*.json"))) == 6
    assert (run_dir / "environments" / "local" / "env.json").is_file()


@pytest.mark.slow
def test_matrix_under_torchrun_two_ranks_rank0_writes_once(tmp_path: Path) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": "lo"}
    done = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
         "-m", "aorta.cli.main", "triage", "run", "--mode", "matrix", "--workload", "fsdp",
         "--mitigation-axis", "none,fsdp_grad_clip", "--environment-axis", "local",
         "--trials", "1", "--steps", "6", "--output-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    run_dir = _only_run_dir(tmp_path)  # one directory: only rank 0 created it
    assert list(tmp_path.iterdir()) == [tmp_path / "_no_ticket_"]
    assert done.stdout.count("matrix: ") == 1
    trial = json.loads((run_dir / "cells" / "fsdp_grad_clip-local" / "trial_0.json").read_text())
    assert trial["world_size"] == 2 and trial["observed"]["world_size"] == 2
    assert json.loads((run_dir / "matrix.json").read_text())["interrupted"] is False


def test_demo_recipe_cells_differ_only_by_their_mitigation() -> None:
    recipe = load_recipe(DEMO)
    assert recipe.baseline == "baseline-local"
    assert [c.mitigations for c in recipe.cells] == [
        ("none",),
        ("fsdp_grad_clip",),
        ("fsdp_substeps",),
    ]
    assert recipe.steps == DIVERGENT_PRESET_STEPS
    for cell in recipe.cells:
        assert cell.extra_env == recipe.cells[0].extra_env
        assert DIVERGENT_PRESET.items() <= cell.extra_env.items()


@pytest.mark.slow
def test_demo_recipe_matrix_rows_differ_for_real(tmp_path: Path) -> None:
    done = subprocess.run(
        [AORTA, "triage", "run", "--recipe", str(DEMO), "--output-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    cells = {
        c["name"]: c
        for c in json.loads((_only_run_dir(tmp_path) / "matrix.json").read_text())["cells"]
    }
    base, clip, sub = cells["baseline-local"], cells["grad_clip-local"], cells["substeps-local"]
    assert base["failed_count"] >= 6  # seeds 1, 2, 4, 5, 6, 11, 12, 15 of 0..15 diverge
    assert clip["failed_count"] == 0 and sub["failed_count"] == 0
    # Significant at the family-wise level: Holm across the two mitigation cells.
    assert clip["significant"] and sub["significant"]
    assert clip["p_adjusted"] == pytest.approx(2 * clip["p_value"])
    # Two forward/backward passes per step: flagged, while clipping costs far less.
    assert sub["confound"].startswith("speed (+")
    assert clip["step_time_ratio"] < sub["step_time_ratio"]
