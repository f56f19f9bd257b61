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
  per process, filed per autotune key (the values of the autotuner's `key` arguments).
* A kernel compiled outside an autotuner's `run` (plain `@triton.jit`, `@triton.heuristics`
  only, `triton.compile`) is its own winner: the listener commits / compares it at its first
  compile in the process, with the launch options (num_warps, ...) as part of its
  specialisation.
* Under `TRITON_INVARIANCE_RECORD_SCALARS=1` `JITFunction.run` is wrapped too: the float
  arguments of each kernel's first launch are committed with its baseline and compared with
  them (the pytest gate's `--triton-invariance-record-scalars`, shared code in `scalars`); a
  plain kernel is then decided at its first launch instead of its compile.

A variant's constexprs are split in two. Those an autotune config sets (the *tuned* names, e.g.
BLOCK) go with num_warps / num_stages / num_ctas into the config hash, which therefore equals
`compute_config_hash(winner_config)`. The others (set by the caller or by `@triton.heuristics`)
are a *specialisation*, and so are the attributes Triton derives from the arguments at the call
(`tt.divisibility=16` for an int or pointer divisible by 16): they go into the signature hash,
so each specialisation has its own baseline file instead of overwriting another's.

`install()` is what the start-up hook calls when `TRITON_INVARIANCE_COMMIT` or
`TRITON_INVARIANCE_COMPARE` is set; programs may also call it themselves.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import sys
import threading
import weakref
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
    legacy_signature_hash,
    mode_from_env,
    on_winner_selected,
    record_scalars_from_env,
)
from triton_invariance.cache import _invariance_cache
from triton_invariance.data import InvarianceData
from triton_invariance.errors import FingerprintUnavailableError
from triton_invariance.fingerprint import compute_invariance
from triton_invariance.verdict import CODE_KINDS, asm_digest, asm_digest_of_text

Reporter = Callable[[str], None]

# The tuned constexpr names of the autotuner whose `run` is executing in this thread / task, so
# the listener can key the variants it sees compile the way the winner will be keyed.
# None outside an autotuner's `run`: a kernel compiled there is a plain `@triton.jit` kernel
# (or one under `@triton.heuristics` only), its own winner, decided at its first compile.
_TUNED: contextvars.ContextVar[frozenset[str] | None] = contextvars.ContextVar(
    "triton_invariance_tuned", default=None
)


@dataclass(frozen=True)
class VariantKeys:
    """How one compiled variant is filed: signature hash, config hash and their readable parts."""

    sig_hash: str
    cfg_hash: str
    config: Mapping[str, Any]
    specialization: Mapping[str, Any]
    legacy_sig_hash: str  # the name-keyed hash of earlier releases, to find their baselines


@dataclass(frozen=True)
class CompiledVariant:
    """What the hooks know about one compiled kernel variant."""

    kernel_name: str
    signature: Mapping[str, Any]  # argument name -> Triton type ("*fp16", "i32", "constexpr")
    constexprs: Mapping[str, Any]  # argument name (or name[i] inside tuples) -> value
    attrs: Mapping[str, str]  # argument name -> specialisation attributes ("tt.divisibility=16")
    options: Mapping[str, Any]  # the autotune-config options Triton compiled with
    invariance: InvarianceData
    asm_digest: str | None = None  # of the binary (or assembly), when Triton produced it
    kernel_hash: str = ""  # Triton's hash of the compiled kernel (`CompiledKernel.hash`)

    def keys(self, tuned: frozenset[str], options_chosen_by_caller: bool = False) -> VariantKeys:
        """File this variant for an autotuner whose configs set the constexprs in `tuned`.

        `options_chosen_by_caller`: no autotuner chose num_warps / num_stages / ..., the launch
        did, so they are a specialisation like the other launch-time constexprs (a plain kernel
        launched with two num_warps values gets two baselines, not one overwriting the other).
        """
        config = {k: v for k, v in self.constexprs.items() if k in tuned}
        specialization = {k: v for k, v in self.constexprs.items() if k not in tuned}
        specialization.update({f"{name}.attrs": attrs for name, attrs in self.attrs.items()})
        (specialization if options_chosen_by_caller else config).update(self.options)
        return VariantKeys(
            sig_hash=compute_signature_hash(self.signature, specialization),
            cfg_hash=compute_config_hash(config),
            config=config_mapping(config),
            specialization=config_mapping(specialization),
            legacy_sig_hash=legacy_signature_hash(self.signature, specialization),
        )


def describe_variant(
    src: Any, metadata: Mapping[str, Any], ttgir: str, asm_hash: str | None = None
) -> CompiledVariant:
    """Build the record of one compile from Triton's `ASTSource`, metadata and TTGIR text."""
    arg_names = list(src.fn.arg_names)

    def name(path: tuple[int, ...]) -> str:
        return str(arg_names[path[0]]) + "".join(f"[{i}]" for i in path[1:])

    constexprs = {name(path): value for path, value in src.constants.items()}
    # Triton specialises arguments on what it sees at the call (an int or a pointer divisible
    # by 16 gets `tt.divisibility`); each pattern compiles to a different kernel.
    attrs = {
        name(path): ",".join(f"{attr}={value}" for attr, value in found)
        for path, found in src.attrs.items()
        if found
    }
    options = {k: metadata[k] for k in CONFIG_OPTIONS if metadata.get(k) is not None}
    return CompiledVariant(
        kernel_name=src.name,
        signature=dict(src.signature),
        constexprs=constexprs,
        attrs=attrs,
        options=options,
        invariance=compute_invariance(ttgir, kernel_name=src.name, metadata=metadata),
        asm_digest=asm_hash,
        kernel_hash=str(metadata.get("hash", "")),
    )


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class _State:
    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.installed = False
        self.previous_listener: Any = None
        self.original_run: Any = None
        self.original_warmup: Any = None
        self.report: Reporter = _stderr
        # Triton's kernel hash (source, options, target) -> what the listener saw compile.
        self.variants: dict[str, CompiledVariant] = {}
        # Kernel hashes whose winner decision is done in this process.
        self.decided: set[str] = set()
        # Autotuner -> the constexpr names its configs set (computed once per autotuner).
        self.tuned: weakref.WeakKeyDictionary[Any, frozenset[str]] = weakref.WeakKeyDictionary()
        # Under TRITON_INVARIANCE_RECORD_SCALARS: the launch wrapper, each kernel hash's first
        # launch's float arguments, and the plain kernels whose decision waits for that launch.
        self.launches = contextlib.ExitStack()
        self.record_scalars = False
        self.scalars: dict[str, dict[int, tuple[str, str]]] = {}
        self.pending: dict[str, CompiledVariant] = {}


_state = _State()


def _cache(
    variant: CompiledVariant, tuned: frozenset[str], options_chosen_by_caller: bool = False
) -> VariantKeys:
    keys = variant.keys(tuned, options_chosen_by_caller)
    cache_invariance(variant.invariance, variant.kernel_name, keys.sig_hash, keys.cfg_hash)
    return keys


def ttgir_of_compile(metadata_group: Mapping[str, str], kernel: str) -> str:
    """The TTGIR text of a compile, from the `metadata_group` Triton hands its listener."""
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
    group = kwargs["metadata_group"]
    variant = describe_variant(src, metadata, ttgir_of_compile(group, src.name), asm_digest(group))
    kernel_hash = str(metadata["hash"])
    with _state.lock:
        _state.variants[kernel_hash] = variant
    tuned = _TUNED.get()
    if tuned is not None:
        _cache(variant, tuned)
        return
    if mode_from_env() == "off":
        _cache(variant, frozenset())
        return
    if _state.record_scalars:
        # Its launch arguments are known only once it launches: decide then (`_on_launch`).
        with _state.lock:
            _state.pending[kernel_hash] = variant
        return
    # Outside an autotuner the compiled kernel is the one that runs: commit / compare it now,
    # once per process, as the autotuner wrapper does for a winner.
    _decide(variant, kernel_hash, frozenset(), options_chosen_by_caller=True)


def _on_launch(kernel_hash: str, scalars: dict[int, tuple[str, str]]) -> None:
    """Keep each kernel's first launch's float arguments; decide a plain kernel waiting for it."""
    with _state.lock:
        _state.scalars.setdefault(kernel_hash, scalars)
        variant = _state.pending.pop(kernel_hash, None)
    if variant is not None:
        _decide(variant, kernel_hash, frozenset(), options_chosen_by_caller=True)


def _variant_of(kernel: Any) -> CompiledVariant:
    """The listener's record of a compiled kernel, or one made from the kernel itself (it was
    compiled before the hooks were installed)."""
    with _state.lock:
        variant = _state.variants.get(kernel.hash)
    if variant is not None:
        return variant
    if "ttgir" not in kernel.asm:
        raise FingerprintUnavailableError(
            f"kernel {kernel.name!r} carries no TTGIR (is TRITON_STORE_BINARY_ONLY set?)"
        )
    asm = next((kernel.asm[k] for k in CODE_KINDS if k in kernel.asm), None)
    variant = describe_variant(
        kernel.src,
        kernel.metadata._asdict(),
        kernel.asm["ttgir"],
        None if asm is None else asm_digest_of_text(asm),
    )
    with _state.lock:
        _state.variants[kernel.hash] = variant
    return variant


def _tuned_names(autotuner: Any) -> frozenset[str]:
    tuned = _state.tuned.get(autotuner)
    if tuned is None:
        tuned = frozenset(name for config in autotuner.configs for name in config.kwargs)
        _state.tuned[autotuner] = tuned
    return tuned


def winner_selected(
    kernel: Any,
    tuned: frozenset[str] = frozenset(),
    autotune_key: Mapping[str, Any] | None = None,
) -> WinnerOutcome | None:
    """Commit / compare the winner `kernel` (a `CompiledKernel`) once per process.

    `tuned` names the constexprs the autotuner's configs set; `autotune_key` (the values of its
    `key` arguments) files the winner per key, since each key may pick another config. Called
    by the `Autotuner.run` wrapper; exposed so a program that picks a winner by other means can
    apply the same rule.
    """
    kernel_hash = getattr(kernel, "hash", None)
    if kernel_hash is None or kernel_hash in _state.decided or mode_from_env() == "off":
        return None
    winner = _variant_of(kernel)
    # The cache was cleared after an earlier decision for this kernel (another autotune key),
    # while Triton's JIT cache kept the compiled variants, which then do not compile again. Every
    # variant of this kernel seen in this process is put back, so the winner and the
    # alternatives a mismatch report consults are all there.
    with _state.lock:
        siblings = [v for v in _state.variants.values() if v.kernel_name == winner.kernel_name]
    for sibling in siblings:
        _cache(sibling, tuned)
    return _decide(winner, kernel_hash, tuned, autotune_key=autotune_key)


def _decide(
    winner: CompiledVariant,
    kernel_hash: str,
    tuned: frozenset[str],
    options_chosen_by_caller: bool = False,
    autotune_key: Mapping[str, Any] | None = None,
) -> WinnerOutcome | None:
    """Commit / compare `winner` unless this process already decided its kernel hash."""
    if kernel_hash in _state.decided:
        return None
    mode = mode_from_env()
    if mode == "off":
        return None
    keys = _cache(winner, tuned, options_chosen_by_caller)
    key_sig_hash = None
    if autotune_key:
        per_key = {f"{name}.autotune_key": value for name, value in autotune_key.items()}
        key_sig_hash = compute_signature_hash(winner.signature, {**keys.specialization, **per_key})
    outcome = on_winner_selected(
        winner.kernel_name,
        keys.sig_hash,
        keys.cfg_hash,
        config=keys.config,
        specialization=keys.specialization,
        mode=mode,
        legacy_sig_hash=keys.legacy_sig_hash,
        recorded={"asm_digest": winner.asm_digest} if winner.asm_digest else None,
        autotune_key=autotune_key,
        key_sig_hash=key_sig_hash,
        launch_scalars=_state.scalars.get(kernel_hash) if _state.record_scalars else None,
    )
    with _state.lock:
        _state.decided.add(kernel_hash)
    if outcome is not None:
        _state.report(outcome.describe())
    return outcome


def autotune_key(
    autotuner: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any]
) -> dict[str, Any]:
    """The values of the autotuner's `key` arguments in one call (what its winner depends on).

    A tensor (Triton also keys on argument dtypes) is named by its dtype, never its address.
    """
    bound = dict(zip(autotuner.arg_names, args, strict=False))
    bound.update(kwargs)
    out: dict[str, Any] = {}
    for name in getattr(autotuner, "keys", ()):
        if name in bound:
            value = bound[name]
            plain = value is None or isinstance(value, bool | int | float | str)
            out[name] = value if plain else str(getattr(value, "dtype", type(value).__name__))
    return out


def _wrap_run(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        tuned = _tuned_names(self)
        token = _TUNED.set(tuned)
        try:
            ret = original(self, *args, **kwargs)
        finally:
            _TUNED.reset(token)
        if getattr(ret, "hash", None) not in _state.decided:
            winner_selected(ret, tuned, autotune_key(self, args, kwargs))
        return ret

    run.__triton_invariance_wrapper__ = True  # type: ignore[attr-defined]
    return run


def _wrap_warmup(original: Callable[..., Any]) -> Callable[..., Any]:
    """`Autotuner.warmup` compiles every config with no winner: none of them is a plain kernel
    to commit, so the listener must know an autotuner is compiling."""

    @functools.wraps(original)
    def warmup(self: Any, *args: Any, **kwargs: Any) -> Any:
        token = _TUNED.set(_tuned_names(self))
        try:
            return original(self, *args, **kwargs)
        finally:
            _TUNED.reset(token)

    return warmup


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
        _state.original_warmup = Autotuner.warmup
        Autotuner.warmup = _wrap_warmup(Autotuner.warmup)
        _state.record_scalars = record_scalars_from_env()
        if _state.record_scalars:
            from triton_invariance.scalars import on_launch

            _state.launches.enter_context(on_launch(_on_launch))
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
        Autotuner.warmup = _state.original_warmup
        _state.previous_listener = None
        _state.original_run = None
        _state.original_warmup = None
        _state.launches.close()
        _state.record_scalars = False
        _state.scalars.clear()
        _state.pending.clear()
        _state.variants.clear()
        _state.decided.clear()
        _state.report = _stderr
        _state.installed = False
        _invariance_cache.clear()


def is_installed() -> bool:
    """Whether `install` is in effect."""
    return _state.installed
