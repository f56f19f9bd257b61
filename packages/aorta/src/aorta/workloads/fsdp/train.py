"""The fsdp workload's trial: FSDP2 training of `TinyLM` on synthetic Markov-chain tokens.

Process groups (the one rule that matters for running many trials in one process):

* No process group and no launcher variables: the trial creates a private world-size-1 group
  (gloo on CPU, nccl/rccl on GPU) over an in-memory `HashStore`, and destroys it when the trial
  ends, also on an exception. Trial after trial in one interpreter therefore works.
* Launched by torchrun (`RANK` and `WORLD_SIZE` in the environment) and no group yet: the trial
  initialises the default group from the environment (`env://`) and leaves it up for the later
  trials of this process; it is destroyed at interpreter exit. Re-creating it per trial would
  make every rank re-rendezvous on the launcher's store for no benefit.
* A default group already exists (the caller set one up): it is used as it is and never
  destroyed here: it belongs to whoever created it.
"""

from __future__ import annotations

import atexit
import gc
import math
import os
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext
from dataclasses import dataclass

import torch
import torch.distributed as dist
import torch.nn.functional as F  # noqa: N812  # the conventional alias
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor

from aorta.errors import WorkloadConfigError
from aorta.workloads.contract import TrialContext, WorkloadOutcome
from aorta.workloads.fsdp.config import FsdpConfig
from aorta.workloads.fsdp.data import MarkovTokens
from aorta.workloads.fsdp.inject import injection_target, nan_in_module
from aorta.workloads.fsdp.model import TinyLM, build_model

# Importing torch leaves ~240k long-lived objects behind. A full (generation 2) collection
# scans them all, ~150 ms here, and the collector starts one at unpredictable moments: inside
# a timed step it turns into a fake slow step. Freezing moves the objects that exist now (the
# imported modules) out of the collector's sight; objects created later are collected as usual.
gc.freeze()

_AMP_DTYPES = {"none": None, "bfloat16": torch.bfloat16, "float16": torch.float16}

# Variables read by GPU runtimes / math libraries; recorded as the trial saw them.
OBSERVED_ENV_VARS = (
    "NVIDIA_TF32_OVERRIDE",
    "HIPBLASLT_ALLOW_TF32",
    "HSA_XNACK",
    "TRITON_F32_DEFAULT",
    "TRITON_FORCE_DISABLE_FP_FUSION",
    "TRITON_DEFAULT_FP_FUSION",
)

# A float32 matmul of this size, checked against float64: in IEEE float32 the largest relative
# error stays near 1e-6 (measured on CPU: ~4e-7), TF32's 10-bit mantissa (and bf16 inputs)
# give ~1e-4 to 1e-3. The bound between the two is far from both.
_PRECISION_PROBE_SIZE = 256
_REDUCED_PRECISION_ABOVE = 1e-5


@dataclass(frozen=True)
class DistSetup:
    """The process group a trial runs in."""

    backend: str
    rank: int
    world_size: int
    # "private" (created and destroyed by this trial), "env" (torchrun, kept for the process)
    # or "existing" (created by the caller).
    origin: str


def launched_by_torchrun(environ: Mapping[str, str]) -> bool:
    """Whether the launcher variables of torchrun (or an equivalent) are present."""
    return "RANK" in environ and "WORLD_SIZE" in environ


# The default group this module created from torchrun's variables, if any: later trials of
# the process reuse it (and report it as "env", not as someone else's "existing" group).
_env_group: object | None = None


def _destroy_env_group() -> None:
    global _env_group  # noqa: PLW0603  # process-wide by design, see the module docstring
    # Runs at exit, while the interpreter is still whole: anything still holding the group or
    # tensors of its collectives (FSDP modules of finished trials sit in reference cycles) is
    # released here and not by gloo's worker threads during interpreter shutdown, when a
    # thread that needs the GIL to free a tensor can abort the process.
    gc.collect()
    if dist.is_initialized() and dist.group.WORLD is _env_group:
        dist.destroy_process_group()
    _env_group = None
    gc.collect()


@contextmanager
def trial_process_group(environ: Mapping[str, str], device_type: str) -> Iterator[DistSetup]:
    """Provide the default process group for one trial (see the module docstring)."""
    global _env_group  # noqa: PLW0603  # process-wide by design, see the module docstring
    backend = "nccl" if device_type == "cuda" else "gloo"
    if dist.is_initialized():
        origin = "env" if dist.group.WORLD is _env_group else "existing"
    elif launched_by_torchrun(environ):
        # env:// reads MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE and, under torchrun, joins the
        # elastic agent's store instead of binding MASTER_PORT a second time.
        dist.init_process_group(backend, init_method="env://")
        if _env_group is None:
            atexit.register(_destroy_env_group)
        _env_group = dist.group.WORLD
        origin = "env"
    else:
        # An in-memory store: no port, no file, nothing left behind. `HashStore` is public API
        # (torch.distributed.HashStore) but torch/distributed/__init__.py imports it without a
        # re-export, so mypy's strict mode does not see it.
        store = dist.HashStore()  # type: ignore[attr-defined]
        dist.init_process_group(backend, store=store, rank=0, world_size=1)
        origin = "private"
    try:
        yield DistSetup(
            backend=str(dist.get_backend()),
            rank=dist.get_rank(),
            world_size=dist.get_world_size(),
            origin=origin,
        )
    finally:
        if origin == "private":
            dist.destroy_process_group()
        else:
            # The trial's FSDP modules live in reference cycles that hold the shared group and
            # tensors of its collectives: free them now, not from gloo's threads at exit. A
            # private group is gone with the trial, so its cycles need no eager (~150 ms) pass.
            gc.collect()


def resolve_device(config: FsdpConfig, environ: Mapping[str, str]) -> torch.device:
    """The trial's device; on a GPU also made the current device (before any NCCL group).

    `auto` means the GPU when torch sees one (CUDA or ROCm), else the CPU. Under a launcher each
    rank takes the GPU of its `LOCAL_RANK`. Raises `WorkloadConfigError` when `cuda` is asked for
    and no GPU is visible.
    """
    if config.device == "cpu":
        return torch.device("cpu")
    available = torch.cuda.is_available()
    if config.device == "cuda" and not available:
        raise WorkloadConfigError(
            "AORTA_FSDP_DEVICE='cuda': expected a visible CUDA/ROCm GPU, torch sees none"
        )
    if not available:
        return torch.device("cpu")
    if "LOCAL_RANK" in environ:
        index = int(environ["LOCAL_RANK"])
    elif dist.is_initialized():
        index = dist.get_rank() % torch.cuda.device_count()
    else:
        index = torch.cuda.current_device()
    torch.cuda.set_device(index)
    return torch.device("cuda", index)


def build_optimizer(config: FsdpConfig, model: torch.nn.Module) -> torch.optim.Optimizer:
    """The configured optimizer over the (sharded) parameters of `model`."""
    # With sub-steps the step's learning rate is shared out among its updates.
    lr = config.lr / config.substeps
    if config.optimizer == "sgd":
        return torch.optim.SGD(
            model.parameters(),
            lr=lr,
            momentum=config.momentum,
            weight_decay=config.weight_decay,
        )
    return torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=config.weight_decay)


def _synchronize(device: torch.device) -> None:
    # GPU work is asynchronous: without this the clock would measure kernel launches only.
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _as_float(value: torch.Tensor) -> float:
    # With FSDP2 the global grad norm comes back as a replicated DTensor.
    if isinstance(value, DTensor):
        value = value.full_tensor()
    return float(value.item())


@contextmanager
def tf32_setting(allow: bool) -> Iterator[None]:
    """Allow (or forbid) TF32 for float32 matmuls and convolutions while the trial runs.

    What training scripts do at start-up (`torch.set_float32_matmul_precision("high")`,
    `torch.backends.cudnn.allow_tf32 = True`); put back afterwards, because the next trial of
    this interpreter must start from the same process state.
    """
    saved_precision = torch.get_float32_matmul_precision()
    saved_cudnn = torch.backends.cudnn.allow_tf32
    torch.set_float32_matmul_precision("high" if allow else "highest")
    torch.backends.cudnn.allow_tf32 = allow
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(saved_precision)
        torch.backends.cudnn.allow_tf32 = saved_cudnn


Matmul = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def fp32_matmul_precision(matmul: Matmul) -> tuple[str, float]:
    """How precise `matmul` is on float32 operands: ("ieee" | "reduced", max relative error).

    Multiplies two fixed random float32 matrices and compares with the float64 product. The
    error is rounded to one significant digit so that identical settings record identical
    values (and the matrix can compare them across cells).
    """
    generator = torch.Generator().manual_seed(0)
    size = _PRECISION_PROBE_SIZE
    a = torch.randn(size, size, generator=generator, dtype=torch.float64)
    b = torch.randn(size, size, generator=generator, dtype=torch.float64)
    exact = a @ b
    got = matmul(a.float(), b.float()).double().cpu()
    error = float(((got - exact).abs().max() / exact.abs().max()).item())
    error = float(f"{error:.0e}")
    return ("reduced" if error > _REDUCED_PRECISION_ABOVE else "ieee"), error


def measure_fp32_matmul(device: torch.device) -> tuple[str, float]:
    """The float32 matmul precision in effect on `device`, measured rather than read off flags.

    Flags can lie about what the math library does (NVIDIA_TF32_OVERRIDE overrides torch's
    flag inside cuBLAS; a ROCm build has switches of its own), so the trial measures it.
    """
    return fp32_matmul_precision(lambda a, b: a.to(device) @ b.to(device))


def observe(config: FsdpConfig, setup: DistSetup, device: torch.device) -> dict[str, object]:
    """The settings in effect inside the trial: they show that a mitigation reached it."""
    observed: dict[str, object] = {
        "config": config.to_dict(),
        "device": str(device),
        "backend": setup.backend,
        "rank": setup.rank,
        "world_size": setup.world_size,
        "process_group": setup.origin,
        "torch_version": torch.__version__,
        "torch_cuda_version": torch.version.cuda,
        "torch_hip_version": torch.version.hip,
        "torch.backends.cuda.matmul.allow_tf32": torch.backends.cuda.matmul.allow_tf32,
        "torch.backends.cudnn.allow_tf32": torch.backends.cudnn.allow_tf32,
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
    }
    effective, error = measure_fp32_matmul(device)
    observed["fp32_matmul_effective"] = effective
    observed["fp32_matmul_max_rel_error"] = error
    for key in OBSERVED_ENV_VARS:
        observed[key] = os.environ.get(key)
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        observed["device_name"] = props.name
        if torch.version.hip is not None:
            # e.g. "gfx90a:sramecc+:xnack-": shows whether HSA_XNACK took effect.
            observed["gcnArchName"] = getattr(props, "gcnArchName", None)
    return observed


def run_trial(ctx: TrialContext) -> WorkloadOutcome:
    """Train for `ctx.steps` steps; stop at the first non-finite loss or grad norm.

    `ctx.seed` seeds the model initialisation; the data depends on AORTA_FSDP_DATA_SEED only.
    Steps are numbered from 0. A failed step still gets its `on_step` call, but its time is
    not in `step_times_ms` (it did not complete); its loss is None when that was non-finite.
    """
    config = FsdpConfig.from_environ(ctx.environ)
    warmup = config.warmup_for(ctx.steps)
    device = resolve_device(config, ctx.environ)
    if config.step_clock == "cpu" and device.type != "cpu":
        # GPU work runs asynchronously: the process's CPU time says nothing about it.
        raise WorkloadConfigError(
            f"AORTA_FSDP_STEP_CLOCK='cpu': expected the CPU device, the trial runs on {device}"
        )
    if config.compile:
        # Imported only for compiled trials: it imports Dynamo and Inductor (~0.7 s).
        from aorta.workloads.fsdp.inductor import check_toolchain

        check_toolchain(device)
    with tf32_setting(config.allow_tf32), trial_process_group(ctx.environ, device.type) as setup:
        return _run_in_group(ctx, config, setup, device, warmup)


def _run_in_group(
    ctx: TrialContext, config: FsdpConfig, setup: DistSetup, device: torch.device, warmup: int
) -> WorkloadOutcome:
    # A function of its own so that the model and optimizer are unreferenced once it returns,
    # before `trial_process_group` cleans up.
    torch.manual_seed(ctx.seed)
    mesh = init_device_mesh(device.type, (setup.world_size,))
    model = build_model(config, mesh, device)
    if config.test_inject_nan_module is not None:
        # A wrong name fails up front.
        injection_target(model, config.test_inject_nan_module, config.test_inject_nan_phase)
    optimizer = build_optimizer(config, model)
    data = MarkovTokens(config.vocab_size, config.seq_len, config.data_seed)
    observed = observe(config, setup, device)
    with ExitStack() as stack:
        if config.compile:
            from aorta.workloads.fsdp.inductor import compile_blocks, compiled_trial

            observed["compile"] = stack.enter_context(compiled_trial())
            compile_blocks(model)
        outcome = _train(ctx, config, setup, device, model, optimizer, data, warmup)
    if setup.world_size > 1:
        # Ranks leave a trial together: none has a collective of this trial still in flight.
        dist.barrier()
    outcome.observed = {**observed, **outcome.observed}
    return outcome


def _update(
    model: TinyLM,
    optimizer: torch.optim.Optimizer,
    batch: tuple[torch.Tensor, torch.Tensor],
    *,
    amp_dtype: torch.dtype | None,
    setup: DistSetup,
    max_norm: float,
    inject_nan: bool,
) -> tuple[float, float | None]:
    """One optimizer update on `batch`: the global loss and global grad norm before it.

    Nothing is updated when the loss is not finite (the norm is then None, never computed) or
    the grad norm is not finite.
    """
    inputs, targets = batch
    with torch.autocast(inputs.device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
        logits = model(inputs)
    loss = F.cross_entropy(logits.float(), targets.flatten())
    if inject_nan:
        loss = loss * math.nan
    # The mean over ranks: every rank sees the same value, hence takes the same decision
    # (a NaN or inf on any rank makes the sum non-finite everywhere).
    global_loss = loss.detach().clone()
    if setup.world_size > 1:
        dist.all_reduce(global_loss)
        global_loss /= setup.world_size
    loss_value = float(global_loss.item())
    if not math.isfinite(loss_value):
        return loss_value, None
    optimizer.zero_grad(set_to_none=True)
    # Same as loss.backward(); that method has no annotations, this function does.
    torch.autograd.backward(loss)
    # Already global: FSDP2 gradients are DTensors and the norm is reduced over the mesh.
    grad_norm = _as_float(torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm))
    if math.isfinite(grad_norm):
        optimizer.step()
    return loss_value, grad_norm


def _module_injection(
    model: TinyLM, config: FsdpConfig, inject: bool
) -> AbstractContextManager[None]:
    """The test-only NaN in a module (`AORTA_FSDP_TEST_INJECT_NAN_MODULE`) for this update."""
    if not inject or config.test_inject_nan_module is None:
        return nullcontext()
    target = injection_target(model, config.test_inject_nan_module, config.test_inject_nan_phase)
    return nan_in_module(target, config.test_inject_nan_phase)


def _train(
    ctx: TrialContext,
    config: FsdpConfig,
    setup: DistSetup,
    device: torch.device,
    model: TinyLM,
    optimizer: torch.optim.Optimizer,
    data: MarkovTokens,
    warmup: int,
) -> WorkloadOutcome:
    amp_dtype = _AMP_DTYPES[config.amp_dtype]
    # max_norm=inf computes the global norm without changing the gradients.
    max_norm = config.grad_clip if config.grad_clip > 0 else math.inf
    losses: list[float | None] = []
    grad_norms: list[float | None] = []
    step_times: list[float] = []
    failure: str | None = None
    failed_at: int | None = None
    clock = time.process_time if config.step_clock == "cpu" else time.perf_counter
    for step in range(ctx.steps):
        tokens = data.batch(step, setup.rank, config.batch_size).to(device)
        batch = (tokens[:, :-1], tokens[:, 1:])
        _synchronize(device)
        start = clock()
        # The step's loss and norm are those of its first update (the model as the step
        # found it), so runs with and without sub-steps report comparable curves.
        first: tuple[float, float | None] | None = None
        for sub in range(config.substeps):
            inject = step == config.test_inject_nan_at_step and sub == 0
            with _module_injection(model, config, inject):
                loss_value, grad_norm = _update(
                    model,
                    optimizer,
                    batch,
                    amp_dtype=amp_dtype,
                    setup=setup,
                    max_norm=max_norm,
                    inject_nan=inject and config.test_inject_nan_module is None,
                )
            first = first or (loss_value, grad_norm)
            where = f"step {step}" + (f" (sub-step {sub})" if config.substeps > 1 else "")
            if not math.isfinite(loss_value):
                failure = f"non-finite loss at {where}"
                break
            if grad_norm is None or not math.isfinite(grad_norm):
                failure = f"non-finite grad norm at {where}"
                break
        assert first is not None  # substeps >= 1
        loss0, norm0 = first
        step_loss = loss0 if math.isfinite(loss0) else None
        losses.append(step_loss)
        if step_loss is not None:
            grad_norms.append(norm0 if norm0 is not None and math.isfinite(norm0) else None)
        if failure is not None:
            failed_at = step
            ctx.on_step(step, step_loss, (clock() - start) * 1000.0)
            break
        _synchronize(device)
        elapsed_ms = (clock() - start) * 1000.0
        if step >= warmup:
            step_times.append(elapsed_ms)
        ctx.on_step(step, step_loss, elapsed_ms)
    return WorkloadOutcome(
        step_times_ms=step_times,
        warmup_steps=warmup,
        losses=losses,
        failure=failure,
        failed_at_step=failed_at,
        observed={"grad_norms": grad_norms},
        step_clock=config.step_clock,
    )
