"""Test-only fault injection inside a module (`AORTA_FSDP_TEST_INJECT_NAN_MODULE`).

The locator's tests need a NaN that starts at a known module in a known phase:

- forward: the module's input is poisoned by a pre-hook, so the module's output is the first
  non-finite module output;
- backward: a forward hook routes the module's output through an identity whose backward
  returns NaN, so the gradient the module computes for its input is the first non-finite
  gradient (the gradient arriving at the module is still finite);
- weight_grad: a forward pre-hook puts a gradient hook on the weight the module is about to
  use (under FSDP2 the unsharded parameter, the one autograd accumulates into), so only that
  weight's gradient turns NaN; every activation gradient stays finite, as in a loss-scale
  overflow confined to one weight gradient.

Module hooks registered here run after PyTorch's global hooks, which is what makes the
forward case poison the input (a global output check would run before a local output edit).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn
from torch.utils.hooks import RemovableHandle

from aorta.errors import WorkloadConfigError


def nan_grad(grad: torch.Tensor) -> torch.Tensor:
    """`grad` turned NaN (a gradient hook that poisons what it is given)."""
    return grad * math.nan


class NanGradient(torch.autograd.Function):
    """Identity forward; backward turns the gradient into NaN."""

    @staticmethod
    def forward(ctx: Any, tensor: torch.Tensor) -> torch.Tensor:
        return tensor.clone()

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        return nan_grad(grad)


def injection_target(model: nn.Module, name: str, phase: str) -> nn.Module:
    """The module `name` of `model`; `WorkloadConfigError` naming the variable if none (or,
    for `weight_grad`, if it has no weight of its own)."""
    try:
        target = model.get_submodule(name)
    except AttributeError:
        raise WorkloadConfigError(
            f"AORTA_FSDP_TEST_INJECT_NAN_MODULE={name!r}: expected a module of the model, "
            "e.g. blocks.0.mlp_in"
        ) from None
    if phase == "weight_grad" and "weight" not in target._parameters:
        raise WorkloadConfigError(
            f"AORTA_FSDP_TEST_INJECT_NAN_MODULE={name!r} with PHASE=weight_grad: expected a "
            "module with a weight of its own, e.g. blocks.0.mlp_in"
        )
    return target


def _poison_input(module: nn.Module, args: tuple[Any, ...]) -> tuple[Any, ...]:
    first, *rest = args
    return (first * math.nan, *rest)


def _nan_gradient(module: nn.Module, args: tuple[Any, ...], output: torch.Tensor) -> Any:
    return NanGradient.apply(output)  # type: ignore[no-untyped-call]  # torch leaves it untyped


@contextmanager
def nan_in_module(module: nn.Module, phase: str) -> Iterator[None]:
    """While the block runs, `module` turns non-finite in `phase` (see the module docstring)."""
    handles: list[RemovableHandle] = []

    def _nan_weight_gradient(module: nn.Module, args: tuple[Any, ...]) -> None:
        weight = module.get_parameter("weight")
        handles.append(weight.register_hook(nan_grad))  # type: ignore[no-untyped-call]  # untyped

    if phase == "forward":
        handles.append(module.register_forward_pre_hook(_poison_input))
    elif phase == "backward":
        handles.append(module.register_forward_hook(_nan_gradient))
    else:
        handles.append(module.register_forward_pre_hook(_nan_weight_gradient))
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()
