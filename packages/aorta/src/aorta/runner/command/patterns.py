"""The default failure and error patterns of command workloads.

Failure = the numerical failure under study fired: a non-finite loss or grad norm in the log
formats training code commonly prints. Error = the trial could not measure it: out of memory,
a collective that timed out, a missing module. Patterns are matched line by line,
case-sensitively unless they say `(?i)`; a user's patterns are added to these
(`default_patterns: false` drops both default sets).
"""

from __future__ import annotations

from typing import Final

# `loss: nan`, `lm loss: inf`, `"loss": NaN` (json), `'loss': nan` (Hugging Face dicts),
# `train_loss=nan` (Lightning), `loss = -inf`, `"loss": null` (strict JSON writers); likewise
# for the grad norm.
_NONFINITE: Final = r"""["']?\s*[:=]\s*["']?[-+]?(?:nan|inf(?:inity)?|null)\b"""

DEFAULT_FAILURE_PATTERNS: Final[tuple[str, ...]] = (
    r"(?i)\b(?:[a-z_]*loss)\b" + _NONFINITE,
    r"(?i)\bgrad(?:ient)?[ _]norm\b" + _NONFINITE,
    # Megatron-LM leaves a NaN loss out of its averages and counts it here instead.
    r"number of nan iterations:\s*[1-9]",
    # Megatron-LM's check_for_nan_in_loss_and_grad.
    r"(?i)found (?:nan|inf) in local",
    # torch.autograd.set_detect_anomaly.
    r"returned nan values in its \d+th output",
)

DEFAULT_ERROR_PATTERNS: Final[tuple[str, ...]] = (
    r"CUDA out of memory|torch\.OutOfMemoryError|OutOfMemoryError: CUDA",
    r"HIP out of memory|hipErrorOutOfMemory",
    r"(?i)(?:NCCL|RCCL).{0,200}time(?:d )?out|Watchdog caught collective operation timeout",
    r"ModuleNotFoundError: No module named",
    r"ImportError: ",
)
