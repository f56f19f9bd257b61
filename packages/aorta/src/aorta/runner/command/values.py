"""Read a number as training logs print it: punctuation around it, tensor reprs, `nan`/`inf`.

A value that still cannot be read is *unknown* (None), never non-finite: a log that prints
`loss 4.4512,` or `tensor(2.3012, grad_fn=<AddBackward0>)` has not diverged.
"""

from __future__ import annotations

import math
import re
from typing import Final

# `tensor(2.3012, device='cuda:0', grad_fn=<AddBackward0>)`, `tensor([nan])`: the first element.
_TENSOR: Final = re.compile(r"^tensor\(\s*\[*\s*(?P<number>[^,\s\])]+)")
# What surrounds a number in a log line and is not part of it.
_EDGES: Final = " \t,;:|()[]{}<>'\"%"


def parse_number(raw: str) -> float | None:
    """The float `raw` prints (`2.3E+00`, `4.45,`, `-inf`, a tensor repr); None: unreadable."""
    text = raw.strip()
    tensor = _TENSOR.match(text)
    if tensor is not None:
        text = tensor.group("number")
    text = text.strip(_EDGES)
    if "_" in text:  # float() accepts `1_000`; a log's `1_000` is a word, not a number
        return None
    try:
        return float(text)
    except ValueError:
        return None


def is_finite(value: float | None) -> bool:
    """True for a finite float."""
    return value is not None and math.isfinite(value)
