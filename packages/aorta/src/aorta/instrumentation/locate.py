"""The first non-finite module: PyTorch's global module hooks plus a post-step parameter check.

`Locator.install()` registers, for every `nn.Module` of the process,

- a forward pre-hook that names modules: the first time a module nobody has named yet runs,
  it is a root (its parent would have run first), and its whole tree is named from it;
- a forward hook that checks the module's floating-point outputs (`output`);
- a full backward hook that checks the gradients flowing out of and into the module (`grad`),
  and a hook on every named parameter that checks its gradient once accumulated (`grad`);
- an optimizer step post-hook that checks the parameters the optimizer updated (`param`).

The checks are lazy: each adds a 0-dim "all finite" tensor to a pending list, and `flush()`
reads them all with one device synchronisation (at the end of a step, at an optimizer step,
or when the list is long). The first check, in execution order, that saw a non-finite value is
the location; after that nothing is checked any more.

Under FSDP the recorded name is the model's own fully qualified name: FSDP2 (`fully_shard`)
keeps module names, and the wrapper segments of FSDP1, activation checkpointing and
`torch.compile` (`_fsdp_wrapped_module`, `_checkpoint_wrapped_module`, `_orig_mod`) are removed.
Gradients arriving at a module already non-finite are reported at the first module that
received them: a NaN born in the loss function is reported at the LM head's backward.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Final

import torch
from torch import nn
from torch.optim.optimizer import register_optimizer_step_post_hook
from torch.utils.hooks import RemovableHandle

from aorta.instrumentation.locate_record import Location

# Segments that wrappers insert into module names; the user knows the model without them.
_WRAPPER_SEGMENTS: Final = frozenset(
    {"_fsdp_wrapped_module", "_checkpoint_wrapped_module", "_orig_mod"}
)
# Pending checks are read in batches: one synchronisation per batch, bounded memory.
_FLUSH_EVERY: Final = 1024
_MAX_NESTING: Final = 4
_UNNAMED_PARAMETER: Final = (
    "<unnamed module>",
    "<unnamed parameter>",
)  # outputs such as (logits, (k, v)) or {"loss": ..., "hidden": [...]}


@dataclass(frozen=True)
class _Check:
    step: int
    name: str
    phase: str
    tensor: str
    shape: tuple[int, ...]
    dtype: str
    parameter: str | None = None


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
        self._watched: dict[int, weakref.ref[torch.Tensor]] = {}
        self._optimizer_steps: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
        self._pending: list[tuple[_Check, torch.Tensor]] = []
        self._forward_pending = False
        self._handles: list[RemovableHandle] = []

    def install(self) -> None:
        """Register the global hooks (idempotent)."""
        if self._handles:
            return
        hooks = nn.modules.module
        self._handles = [
            hooks.register_module_forward_pre_hook(self._before_forward),
            hooks.register_module_forward_hook(self._after_forward),
            hooks.register_module_full_backward_hook(self._after_backward),
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
        found = self.flush()
        self.step = step + 1
        return found

    def flush(self) -> Location | None:
        """Read the pending checks (one synchronisation per device); the location, if any."""
        pending, self._pending = self._pending, []
        self._forward_pending = False
        if self.found is not None or not pending:
            return self.found
        by_device: dict[torch.device, list[int]] = {}
        for index, (_, flag) in enumerate(pending):
            by_device.setdefault(flag.device, []).append(index)
        bad: list[int] = []
        for indices in by_device.values():
            flags = torch.stack([pending[i][1] for i in indices]).cpu().tolist()
            bad.extend(i for i, ok in zip(indices, flags, strict=True) if not ok)
        if bad:
            check = pending[min(bad)][0]
            self.found = Location(
                check.step,
                check.name,
                check.phase,
                check.tensor,
                check.shape,
                check.dtype,
                check.parameter,
            )
            if self._on_found is not None:
                self._on_found(self.found)
        return self.found

    # --- hooks -------------------------------------------------------------------------

    def _before_forward(self, module: nn.Module, args: object) -> None:
        if module not in self._names:
            self._name_tree(module)

    def _name_tree(self, root: nn.Module) -> None:
        # Names from a larger tree replace those a sub-module got when it ran on its own.
        for name, module in root.named_modules(remove_duplicate=False):
            cleaned = clean_name(name, root) or root_label(root)
            self._names[module] = cleaned
            for param_name, param in module.named_parameters(recurse=False):
                self._watch_gradient(param, (cleaned, param_name))

    def _watch_gradient(self, param: nn.Parameter, name: tuple[str, str]) -> None:
        """Name `param` and check its gradient once autograd has accumulated it.

        A NaN can live in weight gradients alone (the first layer's input needs no gradient,
        so no module hook sees one); this hook is what finds it.
        """
        self._param_names[id(param)] = name
        watched = self._watched.get(id(param))
        if (watched is None or watched() is not param) and param.requires_grad:
            # Keyed by id and checked by identity: an id can be reused once a tensor is freed.
            self._watched[id(param)] = weakref.ref(param)
            hook = param.register_post_accumulate_grad_hook  # torch leaves it untyped
            self._handles.append(hook(self._after_accumulate))  # type: ignore[no-untyped-call]

    def _after_accumulate(self, param: torch.Tensor) -> None:
        if self.found is None and param.grad is not None:
            module, name = self._param_names.get(id(param), _UNNAMED_PARAMETER)
            self._check(param.grad, module, "backward", "grad", parameter=name)

    def _check(
        self, value: object, name: str, phase: str, tensor: str, parameter: str | None = None
    ) -> None:
        for item in _floating_tensors(value):
            local = _local(item)
            dtype = str(local.dtype).removeprefix("torch.")
            check = _Check(self.step, name, phase, tensor, tuple(local.shape), dtype, parameter)
            self._pending.append((check, torch.isfinite(local).all()))
        if len(self._pending) >= _FLUSH_EVERY:
            self.flush()

    def _name(self, module: nn.Module) -> str:
        return self._names.get(module) or f"<unnamed {root_label(module)}>"

    def _after_forward(self, module: nn.Module, args: object, output: object) -> None:
        if self.found is None:
            self._check(output, self._name(module), "forward", "output")
            self._forward_pending = True

    def _after_backward(self, module: nn.Module, grad_input: object, grad_output: object) -> None:
        if self._forward_pending:
            # The forward pass is over: read its checks now, once per backward pass, so that
            # a forward NaN is on record before the script prints (and aorta stops it on) a
            # NaN loss.
            self.flush()
        if self.found is None:
            name = self._name(module)
            # The gradient the module received, then the one it produced: a NaN arriving
            # from outside any module (the loss) is reported where it first entered one.
            self._check(grad_output, name, "backward", "grad")
            self._check(grad_input, name, "backward", "grad")

    def _after_optimizer_step(
        self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any
    ) -> None:
        if self.found is None:
            for group in optimizer.param_groups:
                for param in group["params"]:
                    module, name = self._param_names.get(id(param), _UNNAMED_PARAMETER)
                    self._check(param, module, "optimizer", "param", parameter=name)
            self.flush()
        if self._count_optimizer_steps:
            # Several optimizers step once each per training step: the step is the largest
            # count, not their sum.
            count = self._optimizer_steps.get(optimizer, 0) + 1
            self._optimizer_steps[optimizer] = count
            self.step = max(self._optimizer_steps.values())
