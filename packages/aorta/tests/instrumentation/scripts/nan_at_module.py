"""A standalone PyTorch training script (it imports no aorta) whose NaN starts at a known module.

A small MLP (`net.0` Linear, `net.1` Tanh, `net.2` Linear, `net.3` Tanh, `net.4` Linear) trains
with SGD and prints one JSON line per step (`{"step", "step_time_ms", "loss"}`, steps from 0).
Before step `--nan-step` the weight of `--module` (default `net.2`) is overwritten with NaN, as
a corrupted update would leave it: that module's output is the first non-finite tensor of the
run, at that step (`--phase forward`). With `--phase backward` the module's forward instead
passes its output through an identity whose gradient is NaN, so the gradient it computes is the
first non-finite tensor. With `--phase weight_grad` the module (a Linear) runs that step
through a custom autograd Function whose weight gradient alone is NaN: every activation
gradient stays finite, and the step's optimizer update is skipped (the grad norm is NaN). The
script stops at the first non-finite loss or gradient norm (printing `non-finite grad norm at
step N` for the latter), like most training loops.
"""

import argparse
import json
import math
import sys

import torch


class Net(torch.nn.Module):
    """The model: `net` is the layer stack."""

    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(8, 32),
            torch.nn.Tanh(),
            torch.nn.Linear(32, 32),
            torch.nn.Tanh(),
            torch.nn.Linear(32, 1),
        )

    def forward(self, x):  # type: ignore[no-untyped-def]
        return self.net(x)


class NanGradient(torch.autograd.Function):
    """Identity forward; NaN gradient backward."""

    @staticmethod
    def forward(ctx, tensor):  # type: ignore[no-untyped-def]
        return tensor.clone()

    @staticmethod
    def backward(ctx, grad):  # type: ignore[no-untyped-def]
        return grad * math.nan


class BadWeightGradLinear(torch.autograd.Function):
    """`linear(x, weight, bias)` whose backward returns a NaN weight gradient (a custom kernel
    with a bug, say); the input and bias gradients are right."""

    @staticmethod
    def forward(ctx, x, weight, bias):  # type: ignore[no-untyped-def]
        ctx.save_for_backward(x, weight)
        return torch.nn.functional.linear(x, weight, bias)

    @staticmethod
    def backward(ctx, grad):  # type: ignore[no-untyped-def]
        x, weight = ctx.saved_tensors
        return grad @ weight, (grad.t() @ x) * math.nan, grad.sum(0)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--nan-step", type=int, default=4)
    parser.add_argument("--module", default="net.2")
    parser.add_argument(
        "--phase", choices=("forward", "backward", "weight_grad"), default="forward"
    )
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    model = Net()
    target_module = model.get_submodule(args.module)
    inputs, target = torch.randn(64, 8), torch.randn(64, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(args.steps):
        handle = None
        if step == args.nan_step:
            if args.phase == "forward":
                with torch.no_grad():
                    target_module.weight.fill_(math.nan)
            elif args.phase == "backward":
                handle = target_module.register_forward_hook(
                    lambda module, inp, out: NanGradient.apply(out)
                )
            else:
                target_module.forward = lambda x: BadWeightGradLinear.apply(
                    x, target_module.weight, target_module.bias
                )
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(inputs), target)
        loss.backward()
        if handle is not None:
            handle.remove()
        vars(target_module).pop("forward", None)  # the class's forward again
        norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), math.inf))
        print(
            json.dumps({"step": step, "step_time_ms": 1.0, "loss": float(loss.detach())}),
            flush=True,
        )
        if not math.isfinite(norm):
            print(f"non-finite grad norm at step {step}", flush=True)
        if not math.isfinite(float(loss)) or not math.isfinite(norm):
            return 0
        optimizer.step()
    return 0


if __name__ == "__main__":
    sys.exit(main())
