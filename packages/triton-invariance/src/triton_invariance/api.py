"""Integration API (phase 5 of the spec): hashing, caching and the winner decision.

`cache_invariance` fingerprints one compiled variant into the process-wide cache;
`on_winner_selected` commits or compares the autotuner winner's fingerprint according to
`TRITON_INVARIANCE_COMMIT` / `TRITON_INVARIANCE_COMPARE` and then clears the kernel's entries.
Signature and config hashes are blake2b digests of canonical JSON, so they are the same in every
process, under every PYTHONHASHSEED, on every machine.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from triton_invariance.cache import InvarianceCache, _invariance_cache
from triton_invariance.compare import compare_and_report
from triton_invariance.data import InvarianceData
from triton_invariance.errors import InvarianceConfigError, TritonInvarianceError
from triton_invariance.storage import (
    CommitOutcome,
    baseline_path,
    commit_invariance,
    fallback_keys,
    family_baselines,
)

COMMIT_ENV = "TRITON_INVARIANCE_COMMIT"
COMPARE_ENV = "TRITON_INVARIANCE_COMPARE"
RECORD_SCALARS_ENV = "TRITON_INVARIANCE_RECORD_SCALARS"
_ON = frozenset({"1", "true", "yes", "on"})
_OFF = frozenset({"", "0", "false", "no", "off"})
# The per-config options Triton's `Config.all_kwargs()` adds next to the tuned constexprs.
CONFIG_OPTIONS = ("num_warps", "num_ctas", "num_stages", "maxnreg", "ir_override")

Mode = Literal["off", "commit", "compare"]


def _flag(environ: Mapping[str, str], name: str) -> bool:
    raw = environ.get(name, "")
    value = raw.strip().lower()
    if value in _ON:
        return True
    if value in _OFF:
        return False
    raise InvarianceConfigError(f"{name}={raw!r}: expected 1/true/yes/on or 0/false/no/off")


def mode_from_env(environ: Mapping[str, str] | None = None) -> Mode:
    """ "commit", "compare" or "off" from the two environment variables; both set is an error."""
    env = os.environ if environ is None else environ
    commit, compare = _flag(env, COMMIT_ENV), _flag(env, COMPARE_ENV)
    if commit and compare:
        raise InvarianceConfigError(
            f"{COMMIT_ENV} and {COMPARE_ENV} are both set; set one: commit writes baselines, "
            f"compare checks against them"
        )
    return "commit" if commit else "compare" if compare else "off"


def record_scalars_from_env(environ: Mapping[str, str] | None = None) -> bool:
    """Whether `TRITON_INVARIANCE_RECORD_SCALARS` asks to record / compare launch scalars."""
    return _flag(os.environ if environ is None else environ, RECORD_SCALARS_ENV)


def _canonical(value: Any) -> Any:
    """A JSON-ready, process-independent stand-in for a constexpr or option value."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return repr(value)  # keeps nan/inf and -0.0 distinct without breaking strict JSON
    if isinstance(value, list | tuple):
        return [_canonical(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _canonical(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    # tl.dtype, JITFunction and friends: their str() names them; a default object repr would
    # embed an address and differ per process, so it is refused instead of silently hashed.
    text = f"{type(value).__module__}.{type(value).__qualname__}:{value}"
    if " at 0x" in text:
        raise InvarianceConfigError(
            f"cannot hash {text}: its text form contains a memory address, which differs "
            f"between processes"
        )
    return text


def _digest(doc: Any) -> str:
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.blake2b(text.encode("utf-8"), digest_size=8).hexdigest()


def compute_signature_hash(
    params: Mapping[str, Any] | Iterable[Any], specialization: Mapping[str, Any] | None = None
) -> str:
    """Hash of a kernel's argument *types* by position (never names, shapes or tensor values).

    Accepts Triton's signature mapping (argument name -> type string such as "*fp16", "i32",
    "constexpr"), or a sequence of names / objects with a `.name` (e.g. `JITFunction.params`),
    of which only the count is hashed. `specialization` (constexpr values no autotune config
    sets, e.g. from `@triton.heuristics`, and Triton's `name.attrs` specialisation attributes)
    is hashed too when given, since each value compiles to a different kernel.

    Argument names are replaced by their positions (`x_ptr.attrs` -> `#0.attrs`, `t[1]` ->
    `#2[1]`): renaming an argument cannot change what a kernel computes, so it must not move
    its baseline. `legacy_signature_hash` is the name-keyed hash earlier releases filed under.
    """
    if isinstance(params, Mapping):
        names = [str(k) for k in params]
        doc: list[Any] = ["signature-by-position", [_canonical(v) for v in params.values()]]
    else:
        names = [str(getattr(p, "name", p)) for p in params]
        doc = ["signature-by-position", len(names)]
    if specialization:
        position = {name: f"#{i}" for i, name in enumerate(names)}
        doc.append(["specialization", config_mapping(_by_position(specialization, position))])
    return _digest(doc)


def _by_position(mapping: Mapping[str, Any], position: Mapping[str, str]) -> dict[str, Any]:
    """`mapping` with each key's leading argument name (`x`, `x.attrs`, `x[1]`) as `#index`."""
    out: dict[str, Any] = {}
    for key, value in mapping.items():
        head = re.match(r"[^.\[]*", key)
        name = head.group(0) if head else key
        out[position.get(name, name) + key[len(name) :]] = value
    return out


def legacy_signature_hash(
    params: Mapping[str, Any], specialization: Mapping[str, Any] | None = None
) -> str:
    """The name-keyed signature hash of releases before argument renames kept the key.

    Only used to find a baseline committed by such a release (read with a note to re-key).
    """
    doc: list[Any] = ["signature", [[str(k), _canonical(v)] for k, v in params.items()]]
    if specialization:
        doc.append(["specialization", config_mapping(specialization)])
    return _digest(doc)


def config_mapping(config: Any) -> dict[str, Any]:
    """The canonical readable form of an autotune config (or of a mapping of its settings).

    A `triton.Config` gives its tuned kwargs plus num_warps / num_ctas / num_stages / maxnreg /
    ir_override; None values are dropped, keys sorted.
    """
    if isinstance(config, Mapping):
        raw = dict(config)
    elif hasattr(config, "all_kwargs"):
        raw = dict(config.all_kwargs())
    else:
        raise InvarianceConfigError(
            f"cannot hash a config of type {type(config).__name__}: expected a triton.Config "
            f"or a mapping"
        )
    return {str(k): _canonical(v) for k, v in sorted(raw.items()) if v is not None}


def compute_config_hash(config: Any) -> str:
    """Hash of an autotune config: tuned constexprs plus launch options (see `config_mapping`)."""
    return _digest(["config", config_mapping(config)])


def cache_invariance(
    source: str | InvarianceData,
    kernel_name: str,
    sig_hash: str,
    cfg_hash: str,
    *,
    cache: InvarianceCache = _invariance_cache,
) -> InvarianceData:
    """Fingerprint one compiled variant (its TTGIR text, or a ready `InvarianceData`) and cache it.

    Errors while fingerprinting propagate (spec: raise on compute failures).
    """
    if isinstance(source, InvarianceData):
        inv = source
    else:
        from triton_invariance.fingerprint import compute_invariance

        inv = compute_invariance(source, kernel_name=kernel_name)
    cache.put(kernel_name, sig_hash, cfg_hash, inv)
    return inv


@dataclass(frozen=True)
class WinnerOutcome:
    """What `on_winner_selected` did: the mode, and "created" / "updated" / "unchanged" for a
    commit, "match" for a compare (with `notes` on what the compare could not check or why it
    matched), or "new" for an autotune key whose signature has baselines for other keys only."""

    kernel_name: str
    sig_hash: str
    cfg_hash: str
    mode: Mode
    outcome: CommitOutcome | Literal["match", "new"]
    fingerprint: str
    path: os.PathLike[str]
    notes: tuple[str, ...] = ()

    def describe(self) -> str:
        """One line for a log (a note, if any, follows in parentheses)."""
        verb = "committed" if self.mode == "commit" else "compared"
        line = (
            f"triton-invariance: {verb} {self.kernel_name} (signature {self.sig_hash}, config "
            f"{self.cfg_hash}): {self.outcome}, fingerprint {self.fingerprint[:16]} [{self.path}]"
        )
        return line + "".join(f" ({note})" for note in self.notes)


def on_winner_selected(
    kernel_name: str,
    sig_hash: str,
    winning_cfg_hash: str,
    *,
    config: Mapping[str, Any] | None = None,
    specialization: Mapping[str, Any] | None = None,
    mode: Mode | None = None,
    base: str | os.PathLike[str] | None = None,
    cache: InvarianceCache = _invariance_cache,
    legacy_sig_hash: str | None = None,
    recorded: Mapping[str, Any] | None = None,
    autotune_key: Mapping[str, Any] | None = None,
    key_sig_hash: str | None = None,
    launch_scalars: Mapping[int, tuple[str, str]] | None = None,
) -> WinnerOutcome | None:
    """Commit or compare the winner's cached fingerprint, then clear the kernel's cache entries.

    `config` and `specialization` (readable mappings) are stored in the baseline for people.
    `mode` defaults to the environment (`mode_from_env`); "off" only clears. A compare falls back
    to a baseline filed under `legacy_sig_hash` (an earlier release's name-keyed hash).
    `recorded` (unhashed observations such as `asm_digest`) is committed next to the fingerprint
    and, for a compare, tells an option change with identical compiled code from a change.
    `key_sig_hash` files the winner per autotune key (`autotune_key`, the values of the
    autotuner's `key` arguments) instead of per signature; a compare of a key that has no
    baseline while other keys of the signature do is outcome "new", not an error.
    `launch_scalars` (the float arguments of the winner's launch, by position) is committed with
    the baseline, or compared with the committed ones (`LaunchScalarsChangedError`). Raises
    `NumericalInvarianceMismatchError` on a mismatch, `BaselineNotFoundError` when comparing
    without a baseline, and `TritonInvarianceError` when the winner was never fingerprinted.
    """
    active = mode_from_env() if mode is None else mode
    try:
        if active == "off":
            return None
        variants = cache.configs(kernel_name, sig_hash)
        inv = variants.get(winning_cfg_hash)
        if inv is None:
            raise TritonInvarianceError(
                f"no fingerprint cached for the winner of {kernel_name!r} (signature {sig_hash}, "
                f"config {winning_cfg_hash}); the compile hook did not see it compile "
                f"(install the hooks before the kernel compiles)"
            )
        file_sig = key_sig_hash or sig_hash
        path = baseline_path(kernel_name, file_sig, base)
        notes: list[str] = []
        outcome: CommitOutcome | Literal["match", "new"]
        if key_sig_hash is not None:
            recorded = {**(recorded or {}), "autotune_key": dict(autotune_key or {})}
            recorded["family"] = sig_hash
        seen_scalars = None
        if launch_scalars is not None:
            from triton_invariance.scalars import one_launch, to_record

            seen_scalars = one_launch(dict(launch_scalars))
            recorded = {**(recorded or {}), "launch_scalars": to_record(seen_scalars)}
        if legacy_sig_hash is not None and legacy_sig_hash != sig_hash:
            # Where an earlier release filed it: `check` and `rekey` look there too.
            recorded = {**(recorded or {}), "legacy_signature": legacy_sig_hash}
        if active == "compare" and key_sig_hash is not None and not Path(path).exists():
            others = family_baselines(kernel_name, sig_hash, base)
            if others:
                shown = ", ".join(f"{k}={v}" for k, v in (autotune_key or {}).items())
                notes.append(
                    f"new autotune key ({shown}): no baseline for it yet, {len(others)} other "
                    f"key(s) of this signature committed; commit to add it"
                )
                return WinnerOutcome(
                    kernel_name,
                    file_sig,
                    winning_cfg_hash,
                    active,
                    "new",
                    inv.fingerprint,
                    path,
                    tuple(notes),
                )
        if active == "commit":
            outcome = commit_invariance(
                kernel_name,
                file_sig,
                inv,
                config_hash=winning_cfg_hash,
                config=config,
                specialization=specialization,
                base=base,
                recorded=recorded,
            )
        else:
            fallbacks = fallback_keys(None if key_sig_hash is None else sig_hash, legacy_sig_hash)
            compare_and_report(
                kernel_name,
                file_sig,
                inv,
                config_hash=winning_cfg_hash,
                alternatives=variants,
                base=base,
                notes=notes,
                fallbacks=fallbacks,
                config=config,
                specialization=specialization,
                asm_digest=(recorded or {}).get("asm_digest"),
                launch_scalars=seen_scalars,
            )
            outcome = "match"
        return WinnerOutcome(
            kernel_name,
            file_sig,
            winning_cfg_hash,
            active,
            outcome,
            inv.fingerprint,
            path,
            tuple(notes),
        )
    finally:
        # Spec: the cache is cleared after the autotuner finishes each kernel, match or not.
        cache.clear_kernel(kernel_name, sig_hash)
