"""The locator with real PyTorch: hooks, names, phases; and its start-up hook in a fresh process."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from aorta.instrumentation.locate import Locator, clean_name  # noqa: E402
from aorta.workloads.fsdp.inject import NanGradient, nan_grad  # noqa: E402


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = torch.nn.Sequential(
            torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.body(x)
        return out


def _train(locator: Locator, model: Net, optimizer: torch.optim.Optimizer, steps: int) -> None:
    inputs, target = torch.randn(16, 4), torch.randn(16, 1)
    for step in range(steps):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(inputs), target)
        if math.isfinite(float(loss.detach())):
            loss.backward()
            optimizer.step()
        locator.end_step(step)


def test_a_poisoned_weight_is_found_at_its_module_in_the_forward_pass() -> None:
    torch.manual_seed(0)
    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    locator = Locator()
    locator.install()
    try:
        _train(locator, model, optimizer, 2)
        with torch.no_grad():
            model.body[2].weight.fill_(math.inf)
        _train(locator, model, optimizer, 1)
    finally:
        locator.remove()
    assert locator.found is not None
    # Steps 0 and 1 were clean; the poisoned run is the locator's step 2.
    assert (locator.found.step, locator.found.module) == (2, "body.2")
    assert (locator.found.phase, locator.found.tensor) == ("forward", "output")
    assert locator.found.shape == (16, 1)


def test_a_nan_learning_rate_is_found_in_the_optimizer_update() -> None:
    torch.manual_seed(0)
    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=math.nan)
    locator = Locator()
    locator.install()
    try:
        _train(locator, model, optimizer, 3)
    finally:
        locator.remove()
    assert locator.found is not None
    assert (locator.found.step, locator.found.phase, locator.found.tensor) == (
        0,
        "optimizer",
        "param",
    )
    # The first parameter the optimizer updated.
    assert (locator.found.module, locator.found.parameter) == ("body.0", "weight")


def test_removed_hooks_no_longer_check() -> None:
    model = Net()
    locator = Locator()
    locator.install()
    locator.remove()
    model(torch.full((2, 4), math.nan))
    assert locator.flush() is None


@pytest.mark.parametrize(
    ("name", "root", "expected"),
    [
        ("layers.1._fsdp_wrapped_module.mlp.fc2", "FullyShardedDataParallel", "layers.1.mlp.fc2"),
        ("_orig_mod.layers.0._checkpoint_wrapped_module.attn", "OptimizedModule", "layers.0.attn"),
        ("module.layers.0", "DistributedDataParallel", "layers.0"),
        ("module.layers.0", "Net", "module.layers.0"),  # a model's own `module` attribute
    ],
)
def test_wrapper_segments_are_removed_from_names(name: str, root: str, expected: str) -> None:
    assert clean_name(name, type(root, (torch.nn.Module,), {})()) == expected


def _python(code: str, env: dict[str, str]) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def test_the_startup_hook_is_inert_without_its_variable() -> None:
    env = {k: v for k, v in os.environ.items() if k != "AORTA_LOCATE_DIR"}
    code = "import sys; print('aorta.instrumentation.locate_startup' in sys.modules)"
    assert _python(code, env) == "False"


def test_the_startup_hook_waits_for_torch_and_records_a_process_without_it(
    tmp_path: Path,
) -> None:
    env = {**os.environ, "AORTA_LOCATE_DIR": str(tmp_path)}
    # The hook itself never imports torch.
    assert _python("import sys; print('torch' in sys.modules)", env) == "False"
    (record,) = tmp_path.glob("process_*.json")
    assert json.loads(record.read_text()) == {"torch": False, "first_nonfinite": None}


class InPlace(torch.nn.Module):
    """Ordinary training code: in-place ops on module outputs."""

    def __init__(self) -> None:
        super().__init__()
        self.first = torch.nn.Linear(4, 4)
        self.relu = torch.nn.ReLU(inplace=True)
        self.last = torch.nn.Linear(4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.first(x)
        y += 1.0
        out: torch.Tensor = self.last(self.relu(y))
        return out


def test_in_place_ops_on_module_outputs_still_work_and_are_located() -> None:
    # A global full backward hook would make `y += 1.0` raise; the locator must not.
    torch.manual_seed(0)
    model = InPlace()
    locator = Locator()
    locator.install()
    try:
        x = torch.randn(3, 4, requires_grad=True)
        model(x).sum().backward()
        assert locator.end_step(0) is None
        with torch.no_grad():
            model.last.weight.fill_(math.nan)
        model(x).sum().backward()
        locator.end_step(1)
    finally:
        locator.remove()
    assert locator.found is not None
    assert (locator.found.step, locator.found.module, locator.found.phase) == (1, "last", "forward")


def _located_backward(model: torch.nn.Module, x: torch.Tensor) -> Locator:
    """One forward and backward pass of `model` under a fresh locator, step 0."""
    locator = Locator()
    locator.install()
    try:
        model(x).sum().backward()
        locator.end_step(0)
    finally:
        locator.remove()
    return locator


def test_a_weight_gradient_alone_is_located_at_its_parameter() -> None:
    # body.2's weight gradient turns NaN; every activation gradient stays finite.
    torch.manual_seed(0)
    model = Net()
    model.body[2].weight.register_hook(nan_grad)
    x = torch.randn(16, 4, requires_grad=True)
    found = _located_backward(model, x).found
    assert found is not None
    assert (found.step, found.module, found.phase, found.tensor, found.parameter) == (
        0,
        "body.2",
        "backward",
        "grad",
        "weight",
    )
    assert found.shape == (1, 8)
    assert x.grad is not None and bool(torch.isfinite(x.grad).all())


def test_the_first_non_finite_gradient_in_time_wins() -> None:
    # Backward runs body.2 before body.0. body.2's weight gradient goes NaN first; later the
    # gradient body.0 computes for its input goes NaN too: the weight gradient is the location.
    torch.manual_seed(0)
    model = Net()
    model.body[2].weight.register_hook(nan_grad)
    model.body[0].register_forward_hook(lambda m, a, out: NanGradient.apply(out))
    found = _located_backward(model, torch.randn(16, 4, requires_grad=True)).found
    assert found is not None
    assert (found.module, found.tensor, found.parameter) == ("body.2", "grad", "weight")


def test_an_activation_gradient_before_a_weight_gradient_wins() -> None:
    # body.2's gradients are finite; the gradient arriving at body.1's output is NaN, so the
    # gradient body.1 (Tanh, no parameters) computes for its input is the first non-finite
    # one; body.0's weight gradient, NaN as well, comes later and does not win.
    torch.manual_seed(0)
    model = Net()
    model.body[1].register_forward_hook(lambda m, a, out: NanGradient.apply(out))
    found = _located_backward(model, torch.randn(16, 4, requires_grad=True)).found
    assert found is not None
    assert model.body[0].weight.grad is not None
    assert not bool(torch.isfinite(model.body[0].weight.grad).all())
    assert (found.module, found.phase, found.tensor, found.parameter) == (
        "body.1",
        "backward",
        "grad",
        None,
    )
