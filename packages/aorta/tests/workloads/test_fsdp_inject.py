"""The fsdp workload's test-only NaN injection into a module: its parameters are checked."""

from __future__ import annotations

import pytest

from aorta.errors import WorkloadConfigError
from aorta.workloads.fsdp.config import FsdpConfig


def test_module_injection_needs_a_step() -> None:
    with pytest.raises(WorkloadConfigError, match="TEST_INJECT_NAN_AT_STEP"):
        FsdpConfig.from_environ({"AORTA_FSDP_TEST_INJECT_NAN_MODULE": "blocks.0.qkv"})


@pytest.mark.parametrize(
    ("variable", "value", "expected"),
    [
        ("AORTA_FSDP_TEST_INJECT_NAN_MODULE", "blocks.0.qkv; rm", "dotted module name"),
        ("AORTA_FSDP_TEST_INJECT_NAN_PHASE", "sideways", "forward, backward"),
    ],
)
def test_bad_values_name_the_variable(variable: str, value: str, expected: str) -> None:
    environ = {"AORTA_FSDP_TEST_INJECT_NAN_AT_STEP": "1", variable: value}
    with pytest.raises(WorkloadConfigError, match=expected) as info:
        FsdpConfig.from_environ(environ)
    assert variable in str(info.value)


def test_a_module_injection_refuses_a_compiled_model() -> None:
    environ = {
        "AORTA_FSDP_TEST_INJECT_NAN_AT_STEP": "1",
        "AORTA_FSDP_TEST_INJECT_NAN_MODULE": "blocks.0.qkv",
        "AORTA_FSDP_COMPILE": "1",
    }
    with pytest.raises(WorkloadConfigError, match="COMPILE=1: expected an eager model"):
        FsdpConfig.from_environ(environ)


@pytest.mark.parametrize(
    ("module", "phase", "expected"),
    [
        ("blocks.9.qkv", "forward", r"blocks\.9\.qkv'?: expected a module of the model"),
        ("blocks.0", "weight_grad", r"blocks\.0'? with PHASE=weight_grad: expected a module"),
    ],
)
def test_a_wrong_module_fails_before_training(module: str, phase: str, expected: str) -> None:
    pytest.importorskip("torch")
    from pathlib import Path

    from aorta.workloads.contract import TrialContext
    from aorta.workloads.fsdp.train import run_trial

    environ = {
        "AORTA_FSDP_DEVICE": "cpu",
        "AORTA_FSDP_TEST_INJECT_NAN_AT_STEP": "1",
        "AORTA_FSDP_TEST_INJECT_NAN_MODULE": module,
        "AORTA_FSDP_TEST_INJECT_NAN_PHASE": phase,
    }
    ctx = TrialContext(trial_id=0, seed=0, steps=2, environ=environ, output_dir=Path())
    with pytest.raises(WorkloadConfigError, match=expected):
        run_trial(ctx)
