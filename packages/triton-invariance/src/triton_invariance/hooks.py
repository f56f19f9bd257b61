"""Phases 6 and 7 on stock Triton, without editing it.

* Every compiled variant is fingerprinted through `triton.knobs.compilation.listener`, which
  Triton calls after each `triton.compile` -- also on an on-disk cache hit (`cache_hit=True`),
  when no stage runs: the TTGIR is then read from the cached kernel's `.ttgir` file. The listener
  slot holds one callable, so a listener that was already there is chained, not replaced.
* The autotuner's winner is observed by wrapping `triton.runtime.autotuner.Autotuner.run` (a
  method wrapper installed at run time; no Triton file changes). After the original `run`
  returns, `self.best_config` is the winner and the return value is the winner's
  `CompiledKernel`, whether it was benchmarked now, taken from the in-memory autotune cache or
  from Triton's on-disk autotune cache. Each distinct winner kernel is committed / compared once
  per process.

`install()` is what the start-up hook calls when `TRITON_INVARIANCE_COMMIT` or
`TRITON_INVARIANCE_COMPARE` is set; programs may also call it themselves.
"""

from __future__ import annotations

import functools
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from triton_invariance.api import (
    CONFIG_OPTIONS,
    WinnerOutcome,
    cache_invariance,
    compute_config_hash,
    compute_signature_hash,
    config_mapping,
    mode_from_env,
    on_winner_selected,
)
from triton_invariance.cache import _invariance_cache
from triton_invariance.data import InvarianceData
from triton_invariance.errors import FingerprintUnavailableError

Reporter = Callable[[str], None]


@dataclass(frozen=True)
class Variant:
    """One compiled kernel variant as the hooks identify it."""

    kernel_name: str
    sig_hash: str
    cfg_hash: str
    config: Mapping[str, Any]


@dataclass(frozen=True)
class _Record:
    variant: Variant
    invariance: InvarianceData


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class _State:
    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.installed = False
        self.previous_listener: Any = None
        self.original_run: Any = None
        self.report: Reporter = _stderr
        # Triton's kernel hash (source, options, target) -> what the listener saw compile.
        self.records: dict[str, _Record] = {}
        # Kernel hashes whose winner decision is done in this process.
        self.decided: set[str] = set()


_state = _State()


def describe_variant(src: Any, metadata: Mapping[str, Any]) -> Variant:
    """Kernel name, signature hash, config hash and readable config of one compiled variant.

    The signature hash covers argument types only (the spec's rule); the config is every
    constexpr value (the tuned ones and any others) plus the launch options an autotune config
    sets, so two variants that Triton compiles differently never share a config hash.
    """
    arg_names = list(src.fn.arg_names)
    config: dict[str, Any] = {}
    for path, value in src.constants.items():
        name = arg_names[path[0]] + "".join(f"[{i}]" for i in path[1:])
        config[name] = value
    for option in CONFIG_OPTIONS:
        if metadata.get(option) is not None:
            config[option] = metadata[option]
    return Variant(
        kernel_name=src.name,
        sig_hash=compute_signature_hash(src.signature),
        cfg_hash=compute_config_hash(config),
        config=config_mapping(config),
    )


def _ttgir_from_group(metadata_group: Mapping[str, str], kernel: str) -> str:
    for name, path in metadata_group.items():
        if name.endswith(".ttgir"):
            return Path(path).read_text(encoding="utf-8")
    raise FingerprintUnavailableError(
        f"kernel {kernel!r}: Triton's cache holds no TTGIR for it (is TRITON_STORE_BINARY_ONLY "
        f"set? unset it, or clear the Triton cache so the kernel recompiles)"
    )


def _on_compiled(**kwargs: Any) -> None:
    """The compilation listener: fingerprint and cache every variant Triton hands back."""
    previous = _state.previous_listener
    if previous is not None:
        previous(**kwargs)
    src = kwargs["src"]
    if not hasattr(src, "fn"):  # compiled from an IR file: no Python kernel to tie it to
        return
    metadata = kwargs["metadata"]
    variant = describe_variant(src, metadata)
    ttgir = _ttgir_from_group(kwargs["metadata_group"], variant.kernel_name)
    inv = cache_invariance(ttgir, variant.kernel_name, variant.sig_hash, variant.cfg_hash)
    with _state.lock:
        _state.records[str(metadata["hash"])] = _Record(variant, inv)


def _record_for(kernel: Any) -> _Record:
    """The listener's record of a compiled kernel, or one made from the kernel itself (it was
    compiled before the hooks were installed)."""
    with _state.lock:
        record = _state.records.get(kernel.hash)
    if record is not None:
        return record
    variant = describe_variant(kernel.src, kernel.metadata._asdict())
    if "ttgir" not in kernel.asm:
        raise FingerprintUnavailableError(
            f"kernel {variant.kernel_name!r} carries no TTGIR (TRITON_STORE_BINARY_ONLY?)"
        )
    inv = cache_invariance(
        kernel.asm["ttgir"], variant.kernel_name, variant.sig_hash, variant.cfg_hash
    )
    record = _Record(variant, inv)
    with _state.lock:
        _state.records[kernel.hash] = record
    return record


def winner_selected(kernel: Any) -> WinnerOutcome | None:
    """Commit / compare the winner `kernel` (a `CompiledKernel`) once per process.

    Called by the `Autotuner.run` wrapper; exposed so a program (or a test) that picks a
    winner by other means can apply the same decision.
    """
    kernel_hash = getattr(kernel, "hash", None)
    if kernel_hash is None or kernel_hash in _state.decided:
        return None
    mode = mode_from_env()
    if mode == "off":
        return None
    record = _record_for(kernel)
    v = record.variant
    # The cache was cleared after an earlier decision for this kernel (another autotune key),
    # while Triton's JIT cache kept the compiled variants, which then do not compile again. Every
    # variant of this signature seen in this process is put back, so the winner and the
    # alternatives a mismatch report consults are all there.
    with _state.lock:
        siblings = [
            r
            for r in _state.records.values()
            if (r.variant.kernel_name, r.variant.sig_hash) == (v.kernel_name, v.sig_hash)
        ]
    for sibling in (*siblings, record):
        s = sibling.variant
        _invariance_cache.put(s.kernel_name, s.sig_hash, s.cfg_hash, sibling.invariance)
    outcome = on_winner_selected(v.kernel_name, v.sig_hash, v.cfg_hash, config=v.config, mode=mode)
    with _state.lock:
        _state.decided.add(kernel_hash)
    if outcome is not None:
        _state.report(outcome.describe())
    return outcome


def _wrap_run(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        ret = original(self, *args, **kwargs)
        if getattr(ret, "hash", None) not in _state.decided:
            winner_selected(ret)
        return ret

    run.__triton_invariance_wrapper__ = True  # type: ignore[attr-defined]
    return run


def install(report: Reporter | None = None) -> None:
    """Install the compile listener and the autotuner wrapper (idempotent).

    Validates the environment first, so a bad `TRITON_INVARIANCE_*` value fails here, once.
    """
    mode_from_env()
    import triton
    from triton.runtime.autotuner import Autotuner

    with _state.lock:
        if report is not None:
            _state.report = report
        if _state.installed:
            return
        _state.previous_listener = triton.knobs.compilation.listener
        triton.knobs.compilation.listener = _on_compiled
        _state.original_run = Autotuner.run
        Autotuner.run = _wrap_run(Autotuner.run)
        _state.installed = True


def uninstall() -> None:
    """Undo `install` and forget what was recorded (the cache is cleared too)."""
    import triton
    from triton.runtime.autotuner import Autotuner

    with _state.lock:
        if not _state.installed:
            return
        if triton.knobs.compilation.listener is _on_compiled:
            triton.knobs.compilation.listener = _state.previous_listener
        Autotuner.run = _state.original_run
        _state.previous_listener = None
        _state.original_run = None
        _state.records.clear()
        _state.decided.clear()
        _state.report = _stderr
        _state.installed = False
        _invariance_cache.clear()


def is_installed() -> bool:
    """Whether `install` is in effect."""
    return _state.installed
