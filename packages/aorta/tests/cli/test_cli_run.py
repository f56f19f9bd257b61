"""`aorta run` on the command line: exit codes, one-line errors, files, Ctrl-C."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from aorta_testing import ctrl_c_once

from aorta.cli.main import main

AORTA = str(Path(sys.executable).with_name("aorta"))


def _run_dir(parent: Path, workload: str) -> Path:
    (run_dir,) = (parent / workload).iterdir()
    return run_dir


@pytest.mark.usefixtures("plugin")
def test_run_writes_trials_and_exit_code_reflects_failures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["run", "-w", "toy", "-n", "3", "-s", "4", "-o", str(tmp_path)])
    assert code == 0
    run_dir = _run_dir(tmp_path, "toy")
    assert sorted(p.name for p in run_dir.iterdir()) == [f"trial_{i}.json" for i in range(3)]
    out = capsys.readouterr().out
    assert "trial 2/3 seed=1: passed" in out
    assert f"3/3 trial(s) passed; trial files in {run_dir}" in out

    # Odd seeds diverge at step 1 -> one of two trials fails -> exit 1.
    code = main(
        ["run", "-w", "toy", "-n", "2", "-s", "4", "--set", "AORTA_TOY_FAIL_AT=1",
         "-o", str(tmp_path / "second")]
    )  # fmt: skip
    assert code == 1
    out = capsys.readouterr().out
    assert "trial 2/2 seed=1: FAILED: non-finite loss at step 1" in out
    assert "1/2 trial(s) passed" in out


@pytest.mark.usefixtures("plugin")
def test_rerun_never_reuses_a_run_directory(tmp_path: Path) -> None:
    for _ in range(2):
        assert main(["run", "-w", "toy", "-s", "2", "-o", str(tmp_path)]) == 0
    run_dirs = sorted((tmp_path / "toy").iterdir())
    assert len(run_dirs) == 2
    assert all((d / "trial_0.json").exists() for d in run_dirs)


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["run", "-w", "fsdpp"], "unknown workload 'fsdpp'; did you mean 'fsdp'?"),
        (["run", "-w", "fsdp", "-m", "tf32off"], "unknown mitigation 'tf32off'; did you mean"),
        (["run", "-w", "fsdp", "-e", "dockr"], "unknown environment 'dockr'"),
        (["run", "-w", "fsdp", "--set", "NOEQUALS"], "expected KEY=VALUE, got 'NOEQUALS'"),
        (["run", "-w", "fsdp", "--set", "1X=2"], "invalid environment variable name '1X'"),
        (["run", "-w", "fsdp", "-m", "none,,xnack"], "expected comma-separated names"),
        (["run", "-w", "fsdp", "-n", "0"], "0 is not in the range x>=1"),
        (["run", "-w", "fsdp", "-o", "/proc/no-such-dir"], "cannot create a run directory under"),
        (["run", "-w", "fsdp", "-o", "/etc/hostname"], "is a file"),
        (
            ["run", "-w", "fsdp", "--set", "AORTA_FSDP_LR=abc"],
            "AORTA_FSDP_LR",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, argv: list[str], expected: str) -> None:
    done = subprocess.run(
        [AORTA, *argv, *([] if "-o" in argv else ["-o", str(tmp_path)])],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert expected in done.stderr
    assert "Traceback" not in done.stderr
    error_lines = [line for line in done.stderr.splitlines() if "rror" in line]
    assert len(error_lines) == 1, done.stderr


@pytest.mark.docker
@pytest.mark.usefixtures("plugin")
def test_unavailable_environment_is_one_line_and_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if shutil.which("docker") is None:
        pytest.skip("docker client not installed")
    if subprocess.run(["docker", "version"], capture_output=True, check=False).returncode == 0:
        pytest.skip("a docker engine answers here; this test is about a missing engine")
    code = main(["run", "-w", "toy", "-e", "plugin_docker", "-o", str(tmp_path)])
    assert code == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("aorta: error: docker environment 'plugin_docker' (busybox:latest): ")


def test_version_and_help_do_not_import_torch() -> None:
    probe = (
        "import sys, contextlib, io\n"
        "from aorta.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        "    codes = [main(['--help']), main(['run', '--help']), main(['--version'])]\n"
        "print(codes, 'torch' in sys.modules, 'triton' in sys.modules)\n"
        "print(out.getvalue().splitlines()[-1])\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    first, version_line = done.stdout.strip().splitlines()
    assert first == "[0, 0, 0] False False"
    from importlib.metadata import version

    assert version_line == f"aorta, version {version('aorta')}"


@pytest.mark.usefixtures("plugin")
def test_ctrl_c_keeps_finished_trial_files_and_exits_130(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [AORTA, "run", "-w", "toy", "-n", "50", "-s", "10", "--set", "AORTA_TOY_SLEEP_S=0.05",
         "-o", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    returncode, err = ctrl_c_once(proc, tmp_path / "toy", "*/trial_1.json")
    assert returncode == 130
    assert "Traceback" not in err
    run_dir = _run_dir(tmp_path, "toy")
    kept = sorted(run_dir.glob("trial_*.json"))
    assert 2 <= len(kept) < 50
    assert f"interrupted after {len(kept)} of 50 trial(s); their files are kept in {run_dir}" in err
    for path in kept:  # every kept file is complete, valid JSON
        assert json.loads(path.read_text())["passed"] is True
    assert not [p for p in run_dir.iterdir() if p.suffix == ".tmp"]


def test_fsdp_run_trains_for_real_on_cpu(tmp_path: Path) -> None:
    done = subprocess.run(
        [AORTA, "run", "--workload", "fsdp", "--trials", "2", "--steps", "20", "-o", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    run_dir = _run_dir(tmp_path, "fsdp")
    trials = [json.loads((run_dir / f"trial_{i}.json").read_text()) for i in range(2)]
    for trial in trials:
        assert trial["passed"] is True
        assert len(trial["losses"]) == 20
        assert len(trial["step_times_ms"]) == 20 - trial["warmup_steps"]
        assert trial["observed"]["world_size"] == 1
    assert trials[0]["seed"] != trials[1]["seed"]
    assert trials[0]["losses"] != trials[1]["losses"]


def test_process_scoped_mitigation_reaches_a_fresh_fsdp_process(tmp_path: Path) -> None:
    done = subprocess.run(
        [AORTA, "run", "-w", "fsdp", "-m", "tf32_off,xnack", "-s", "5", "-o", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    trial = json.loads((_run_dir(tmp_path, "fsdp") / "trial_0.json").read_text())
    assert trial["execution"] == "child_process"
    # Seen by the training code itself, inside the child interpreter.
    assert trial["observed"]["NVIDIA_TF32_OVERRIDE"] == "0"
    assert trial["observed"]["HIPBLASLT_ALLOW_TF32"] == "0"
    assert trial["observed"]["HSA_XNACK"] == "1"
    assert trial["env_snapshot"]["env_vars"]["HSA_XNACK"] == "1"
    assert "HSA_XNACK" not in os.environ


@pytest.mark.slow
def test_fsdp_under_torchrun_two_ranks_rank0_writes(tmp_path: Path) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": "lo"}
    done = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
         "-m", "aorta.cli.main", "run", "-w", "fsdp", "-n", "2", "-s", "8", "-o", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    run_dir = _run_dir(tmp_path, "fsdp")  # exactly one directory: only rank 0 created it
    trials = [json.loads((run_dir / f"trial_{i}.json").read_text()) for i in range(2)]
    for trial in trials:
        assert trial["passed"] is True
        assert trial["world_size"] == 2 and trial["rank"] == 0
        assert trial["observed"]["world_size"] == 2
        assert len(trial["losses"]) == 8
    assert done.stdout.count("trial 1/2") == 1  # one log, not one per rank


def test_fsdp_without_torch_is_an_error_that_says_how_to_install_it(tmp_path: Path) -> None:
    # As on a machine with aorta installed alone: `import torch` fails (None in sys.modules is
    # how Python spells "this module cannot be imported").
    script = (
        "import sys\n"
        "sys.modules['torch'] = None\n"
        "from aorta.cli.main import main\n"
        f"sys.exit(main(['run', '--workload', 'fsdp', '--trials', '2', '--steps', '2',"
        f" '--output-dir', {str(tmp_path)!r}]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False, timeout=120
    )
    assert done.returncode == 1, done.stderr
    assert "aorta run: 2 trial(s) errored (could not measure)" in done.stderr
    assert "pip install 'aorta[torch]'" in done.stderr
    (trial,) = [p for p in tmp_path.rglob("trial_0.json")]
    data = json.loads(trial.read_text())
    assert data["outcome"] == "error" and data["passed"] is False
    assert data["failure"].startswith("workload import error: ModuleNotFoundError")
    assert data["failure"].endswith("install it with: pip install 'aorta[torch]'")


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "-w", "fsdp", "-n", "0"],
        ["triage", "run", "--mode", "matrix", "--workload", "fsdp", "--trials", "zero"],
        ["run", "--no-such-flag"],
    ],
)
def test_a_bad_flag_value_is_exactly_one_line_not_clicks_usage_block(argv: list[str]) -> None:
    done = subprocess.run([AORTA, *argv], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("aorta: error: ") and "--help)" in done.stderr
