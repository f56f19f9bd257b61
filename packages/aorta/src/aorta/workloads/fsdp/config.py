"""Parameters of the fsdp workload, read from `AORTA_FSDP_*` environment variables.

This module must not import torch: the registry validates a request's variables with
`FsdpConfig.from_environ` before any trial starts (and `aorta --help` must stay fast).

Every variable is optional; an unset or empty variable means "use the default". A bad value
raises `WorkloadConfigError` with one line naming the variable, the value and what was
expected. An `AORTA_FSDP_*` variable this workload does not know is an error too (with a
"did you mean" hint): a misspelt mitigation would otherwise be silently ignored.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from aorta.errors import WorkloadConfigError

PREFIX: Final = "AORTA_FSDP_"

OPTIMIZERS: Final = ("adamw", "sgd")
AMP_DTYPES: Final = ("none", "bfloat16", "float16")
PARAM_DTYPES: Final = ("float32", "bfloat16")
DEVICES: Final = ("auto", "cpu", "cuda")
STEP_CLOCKS: Final = ("wall", "cpu")
INJECT_PHASES: Final = ("forward", "backward", "weight_grad")

# The warm-up default when AORTA_FSDP_WARMUP_STEPS is unset: min(3, steps // 5).
_AUTO_WARMUP_CAP: Final = 3
_AUTO_WARMUP_DIVISOR: Final = 5

# A setting where whether a trial diverges depends on its seed (for demo matrices): plain SGD
# (no momentum) at a learning rate just past the edge of stability of the default model. The
# blow-up is abrupt: a trial trains normally (loss ~5.7 -> ~2.7), then within a few steps its
# loss runs away to inf/NaN; which seeds do, and when, depends on the initialisation only.
# Clipping the global grad norm to 1.0 (the `fsdp_grad_clip` mitigation) bounds every update
# and cures it; bf16 autocast (`fsdp_amp_bf16`) does not.
# Measured with DIVERGENT_PRESET_STEPS=40 steps, seeds 0..15, default model and data, on a
# 2-core x86 CPU (torch 2.13 CPU build, gloo, world size 1):
#   preset alone:            8/16 seeds fail (non-finite at steps 30..39), mean step ~9 ms
#   preset + GRAD_CLIP=1.0:  0/16 fail (final loss 2.6..4.0),             mean step ~9 ms
#   (60 steps: 10/16 fail without clipping, 0/16 with; 1 thread instead of 2: same seeds.)
# The failing seeds are 1, 2, 4, 5, 6, 11, 12, 15. Seeds 3, 7, 8, 10, 13, 14 still train at
# step 60 (final loss ~2.4); seed 0 is already running away at step 39 and fails at step 44,
# seed 9 at step 54.
DIVERGENT_PRESET: Final[Mapping[str, str]] = {
    "AORTA_FSDP_OPTIMIZER": "sgd",
    "AORTA_FSDP_MOMENTUM": "0",
    "AORTA_FSDP_LR": "4.2",
}
DIVERGENT_PRESET_STEPS: Final = 40


@dataclass(frozen=True)
class FsdpConfig:
    """The resolved parameters of one fsdp trial (see `describe_parameters`)."""

    vocab_size: int = 256
    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    seq_len: int = 64
    batch_size: int = 8
    lr: float = 3e-3
    optimizer: str = "adamw"
    momentum: float = 0.9
    weight_decay: float = 0.0
    grad_clip: float = 0.0
    substeps: int = 1
    amp_dtype: str = "none"
    param_dtype: str = "float32"
    # As common training code sets it on CUDA (torch's own default has been off since 1.12).
    allow_tf32: bool = True
    # torch.compile (Inductor) on the transformer blocks; see aorta.workloads.fsdp.inductor.
    compile: bool = False
    # None: min(3, steps // 5), resolved by `warmup_for` once the step count is known.
    warmup_steps: int | None = None
    device: str = "auto"
    step_clock: str = "wall"
    data_seed: int = 1234
    # Test-only fault injection: make the loss NaN at this (0-based) step. Never on by default.
    test_inject_nan_at_step: int | None = None
    # With it: inject the NaN in this module (its fully qualified name, e.g. blocks.1.mlp_in)
    # instead of the loss, in its forward output or in the gradient it computes.
    test_inject_nan_module: str | None = None
    test_inject_nan_phase: str = "forward"

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> FsdpConfig:
        """Build the config from `AORTA_FSDP_*` variables; raises `WorkloadConfigError`."""
        known = {param.variable for param in PARAMETERS}
        for key in sorted(environ):
            if key.startswith(PREFIX) and key not in known:
                close = difflib.get_close_matches(key, sorted(known), n=1)
                hint = f"; did you mean {close[0]}?" if close else ""
                raise WorkloadConfigError(
                    f"{key} is not a parameter of the fsdp workload{hint} "
                    f"(known: {', '.join(sorted(known))})"
                )
        values: dict[str, object] = {}
        for param in PARAMETERS:
            raw = environ.get(param.variable, "").strip()
            if raw:
                values[param.field] = param.parse(param.variable, raw)
        config = cls(**values)  # type: ignore[arg-type]  # each parser returns its field's type
        if config.d_model % config.n_heads:
            raise WorkloadConfigError(
                f"{PREFIX}D_MODEL={config.d_model} with {PREFIX}N_HEADS={config.n_heads}: "
                "expected D_MODEL to be a multiple of N_HEADS"
            )
        if config.test_inject_nan_module is not None and config.test_inject_nan_at_step is None:
            raise WorkloadConfigError(
                f"{PREFIX}TEST_INJECT_NAN_MODULE needs {PREFIX}TEST_INJECT_NAN_AT_STEP "
                "(the step at which to inject)"
            )
        if config.test_inject_nan_module is not None and config.compile:
            # The injection adds hooks to a module inside a compiled block after it was
            # compiled, and Dynamo does not guard on them (`skip_nnmodule_hook_guards`): the
            # trial would run clean and look like a locator that missed.
            raise WorkloadConfigError(
                f"{PREFIX}TEST_INJECT_NAN_MODULE with {PREFIX}COMPILE=1: expected an eager "
                "model (the injection cannot reach inside a compiled block)"
            )
        return config

    def warmup_for(self, steps: int) -> int:
        """Warm-up steps of a trial of `steps` steps (never more than `steps`)."""
        if self.warmup_steps is None:
            return min(_AUTO_WARMUP_CAP, steps // _AUTO_WARMUP_DIVISOR)
        return min(self.warmup_steps, steps)

    def to_dict(self) -> dict[str, object]:
        """The config as a JSON-ready dict (recorded in a trial's `observed`)."""
        return dataclasses.asdict(self)


# --- parsers: (variable, raw value) -> parsed value, or WorkloadConfigError ---------------

Parser = Callable[[str, str], object]


def _bad(variable: str, raw: str, expected: str) -> WorkloadConfigError:
    return WorkloadConfigError(f"{variable}={raw!r}: expected {expected}")


def _int(minimum: int) -> Parser:
    expected = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"

    def parse(variable: str, raw: str) -> int:
        try:
            value = int(raw)
        except ValueError:
            raise _bad(variable, raw, expected) from None
        if value < minimum:
            raise _bad(variable, raw, expected)
        return value

    return parse


def _float(*, allow_zero: bool, below: float | None = None) -> Parser:
    if below is not None:
        expected = f"a float >= 0 and < {below}"
    elif allow_zero:
        expected = "a finite float >= 0"
    else:
        expected = "a positive finite float"

    def parse(variable: str, raw: str) -> float:
        try:
            value = float(raw)
        except ValueError:
            raise _bad(variable, raw, expected) from None
        if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
            raise _bad(variable, raw, expected)
        if below is not None and value >= below:
            raise _bad(variable, raw, expected)
        return value

    return parse


def _choice(choices: tuple[str, ...]) -> Parser:
    def parse(variable: str, raw: str) -> str:
        value = raw.lower()
        if value not in choices:
            raise _bad(variable, raw, "one of " + ", ".join(choices))
        return value

    return parse


_TRUE: Final = ("1", "true", "yes", "on")
_FALSE: Final = ("0", "false", "no", "off")


def _bool(variable: str, raw: str) -> bool:
    value = raw.lower()
    if value not in _TRUE + _FALSE:
        raise _bad(variable, raw, "1 or 0 (also true/false, yes/no, on/off)")
    return value in _TRUE


def _module_name(variable: str, raw: str) -> str:
    if not all(part.isidentifier() or part.isdigit() for part in raw.split(".")):
        raise _bad(variable, raw, "a dotted module name such as blocks.1.mlp_in")
    return raw


def _warmup(variable: str, raw: str) -> int | None:
    if raw.lower() == "auto":
        return None
    try:
        value = int(raw)
    except ValueError:
        raise _bad(variable, raw, "'auto' or an integer >= 0") from None
    if value < 0:
        raise _bad(variable, raw, "'auto' or an integer >= 0")
    return value


@dataclass(frozen=True)
class Parameter:
    """One workload parameter: its variable, default (as text), meaning and parser."""

    variable: str
    field: str
    default: str
    meaning: str
    parse: Parser


def _param(name: str, default: str, meaning: str, parse: Parser) -> Parameter:
    return Parameter(PREFIX + name, name.lower(), default, meaning, parse)


PARAMETERS: Final[tuple[Parameter, ...]] = (
    _param("VOCAB_SIZE", "256", "Vocabulary size of the LM and of the synthetic data.", _int(2)),
    _param("D_MODEL", "64", "Model width (a multiple of N_HEADS).", _int(1)),
    _param("N_LAYERS", "2", "Transformer blocks; each is its own FSDP2 unit.", _int(1)),
    _param("N_HEADS", "4", "Attention heads per block.", _int(1)),
    _param("SEQ_LEN", "64", "Tokens per training sequence (the context length).", _int(1)),
    _param(
        "BATCH_SIZE",
        "8",
        "Sequences per rank per step (global batch = this x world size).",
        _int(1),
    ),
    _param("LR", "0.003", "Learning rate (constant, no schedule).", _float(allow_zero=False)),
    _param("OPTIMIZER", "adamw", "Optimizer: adamw or sgd.", _choice(OPTIMIZERS)),
    _param(
        "MOMENTUM", "0.9", "SGD momentum (ignored by adamw).", _float(allow_zero=True, below=1.0)
    ),
    _param(
        "WEIGHT_DECAY",
        "0",
        "Decoupled weight decay (adamw) or L2 penalty (sgd).",
        _float(allow_zero=True),
    ),
    _param(
        "GRAD_CLIP",
        "0",
        "Clip the global gradient norm to this value; 0 = off (the norm is "
        "still computed and checked every step).",
        _float(allow_zero=True),
    ),
    _param(
        "SUBSTEPS",
        "1",
        "Optimizer updates per training step, each on the same batch with the gradient "
        "recomputed and LR / SUBSTEPS as learning rate: the same step length in smaller, more "
        "stable pieces, at SUBSTEPS times the compute per step.",
        _int(1),
    ),
    _param(
        "AMP_DTYPE",
        "none",
        "Autocast dtype of the forward pass: none, bfloat16 or float16 "
        "(float16 runs without loss scaling).",
        _choice(AMP_DTYPES),
    ),
    _param(
        "PARAM_DTYPE",
        "float32",
        "FSDP2 MixedPrecisionPolicy.param_dtype: the dtype "
        "parameters are all-gathered and computed in; sharded parameters, optimizer state "
        "and gradient reduction stay float32.",
        _choice(PARAM_DTYPES),
    ),
    _param(
        "ALLOW_TF32",
        "1",
        "Allow TF32 tensor-core math for float32 matmuls and convolutions, as common CUDA "
        "training code does: torch.set_float32_matmul_precision('high') and "
        "torch.backends.cudnn.allow_tf32 (0: 'highest', no TF32). Restored after the trial. "
        "The effective float32 matmul precision is measured and recorded in `observed`.",
        _bool,
    ),
    _param(
        "COMPILE",
        "0",
        "Compile each transformer block with torch.compile (Inductor: Triton kernels on a GPU, "
        "C++/OpenMP on the CPU, which needs a C++ compiler). Triton kernels compile in this "
        "process and Inductor's on-disk graph caches are off, so every trial compiles under "
        "its own settings and fingerprint_kernels sees each kernel. What was compiled is "
        "recorded in `observed` (compile).",
        _bool,
    ),
    _param(
        "WARMUP_STEPS",
        "auto",
        "Leading steps excluded from step_times_ms; auto = min(3, steps // 5).",
        _warmup,
    ),
    _param(
        "DEVICE",
        "auto",
        "auto (GPU when torch sees one, else CPU), cpu or cuda (also ROCm); "
        "CPU uses gloo, GPU uses nccl/rccl.",
        _choice(DEVICES),
    ),
    _param(
        "STEP_CLOCK",
        "wall",
        "What a step time measures: wall (elapsed time) or cpu (CPU time of this process; "
        "CPU device only). On a shared CPU machine wall time also measures the neighbours; "
        "cpu measures the step's own work (set OMP_NUM_THREADS=1, or spin-waiting threads "
        "count too).",
        _choice(STEP_CLOCKS),
    ),
    _param(
        "DATA_SEED",
        "1234",
        "Seed of the synthetic data stream; the same for every trial so "
        "that trials differ only by their model-init seed.",
        _int(0),
    ),
    _param(
        "TEST_INJECT_NAN_AT_STEP",
        "(unset)",
        "TEST ONLY: make the loss NaN at this 0-based "
        "step, to exercise the failure path. Never set it in real experiments.",
        _int(0),
    ),
    _param(
        "TEST_INJECT_NAN_MODULE",
        "(unset)",
        "TEST ONLY: with TEST_INJECT_NAN_AT_STEP, put the NaN into this module (its fully "
        "qualified name, e.g. blocks.1.mlp_in) instead of the loss: the locator's test case.",
        _module_name,
    ),
    _param(
        "TEST_INJECT_NAN_PHASE",
        "forward",
        "TEST ONLY: where TEST_INJECT_NAN_MODULE injects: forward (the module's output), "
        "backward (the gradient the module computes for its input) or weight_grad (its "
        "weight's gradient only; every activation gradient stays finite).",
        _choice(INJECT_PHASES),
    ),
)


def describe_parameters() -> list[tuple[str, str, str]]:
    """(variable, default, meaning) for every parameter, in documentation order."""
    return [(param.variable, param.default, param.meaning) for param in PARAMETERS]
