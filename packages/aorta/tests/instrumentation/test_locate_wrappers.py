"""Weight-gradient-only NaNs under wrappers: FSDP2, DDP, torch.compile (real PyTorch, CPU).

In each case one weight's gradient turns NaN while every activation gradient stays finite; the
locator must name that module and parameter in the backward phase of the step it happens in,
and, where an activation gradient goes NaN later in the same backward pass, still prefer the
weight gradient (the first in time).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")

from aorta.instrumentation.locate import Locator  # noqa: E402
from aorta.instrumentation.locate_record import Location  # noqa: E402
from aorta.workloads.fsdp.inject import nan_grad  # noqa: E402


class Stack(torch.nn.Module):
    """Two blocks of Linear + Tanh, then a head."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks = torch.nn.ModuleList(
            torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh()) for _ in range(2)
        )
        self.head = torch.nn.Linear(8, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        out: torch.Tensor = self.head(x)
        return out


@pytest.fixture
def world_of_one() -> Iterator[None]:
    """A private world-size-1 gloo group, as the fsdp workload makes for one trial."""
    store = dist.HashStore()
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


def _weight_nan_on_use(module: torch.nn.Module) -> None:
    """From now on, the weight `module` uses in its forward (FSDP2: the unsharded one) gets a
    NaN gradient; hooks on it last as long as the tensor."""

    def pre_hook(mod: torch.nn.Module, args: object) -> None:
        weight = mod.get_parameter("weight")
        if not getattr(weight, "_test_nan_hooked", False):
            weight.register_hook(nan_grad)
            weight._test_nan_hooked = True  # type: ignore[attr-defined]

    module.register_forward_pre_hook(pre_hook)


def _nan_output_gradient(module: torch.nn.Module, args: object, output: torch.Tensor) -> None:
    output.register_hook(nan_grad)


def _train_two_steps(model: torch.nn.Module, poison: Callable[[], None]) -> Location | None:
    """Step 0 clean, then `poison()`, then step 1; the locator's finding."""
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(4, 8)
    locator = Locator()
    locator.install()
    try:
        for step in range(2):
            if step == 1:
                poison()
            optimizer.zero_grad()
            model(x).square().mean().backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            if hasattr(norm, "full_tensor"):
                norm = norm.full_tensor()
            if math.isfinite(float(norm)):
                optimizer.step()
            locator.end_step(step)
    finally:
        locator.remove()
    return locator.found


def _assert_weight_grad(found: Location | None, module: str, step: int = 1) -> None:
    assert found is not None
    assert (found.step, found.module, found.phase, found.tensor, found.parameter) == (
        step,
        module,
        "backward",
        "grad",
        "weight",
    )


def test_fsdp2_weight_gradient_is_located_at_the_unsharded_parameter(world_of_one: None) -> None:
    from torch.distributed.fsdp import fully_shard

    torch.manual_seed(0)
    model = Stack()
    for block in model.blocks:
        fully_shard(block)
    fully_shard(model)
    found = _train_two_steps(model, lambda: _weight_nan_on_use(model.blocks[1][0]))
    _assert_weight_grad(found, "blocks.1.0")
    assert found is not None and found.shape == (8, 8)


def test_fsdp2_a_later_activation_gradient_does_not_win(world_of_one: None) -> None:
    from torch.distributed.fsdp import fully_shard

    torch.manual_seed(0)
    model = Stack()
    for block in model.blocks:
        fully_shard(block)
    fully_shard(model)

    def poison() -> None:
        # blocks.1.0's weight gradient first; the gradient into blocks.0's Tanh output later.
        _weight_nan_on_use(model.blocks[1][0])
        model.blocks[0][1].register_forward_hook(_nan_output_gradient)

    _assert_weight_grad(_train_two_steps(model, poison), "blocks.1.0")


def test_fsdp2_compiled_blocks_weight_gradient_is_located(world_of_one: None) -> None:
    # Blocks compiled as the fsdp workload compiles them (`Module.compile`): no module hook
    # runs inside them, so the unsharded parameters are not watched; the sharded parameter's
    # gradient is checked after its reduce-scatter.
    from torch.distributed.fsdp import fully_shard

    torch.manual_seed(0)
    model = Stack()
    for block in model.blocks:
        fully_shard(block)
        block.compile(backend="aot_eager")
    fully_shard(model)

    def poison() -> None:
        # Fault injection only: FSDP2 has no public handle on the unsharded parameter, and a
        # hook added inside a compiled block would be ignored.
        state = model.blocks[1]._get_fsdp_state()  # type: ignore[operator]
        params = state._fsdp_param_group.fsdp_params
        (weight,) = [p for p in params if p._param_fqn.endswith("0.weight")]
        weight._unsharded_param.register_hook(nan_grad)

    _assert_weight_grad(_train_two_steps(model, poison), "blocks.1.0")


def test_ddp_weight_gradient_is_located_under_the_model_s_own_name(world_of_one: None) -> None:
    from torch.nn.parallel import DistributedDataParallel

    torch.manual_seed(0)
    inner = Stack()
    model = DistributedDataParallel(inner)
    found = _train_two_steps(model, lambda: inner.blocks[0][0].weight.register_hook(nan_grad))
    _assert_weight_grad(found, "blocks.0.0")


def test_compiled_module_weight_gradient_is_located() -> None:
    # aot_eager: AOTAutograd's compiled forward and backward, without a C++ toolchain.
    torch.manual_seed(0)
    inner = Stack()
    model = torch.compile(inner, backend="aot_eager")
    found = _train_two_steps(model, lambda: inner.head.weight.register_hook(nan_grad))
    _assert_weight_grad(found, "head")


def test_a_step_the_grad_scaler_skips_is_still_located() -> None:
    # An inf weight gradient: GradScaler skips the optimizer step (no optimizer hook runs),
    # the locator has the weight gradient from the backward pass.
    torch.manual_seed(0)
    model = Stack()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    scaler = torch.amp.GradScaler("cpu")
    model.blocks[1][0].weight.register_hook(lambda grad: grad * math.inf)
    locator = Locator()
    locator.install()
    try:
        scaler.scale(model(torch.randn(4, 8)).square().mean()).backward()
        scaler.step(optimizer)
        scaler.update()
        locator.end_step(0)
    finally:
        locator.remove()
    assert scaler.get_scale() < 2.0**16  # the step was skipped as an overflow
    _assert_weight_grad(locator.found, "blocks.1.0", step=0)


def _compilations(locate: bool, whole: bool) -> int:
    """How many graphs Dynamo compiles for a module trained 4 steps (with or without locate);
    `whole`: `torch.compile(model)`, else `model.compile()` (as the fsdp workload compiles
    its blocks)."""
    graphs: list[object] = []

    def backend(graph: torch.fx.GraphModule, inputs: object) -> Callable[..., object]:
        graphs.append(graph)
        return graph.forward

    torch._dynamo.reset()
    torch.manual_seed(0)
    model = Stack()
    if whole:
        model = torch.compile(model, backend=backend)
    else:
        model.compile(backend=backend)
    locator = Locator()
    if locate:
        locator.install()
    try:
        for step in range(4):
            model(torch.randn(4, 8)).square().mean().backward()
            locator.end_step(step)
    finally:
        locator.remove()
    return len(graphs)


@pytest.mark.parametrize("whole", [True, False])
def test_locating_neither_breaks_nor_recompiles_a_compiled_model(whole: bool) -> None:
    # The locator's hooks, traced into the graph, made Dynamo fail on its weak dictionaries
    # (`torch.compile(model)`) or guard on its state and recompile, until the recompile limit
    # made it run the module eagerly: no longer the model under triage.
    with_locate = _compilations(locate=True, whole=whole)
    assert with_locate == _compilations(locate=False, whole=whole) == 1
