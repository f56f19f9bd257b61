"""The default failure and error patterns of command workloads.

Failure = the numerical failure under study fired: a non-finite loss or grad norm in the log
formats training code commonly prints. Error = the trial could not measure it: out of memory,
a collective that timed out, a missing module. Patterns are matched line by line,
case-sensitively unless they say `(?i)`; a user's patterns are added to these
(`default_patterns: false` drops both default sets).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

# What follows a loss or grad-norm key when its value is not finite: `loss: nan`, `lm loss: inf`,
# `"loss": NaN` (json), `'loss': nan` (Hugging Face dicts), `train_loss=nan` (Lightning),
# `loss = -inf`, `"loss": null` (strict JSON writers), `loss nan` (nanoGPT, fairseq's `| loss
# nan |`), `loss: tensor(nan, device='cuda:0')`, `loss is nan`. `\b` after the value keeps
# `info`, `nanoseconds` and `inference` out.
_NONFINITE: Final = (
    r"""["']?(?:\s*[:=]\s*|\s+(?:is\s+)?)["']?(?:tensor\(\[?)?[-+]?(?:nan|inf(?:inity)?|null)\b"""
)


@dataclass(frozen=True)
class ScanPattern:
    """A compiled pattern and, optionally, lower-case words one of which every match contains.

    Python's `re` scans a case-insensitive pattern position by position (~100 MB/s at best,
    far less for these): the words let the scanner skip a block without running the regex
    when none of them is in it (`str.__contains__` is a fast substring search).
    """

    regex: re.Pattern[str]
    needles: tuple[str, ...] = ()
    name: str | None = None  # what a match means, e.g. "non-finite loss"; None: the regex

    @property
    def pattern(self) -> str:
        """What a trial's failure/error match records: the name, else the regex source."""
        return self.name if self.name is not None else self.regex.pattern

    def could_match(self, lowered: str) -> bool:
        """False when `lowered` (the block, lower-cased) cannot hold a match."""
        return not self.needles or any(needle in lowered for needle in self.needles)


@dataclass(frozen=True)
class DefaultPattern:
    """A default pattern: its regex, needles (see ScanPattern) and the name a match reads as."""

    regex: str
    needles: tuple[str, ...]
    name: str | None = None


DEFAULT_FAILURE_PATTERNS: Final = (
    DefaultPattern(r"(?i)\b(?:[a-z_]*loss)\b" + _NONFINITE, ("loss",), "non-finite loss"),
    DefaultPattern(
        r"(?i)\b(?:grad(?:ient)?[ _]norm|gnorm)\b" + _NONFINITE, ("norm",), "non-finite grad norm"
    ),
    # Megatron-LM leaves a NaN loss out of its averages and counts it here instead.
    DefaultPattern(
        r"number of nan iterations:\s*[1-9]", ("nan iterations",), "number of nan iterations > 0"
    ),
    # Megatron-LM's check_for_nan_in_loss_and_grad.
    DefaultPattern(r"(?i)found (?:nan|inf) in local", ("found",), "non-finite grad found"),
    # torch.autograd.set_detect_anomaly.
    DefaultPattern(
        r"returned nan values in its \d+th output", ("returned nan",), "anomaly: nan in backward"
    ),
    # PyTorch Lightning's check of the training_step loss.
    DefaultPattern(
        r"The loss returned in `training_step` is (?:tensor\()?[-+]?(?:nan|inf)",
        ("training_step",),
        "non-finite loss",
    ),
    # fairseq's optimizer: `FloatingPointError: gradients are Nan/Inf`.
    DefaultPattern(r"gradients are Nan/Inf", ("nan/inf",), "non-finite grad norm"),
)

DEFAULT_ERROR_PATTERNS: Final = (
    DefaultPattern(
        r"CUDA out of memory|torch\.OutOfMemoryError|OutOfMemoryError: CUDA", ("memory",)
    ),
    DefaultPattern(r"HIP out of memory|hipErrorOutOfMemory", ("memory",)),
    DefaultPattern(
        r"(?i)(?:NCCL|RCCL).{0,200}time(?:d )?out|Watchdog caught collective operation timeout",
        ("nccl", "rccl", "watchdog"),
    ),
    DefaultPattern(r"ModuleNotFoundError: No module named", ("modulenotfound",)),
    DefaultPattern(r"ImportError: ", ("importerror",)),
)
