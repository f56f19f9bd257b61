"""The first non-finite module: PyTorch's global module hooks plus a post-step parameter check.

`Locator.install()` registers, for every `nn.Module` of the process,

- a global forward pre-hook that names modules (the first time a module nobody has named yet
  runs, it is a root: its parent would have run first; its whole tree is named from it) and
  registers a tensor hook on each of the module's inputs that needs a gradient: it checks the
  gradient the module computes for that input (`grad`);
- a global forward hook that checks the module's floating-point outputs (`output`) and
  watches the parameters the module has just used (under FSDP2 the unsharded ones);
- a gradient-accumulation hook on every named parameter (`register_post_accumulate_grad_hook`)
  that checks the parameter's gradient as autograd accumulates it (`grad`, with `parameter`):
  a NaN can live in weight gradients alone (a loss-scale overflow, a custom autograd Function's
  weight gradient, the first layer, whose input needs no gradient), and checked there it takes
  its place in time among the input-gradient checks. It also queues a callback on autograd's
  engine that reads the checks when the backward pass ends; gradients no such hook saw are
  checked in one batch then, when a step ends and before an optimizer step
  (`check_gradients`);
- an optimizer step post-hook that checks the parameters the optimizer updated (`param`).

Inside a region `torch.compile` is tracing the hooks do nothing: Dynamo would trace them into
its graph (and fails on the locator's weak dictionaries). A compiled module is checked at its
boundary (its output, its input gradients) and through its parameters' gradients, which
autograd accumulates outside the compiled graph.

Why tensor hooks and not `register_module_full_backward_hook`: a global full backward hook
routes every module's inputs and outputs through a custom autograd Function, after which an
in-place op on a module's output (`y += 1`, `ReLU(inplace=True)`) raises; a locator started
inside someone's training script must not change what the script can do. It also costs about
three times as much step time on the fsdp workload. An input shared by several modules (a
residual stream) is checked once its gradient is complete, under the first module that read it.

The checks are lazy: each adds a 0-dim probe (finite iff the tensor is) to a pending list, and
`flush()` reads them all with one device synchronisation (when the backward pass starts, at the
end of a step, at an optimizer step, or when the list is long). The first check, in execution
order, that saw a non-finite value is the location; after that nothing is checked any more.

Under FSDP the recorded name is the model's own fully qualified name: FSDP2 (`fully_shard`)
keeps module names, and the wrapper segments of FSDP1, activation checkpointing and
`torch.compile` (`_fsdp_wrapped_module`, `_checkpoint_wrapped_module`, `_orig_mod`) are removed.
A NaN born outside any module (in the loss function) is reported at the first module whose
input gradient it reaches: the LM head's backward.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any, Final, NamedTuple

import torch
from torch import nn
from torch.optim.optimizer import (
    register_optimizer_step_post_hook,
    register_optimizer_step_pre_hook,
)
from torch.utils.hooks import RemovableHandle

from aorta.instrumentation.locate_record import Location

# Segments that wrappers insert into module names; the user knows the model without them.
_WRAPPER_SEGMENTS: Final = frozenset(
    {"_fsdp_wrapped_module", "_checkpoint_wrapped_module", "_orig_mod"}
)
# Pending checks are read in batches: one synchronisation per batch, bounded memory.
_FLUSH_EVERY: Final = 1024
# How deep outputs are searched for tensors: (logits, (k, v)), {"loss": ..., "hidden": [...]}.
_MAX_NESTING: Final = 4
_UNNAMED_PARAMETER: Final = ("<unnamed module>", "<unnamed parameter>")


class _Check(NamedTuple):
    # A named tuple, not a dataclass: one is made per checked tensor, on the training's hot
    # path, and the dtype is turned into text only for the one check that is reported.
    step: int
    name: str
    phase: str
    tensor: str
    shape: torch.Size
    dtype: torch.dtype
    parameter: str | None


def clean_name(name: str, root: nn.Module) -> str:
    """`name` (from `root.named_modules()`) without wrapper segments; DDP's `module.` too."""
    parts = [p for p in name.split(".") if p and p not in _WRAPPER_SEGMENTS]
    if parts and parts[0] == "module" and type(root).__name__ == "DistributedDataParallel":
        parts = parts[1:]
    return ".".join(parts)


def root_label(module: nn.Module) -> str:
    """A root module's name: its class, skipping FSDP2's generated `FSDP<Class>` subclass."""
    for cls in type(module).__mro__:
        if not cls.__name__.startswith("FSDP"):
            return cls.__name__
    return type(module).__name__


def _floating_tensors(value: object, depth: int = 0) -> Iterator[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        if value.is_floating_point() or value.is_complex():
            yield value
    elif depth < _MAX_NESTING:
        if isinstance(value, (tuple, list)):
            for item in value:
                yield from _floating_tensors(item, depth + 1)
        elif isinstance(value, dict):
            for item in value.values():
                yield from _floating_tensors(item, depth + 1)


def _local(tensor: torch.Tensor) -> torch.Tensor:
    # A DTensor's own shard: checking it needs no collective (each rank checks its part).
    to_local = getattr(tensor, "to_local", None)
    local: torch.Tensor = to_local() if callable(to_local) else tensor
    return local.detach()


class Locator:
    """Finds the first non-finite module output, gradient or updated parameter.

    `count_optimizer_steps`: the step number advances with every optimizer step (a command
    workload, whose loop aorta cannot see); otherwise the caller says when a step ends
    (`end_step`), as the in-process runner does from the workload's step reports.
    `on_found` is called once, with the location, when it is found.
    """

    def __init__(
        self,
        *,
        count_optimizer_steps: bool = False,
        on_found: Callable[[Location], None] | None = None,
    ) -> None:
        self.step = 0
        self.found: Location | None = None
        self._count_optimizer_steps = count_optimizer_steps
        self._on_found = on_found
        self._names: weakref.WeakKeyDictionary[nn.Module, str] = weakref.WeakKeyDictionary()
        self._param_names: dict[int, tuple[str, str]] = {}  # id -> (module, parameter)
        self._params: dict[int, weakref.ref[torch.Tensor]] = {}
        # Parameters whose accumulation hook has run: their gradients are checked there.
        self._accumulated: set[int] = set()
        self._checked_this_backward: set[tuple[str, str]] = set()
        self._optimizer_steps: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
        self._pending: list[tuple[_Check, torch.Tensor]] = []
        self._forward_pending = False
        self._end_of_backward_queued = False
        self._handles: list[RemovableHandle] = []

    def install(self) -> None:
        """Register the global hooks (idempotent)."""
        if self._handles:
            return
        hooks = nn.modules.module
        self._handles = [
            hooks.register_module_forward_pre_hook(self._before_forward),
            hooks.register_module_forward_hook(self._after_forward),
            register_optimizer_step_pre_hook(self._before_optimizer_step),
            register_optimizer_step_post_hook(self._after_optimizer_step),
        ]

    def remove(self) -> None:
        """Unregister the hooks; what is pending is read first."""
        self.flush()
        for handle in self._handles:
            handle.remove()
        self._handles = []

    def end_step(self, step: int) -> Location | None:
        """Step `step` is over: read its checks; later checks belong to step `step + 1`."""
        found = self.check_gradients()
        self.step = step + 1
        return found

    def flush(self) -> Location | None:
        """Read the pending checks (one synchronisation per device); the location, if any."""
        pending, self._pending = self._pending, []
        self._forward_pending = False
        if self.found is not None or not pending:
            return self.found
        groups: dict[tuple[torch.device, torch.dtype], list[int]] = {}
        for index, (_, probe) in enumerate(pending):
            groups.setdefault((probe.device, probe.dtype), []).append(index)
        bad: list[int] = []
        for indices in groups.values():
            probes = torch.stack([pending[i][1] for i in indices])
            finite = torch.isfinite(probes).cpu().tolist()
            bad.extend(i for i, ok in zip(indices, finite, strict=True) if not ok)
        if bad:
            self._report(pending[min(bad)][0])
        return self.found

    def _report(self, check: _Check) -> None:
        self.found = Location(
            check.step,
            check.name,
            check.phase,
            check.tensor,
            tuple(check.shape),
            str(check.dtype).removeprefix("torch."),
            check.parameter,
        )
        if self._on_found is not None:
            self._on_found(self.found)

    # --- hooks -------------------------------------------------------------------------

    def _before_forward(self, module: nn.Module, args: object) -> None:
        if torch.compiler.is_compiling():
            # Dynamo traces global hooks into the graph it compiles (and fails on the
            # locator's weak dictionaries): inside a compiled region nothing is hooked; the
            # compiled module's own call and its parameters' gradients are checked eagerly.
            return
        if module not in self._names:
            self._name_tree(module)
        if self.found is None and torch.is_grad_enabled():
            # The gradient this module computes for its inputs, when autograd gets there.
            name = self._name(module)
            for item in _floating_tensors(args):
                if item.requires_grad:
                    hook = partial(self._on_input_gradient, name)
                    item.register_hook(hook)  # type: ignore[no-untyped-call]  # untyped in torch

    def _name_tree(self, root: nn.Module) -> None:
        # Names from a larger tree replace those a sub-module got when it ran on its own.
        for name, module in root.named_modules(remove_duplicate=False):
            cleaned = clean_name(name, root) or root_label(root)
            self._names[module] = cleaned
            for param_name, param in module.named_parameters(recurse=False):
                self._watch_gradient(param, (cleaned, param_name))

    def _watch_gradient(self, param: nn.Parameter, name: tuple[str, str]) -> None:
        """Name `param` and check its gradient each time autograd accumulates one."""
        self._param_names[id(param)] = name
        known = self._params.get(id(param))
        if param.requires_grad and (known is None or known() is not param):
            # Weak, and checked by identity: the locator must not keep a finished trial's
            # model alive, and an id can be reused once a tensor is freed.
            self._params[id(param)] = weakref.ref(param)
            self._accumulated.discard(id(param))
            hook = param.register_post_accumulate_grad_hook  # torch leaves it untyped
            self._handles.append(hook(self._after_accumulate))  # type: ignore[no-untyped-call]

    def _after_accumulate(self, param: torch.Tensor) -> None:
        # The gradient is checked now, in its place among the module input checks: a weight
        # gradient that went non-finite before any activation gradient is the location.
        if self.found is not None:
            return
        self._accumulated.add(id(param))
        name = self._param_names.get(id(param), _UNNAMED_PARAMETER)
        sharded = callable(getattr(param, "to_local", None))
        if param.grad is not None and not (sharded and name in self._checked_this_backward):
            # FSDP2 calls the sharded parameter's hooks after its reduce-scatter, once the
            # unsharded parameter of the same name has been checked: the sum of the ranks'
            # gradients is not checked again (a rank whose part was non-finite found it).
            self._checked_this_backward.add(name)
            self._backward_check(param.grad, *name)
        # Once per backward pass: read the checks when autograd has finished, while the
        # script still holds its model (a script that stops at a NaN grad norm, then exits,
        # leaves nothing to check at exit).
        if not self._end_of_backward_queued:
            self._end_of_backward_queued = True
            # The engine's public-by-use callback queue (FSDP and DDP use it the same way).
            engine = torch.autograd.Variable._execution_engine
            engine.queue_callback(self._end_of_backward)

    def _end_of_backward(self) -> None:
        self._end_of_backward_queued = False
        self._checked_this_backward.clear()
        self.check_gradients()

    def check_gradients(self) -> Location | None:
        """Read the pending checks, then check the gradients no accumulation hook has seen.

        Gradients are normally checked as autograd accumulates them (`_after_accumulate`); a
        gradient set some other way (a wrapper that assigns `.grad` without calling the
        parameter's hooks) is checked here, after the pending checks, which came first.
        """
        params = [ref() for key, ref in self._params.items() if key not in self._accumulated]
        grads = [(p.grad, id(p)) for p in params if p is not None and p.grad is not None]
        return self._check_batch(grads, "backward", "grad")

    def _check_batch(
        self, tensors: list[tuple[torch.Tensor, int]], phase: str, kind: str
    ) -> Location | None:
        """Check many persistent tensors (parameters, their gradients) with one probe per
        dtype; only when a probe is non-finite are they checked one by one, to name the first.
        `tensors` pairs each tensor with the id of its parameter."""
        if self.flush() is not None:
            return self.found
        floating = [(_local(t), key) for t, key in tensors if t.is_floating_point()]
        groups: dict[tuple[torch.device, torch.dtype], list[torch.Tensor]] = {}
        for local, _ in floating:
            groups.setdefault((local.device, local.dtype), []).append(local.reshape(-1))
        probes = [torch.cat(flat) for flat in groups.values()]
        if all(bool(torch.isfinite((p - p).sum())) for p in probes):
            return None
        for local, key in floating:
            if not bool(torch.isfinite((local - local).sum())):
                module, parameter = self._param_names.get(key, _UNNAMED_PARAMETER)
                self._report(
                    _Check(self.step, module, phase, kind, local.shape, local.dtype, parameter)
                )
                break
        return self.found

    def _check(
        self, value: object, name: str, phase: str, tensor: str, parameter: str | None = None
    ) -> None:
        for item in _floating_tensors(value):
            local = _local(item)
            check = _Check(self.step, name, phase, tensor, local.shape, local.dtype, parameter)
            # sum(x - x) is exactly 0 when every element is finite and NaN otherwise (inf - inf
            # is NaN); unlike a plain sum it cannot overflow, and it costs a tenth of
            # isfinite(x).all() on a CPU (one fused pass, no boolean tensor to reduce).
            self._pending.append((check, (local - local).sum()))
        if len(self._pending) >= _FLUSH_EVERY:
            self.flush()

    def _name(self, module: nn.Module) -> str:
        return self._names.get(module) or f"<unnamed {root_label(module)}>"

    def _after_forward(self, module: nn.Module, args: object, output: object) -> None:
        if self.found is None and not torch.compiler.is_compiling():
            name = self._name(module)
            self._check(output, name, "forward", "output")
            self._forward_pending = True
            if torch.is_grad_enabled():
                self._watch_used_parameters(module, name)

    def _watch_used_parameters(self, module: nn.Module, name: str) -> None:
        """Watch the parameters `module` has just used, where they are not the ones it was
        named with: FSDP2 swaps each unsharded parameter (the one autograd accumulates into)
        onto the module for its forward, and back to the sharded one in its own forward hook,
        which runs after this global one."""
        for param_name, param in module._parameters.items():
            if param is not None and param.requires_grad:
                known = self._params.get(id(param))
                if known is None or known() is not param:
                    self._watch_gradient(param, (name, param_name))

    def _on_input_gradient(self, name: str, grad: torch.Tensor) -> None:
        self._backward_check(grad, name, None)

    def _backward_check(self, grad: torch.Tensor, name: str, parameter: str | None) -> None:
        if self._forward_pending:
            # The forward pass is over: read its checks now, once per backward pass, so that
            # a forward NaN is on record before the script prints (and aorta stops it on) a
            # NaN loss.
            self.flush()
        if self.found is None:
            self._check(grad, name, "backward", "grad", parameter)

    def _before_optimizer_step(
        self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any
    ) -> None:
        if self.found is None:
            self.check_gradients()

    def _after_optimizer_step(
        self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any
    ) -> None:
        if self.found is None:
            params = [p for group in optimizer.param_groups for p in group["params"]]
            self._check_batch([(p, id(p)) for p in params], "optimizer", "param")
        if self._count_optimizer_steps:
            # Several optimizers step once each per training step: the step is the largest
            # count, not their sum.
            count = self._optimizer_steps.get(optimizer, 0) + 1
            self._optimizer_steps[optimizer] = count
            self.step = max(self._optimizer_steps.values())
