"""`RunRequest(locate=True)`: the first non-finite module in the trial record (real PyTorch).

In-process: the fsdp workload with a NaN injected at a known module, step and phase. Command
workloads: a standalone script that imports no aorta, located through the start-up hook.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from aorta.runner import run_trials
from aorta.runner.command.spec import parse_command_spec
from aorta.runner.models import RunRequest

pytest.importorskip("torch")

SCRIPT = str(Path(__file__).parents[1] / "instrumentation" / "scripts" / "nan_at_module.py")


def _fsdp(tmp_path: Path, locate: bool, device: str = "cpu", **env: str) -> RunRequest:
    return RunRequest(
        workload="fsdp",
        output_dir=tmp_path,
        steps=5,
        locate=locate,
        extra_env={"AORTA_FSDP_DEVICE": device, **env},
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "device",
    # On a GPU the hooks see CUDA tensors: the check must still name the first module, not the
    # first one whose (asynchronous) result happened to be read.
    ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)],
)
@pytest.mark.parametrize(
    ("phase", "module", "tensor", "shape", "parameter"),
    [
        ("forward", "blocks.1.mlp_in", "output", [8, 64, 256], None),
        # The gradient arriving at attn_out is NaN: the one backward op of the Linear makes
        # its input and its parameters' gradients NaN at once, and autograd accumulates the
        # parameters' first (they are the first non-finite tensors in time).
        ("backward", "blocks.0.attn_out", "grad", [64], "bias"),
    ],
)
def test_fsdp_injected_nan_is_located_exactly(
    tmp_path: Path,
    phase: str,
    module: str,
    tensor: str,
    shape: list[int],
    parameter: str | None,
    device: str,
) -> None:
    request = _fsdp(
        tmp_path,
        True,
        device,
        AORTA_FSDP_TEST_INJECT_NAN_AT_STEP="3",
        AORTA_FSDP_TEST_INJECT_NAN_MODULE=module,
        AORTA_FSDP_TEST_INJECT_NAN_PHASE=phase,
    )
    (result,) = run_trials(request)
    assert result.outcome == "failed" and result.failed_at_step == 3
    found = result.first_nonfinite
    assert found is not None and found["located"]
    # The module's own name under FSDP2, not a wrapper's.
    assert (found["step"], found["module"], found["phase"], found["tensor"]) == (
        3,
        module,
        phase,
        tensor,
    )
    assert (found["dtype"], found["shape"], found["parameter"]) == ("float32", shape, parameter)


@pytest.mark.slow
@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("grad_clip", ["0", "1.0"])
def test_fsdp_weight_gradient_alone_is_located_at_its_parameter(
    tmp_path: Path, grad_clip: str, device: str
) -> None:
    # Only blocks.1.mlp_in's weight gradient turns NaN (every activation gradient stays
    # finite); clipping then spreads the NaN to every gradient, and the step is not taken.
    request = _fsdp(
        tmp_path,
        True,
        device,
        AORTA_FSDP_GRAD_CLIP=grad_clip,
        AORTA_FSDP_TEST_INJECT_NAN_AT_STEP="3",
        AORTA_FSDP_TEST_INJECT_NAN_MODULE="blocks.1.mlp_in",
        AORTA_FSDP_TEST_INJECT_NAN_PHASE="weight_grad",
    )
    (result,) = run_trials(request)
    assert result.outcome == "failed" and result.failed_at_step == 3
    found = result.first_nonfinite
    assert found is not None and found["located"], found
    assert found == {
        "located": True,
        "step": 3,
        "module": "blocks.1.mlp_in",
        "phase": "backward",
        "tensor": "grad",
        "shape": [256, 64],
        "dtype": "float32",
        "parameter": "weight",
    }


def test_locate_is_off_by_default_and_a_clean_run_says_none_seen(tmp_path: Path) -> None:
    (plain,) = run_trials(_fsdp(tmp_path / "off", False))
    assert plain.first_nonfinite is None and "AORTA_LOCATE_DIR" not in plain.env_applied
    (clean,) = run_trials(_fsdp(tmp_path / "on", True))
    assert clean.outcome == "passed"
    assert clean.first_nonfinite == {"located": False, "reason": "no non-finite value seen"}


def _command(tmp_path: Path, argv: list[str]) -> RunRequest:
    spec = parse_command_spec(
        {
            "command": argv,
            "step_time": "jsonl",
            "failure_patterns": ["non-finite grad norm"],
        }
    )
    return RunRequest(workload="command", command=spec, output_dir=tmp_path, steps=10, locate=True)


@pytest.mark.parametrize(
    ("phase", "module", "located"),
    [("forward", "net.2", "net.2"), ("backward", "net.2", "net.2")],
)
def test_a_standalone_script_is_located_without_changing_it(
    tmp_path: Path, phase: str, module: str, located: str
) -> None:
    argv = [sys.executable, SCRIPT, "--phase", phase, "--module", module, "--nan-step", "4"]
    (result,) = run_trials(_command(tmp_path, argv))
    assert result.outcome == "failed"
    found = result.first_nonfinite
    assert found is not None and found["located"], found
    assert (found["step"], found["module"], found["phase"]) == (4, located, phase)


def test_a_weight_gradient_nan_is_found_at_the_parameter(tmp_path: Path) -> None:
    # net.0's input needs no gradient: only its weight and bias gradients turn NaN.
    argv = [sys.executable, SCRIPT, "--phase", "backward", "--module", "net.0"]
    (result,) = run_trials(_command(tmp_path, argv))
    found = result.first_nonfinite
    assert found is not None and found["located"], found
    assert (found["step"], found["module"], found["phase"], found["tensor"]) == (
        4,
        "net.0",
        "backward",
        "grad",
    )
    assert found["parameter"] in {"weight", "bias"}


def test_a_standalone_script_s_bad_weight_gradient_is_located(tmp_path: Path) -> None:
    # A custom autograd Function gives net.2 a NaN weight gradient while every activation
    # gradient stays finite; the script then skips the update and stops.
    argv = [sys.executable, SCRIPT, "--phase", "weight_grad", "--module", "net.2"]
    (result,) = run_trials(_command(tmp_path, argv))
    assert result.outcome == "failed"
    found = result.first_nonfinite
    assert found is not None and found["located"], found
    assert (found["step"], found["module"], found["phase"], found["tensor"]) == (
        4,
        "net.2",
        "backward",
        "grad",
    )
    assert (found["parameter"], found["shape"]) == ("weight", [32, 32])


def test_a_process_that_never_imports_torch_is_not_located(tmp_path: Path) -> None:
    argv = [sys.executable, "-c", "print('hello')"]
    (result,) = run_trials(_command(tmp_path, argv))
    assert result.first_nonfinite == {"located": False, "reason": "no torch"}


@pytest.mark.slow
def test_a_child_process_trial_is_located_too(tmp_path: Path) -> None:
    request = RunRequest(
        workload="fsdp",
        output_dir=tmp_path,
        steps=5,
        locate=True,
        fresh_process=True,
        extra_env={
            "AORTA_FSDP_DEVICE": "cpu",
            "AORTA_FSDP_TEST_INJECT_NAN_AT_STEP": "2",
            "AORTA_FSDP_TEST_INJECT_NAN_MODULE": "blocks.0.qkv",
        },
    )
    (result,) = run_trials(request)
    assert result.execution == "child_process"
    found = result.first_nonfinite
    assert found is not None and (found["step"], found["module"], found["phase"]) == (
        2,
        "blocks.0.qkv",
        "forward",
    )
