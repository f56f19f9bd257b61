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

# `loss: nan`, `lm loss: inf`, `"loss": NaN` (json), `'loss': nan` (Hugging Face dicts),
# `train_loss=nan` (Lightning), `loss = -inf`, `"loss": null` (strict JSON writers); likewise
# for the grad norm.
_NONFINITE: Final = r"""["']?\s*[:=]\s*["']?[-+]?(?:nan|inf(?:inity)?|null)\b"""


@dataclass(frozen=True)
class ScanPattern:
    """A compiled pattern and, optionally, lower-case words one of which every match contains.

    Python's `re` scans a case-insensitive pattern position by position (~100 MB/s at best,
    far less for these): the words let the scanner skip a block without running the regex
    when none of them is in it (`str.__contains__` is a fast substring search).
    """

    regex: re.Pattern[str]
    needles: tuple[str, ...] = ()

    @property
    def pattern(self) -> str:
        """The regex source (as recorded in a trial's failure/error match)."""
        return self.regex.pattern

    def could_match(self, lowered: str) -> bool:
        """False when `lowered` (the block, lower-cased) cannot hold a match."""
        return not self.needles or any(needle in lowered for needle in self.needles)


# (regex, needles): see ScanPattern.
DEFAULT_FAILURE_PATTERNS: Final[tuple[tuple[str, tuple[str, ...]], ...]] = (
    (r"(?i)\b(?:[a-z_]*loss)\b" + _NONFINITE, ("loss",)),
    (r"(?i)\bgrad(?:ient)?[ _]norm\b" + _NONFINITE, ("norm",)),
    # Megatron-LM leaves a NaN loss out of its averages and counts it here instead.
    (r"number of nan iterations:\s*[1-9]", ("nan iterations",)),
    # Megatron-LM's check_for_nan_in_loss_and_grad.
    (r"(?i)found (?:nan|inf) in local", ("found",)),
    # torch.autograd.set_detect_anomaly.
    (r"returned nan values in its \d+th output", ("returned nan",)),
)

DEFAULT_ERROR_PATTERNS: Final[tuple[tuple[str, tuple[str, ...]], ...]] = (
    (r"CUDA out of memory|torch\.OutOfMemoryError|OutOfMemoryError: CUDA", ("memory",)),
    (r"HIP out of memory|hipErrorOutOfMemory", ("memory",)),
    (
        r"(?i)(?:NCCL|RCCL).{0,200}time(?:d )?out|Watchdog caught collective operation timeout",
        ("nccl", "rccl", "watchdog"),
    ),
    (r"ModuleNotFoundError: No module named", ("modulenotfound",)),
    (r"ImportError: ", ("importerror",)),
)
