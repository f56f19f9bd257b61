"""Megatron's import-time and validation chatter, kept off the terminal and logged.

A leaf: both the parser loader (`source`) and the in-process validation (`runtime`) use it,
and neither depends on the other for it.
"""

from __future__ import annotations

import contextlib
import io
import logging
import warnings
from collections.abc import Iterator

# Megatron's import-time chatter (deprecation warnings, prints) goes here, shown with `-v`.
log = logging.getLogger("oellm_autoexp.megatron")


@contextlib.contextmanager
def captured_output(what: str, *, log_prints: bool = True) -> Iterator[io.StringIO]:
    """Keep Megatron's prints and warnings off the terminal; log them (shown with ``-v``).

    Megatron prints and warns while it is imported and validated; a one-line error must not be
    buried under that. Captured warnings (and prints, with `log_prints`) are logged at INFO on
    ``oellm_autoexp.megatron``; `validate_args` prints every argument, which is left out.
    """
    out = io.StringIO()
    with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(out):
        warnings.simplefilter("always")
        with contextlib.redirect_stderr(out):
            try:
                yield out
            finally:
                if log.isEnabledFor(logging.INFO):
                    lines = out.getvalue().splitlines() if log_prints else []
                    lines += [f"{w.category.__name__}: {w.message}" for w in caught]
                    for line in dict.fromkeys(ln for ln in lines if ln.strip()):
                        log.info("%s: %s", what, line)
