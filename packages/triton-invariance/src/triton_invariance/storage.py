"""Baseline files: `{base}/{kernel_name}_{sig_hash}.json` (phase 4 of the spec).

One file per kernel signature holds the autotuner winner's fingerprint in the spec's format plus
`format_version` and a readable `config`:

    {"format_version": 1, "kernel_name": "add_kernel", "signature_hash": "0f3a...",
     "config": {"BLOCK": 1024, "num_warps": 4, ...}, "specialization": {"EVEN": true},
     "invariance": {"fingerprint": "...", "computation_dag_hash": "...", "dtype_signature": "...",
                    "layout_hash": "...", "hw_config_hash": "...", "config_hash": "...", ...}}

Writes are atomic (`toolkit_core.atomic`: temp file, fsync, rename, fsync of the directory)
and serialised by a lock file in the directory, so several processes committing at once never
leave a torn or interleaved file. Reads reject a
missing, corrupt or foreign-version file with an error that names the file and the key.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from toolkit_core.atomic import write_text_atomic
from toolkit_core.errors import FileTooLargeError, MissingFileError, PathError
from toolkit_core.locks import LockBusyError, hold_lock
from toolkit_core.paths import read_regular_bytes
from triton_invariance.data import FORMAT_VERSION, InvalidInvarianceDataError, InvarianceData
from triton_invariance.errors import (
    BaselineError,
    BaselineNotFoundError,
    BaselineVersionError,
    CorruptBaselineError,
    InvarianceConfigError,
)

BASELINE_DIR_ENV = "TRITON_INVARIANCE_BASELINE_DIR"
DEFAULT_BASELINE_DIR = Path("baselines") / "numerical_invariance"
LOCK_NAME = ".triton-invariance.lock"
_LOCK_TIMEOUT_S = 60.0
# Kernel names are Python identifiers; anything else could escape the directory or clash.
# Matched with `fullmatch`: `$` alone would let a trailing newline through into file names
# and printed lines.
_SAFE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SAFE_HASH = re.compile(r"[0-9a-f]{8,64}")
# A real baseline is kilobytes to a few megabytes; a file (or a link to /dev/zero) beyond this
# is refused before it is read into memory.
MAX_BASELINE_BYTES = 64 << 20

CommitOutcome = Literal["created", "updated", "unchanged"]


@dataclass(frozen=True)
class Baseline:
    """The content of one baseline file."""

    kernel_name: str
    signature_hash: str
    config_hash: str
    invariance: InvarianceData
    config: Mapping[str, Any] = field(default_factory=dict)
    specialization: Mapping[str, Any] = field(default_factory=dict)
    # What was observed next to the fingerprint but is not part of it: `asm_digest` (the
    # backend assembly's hash), `launch_scalars`, `autotune_key`, `family` (the signature hash
    # the per-key files of one autotuned kernel share), `legacy_signature` (the name-keyed hash
    # an earlier release filed the variant under).
    recorded: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The JSON document written to disk."""
        doc = {
            "format_version": FORMAT_VERSION,
            "kernel_name": self.kernel_name,
            "signature_hash": self.signature_hash,
            "config": dict(self.config),
            "specialization": dict(self.specialization),
            "invariance": {**self.invariance.to_dict(), "config_hash": self.config_hash},
        }
        if self.recorded:
            doc["recorded"] = dict(self.recorded)
        return doc

    @classmethod
    def from_dict(cls, doc: object, path: Path) -> Baseline:
        """Parse a loaded JSON document; errors name `path` and the bad key."""
        if not isinstance(doc, dict):
            raise CorruptBaselineError(path, f"expected a JSON object, got {type(doc).__name__}")
        version = doc.get("format_version")
        if version is None:
            raise CorruptBaselineError(path, "format_version: missing")
        # bool is an int subclass and `true == 1`: a version of `true` is a corrupt file.
        if not isinstance(version, int) or isinstance(version, bool):
            raise CorruptBaselineError(
                path, f"format_version: expected an integer, got {type(version).__name__}"
            )
        if version != FORMAT_VERSION:
            why = ""
            if version == 1:
                # The one format this package ever wrote before: say why it cannot be compared.
                why = (
                    " (format 1 hashed the op sequence, this release hashes the data-flow graph, "
                    "so the fingerprints are not comparable)"
                )
            raise BaselineVersionError(
                path,
                f"format_version {version!r} is not supported (this triton-invariance reads "
                f"version {FORMAT_VERSION}){why}; re-commit it with TRITON_INVARIANCE_COMMIT=1",
            )
        kernel_name = _require_str(doc, "kernel_name", path)
        signature_hash = _require_str(doc, "signature_hash", path)
        # The two name the file: anything else could not have been committed by this package
        # (and a lone surrogate or a newline would break every line that prints it).
        if not _SAFE_NAME.fullmatch(kernel_name):
            raise CorruptBaselineError(
                path, f"kernel_name: expected a Python identifier, got {kernel_name[:80]!a}"
            )
        if not _SAFE_HASH.fullmatch(signature_hash):
            raise CorruptBaselineError(
                path,
                f"signature_hash: expected a lowercase hex digest, got {signature_hash[:80]!a}",
            )
        config = _optional_object(doc, "config", path)
        specialization = _optional_object(doc, "specialization", path)
        inv_doc = doc.get("invariance")
        if not isinstance(inv_doc, dict):
            raise CorruptBaselineError(path, "invariance: expected an object")
        config_hash = _require_str(inv_doc, "config_hash", path, where="invariance.")
        try:
            invariance = InvarianceData.from_dict(inv_doc)
        except InvalidInvarianceDataError as exc:
            raise CorruptBaselineError(path, str(exc)) from None
        if invariance.kernel_name != kernel_name:
            raise CorruptBaselineError(
                path,
                f"invariance.kernel_name {invariance.kernel_name!r} differs from "
                f"kernel_name {kernel_name!r}",
            )
        recorded = _optional_object(doc, "recorded", path)
        return cls(
            kernel_name, signature_hash, config_hash, invariance, config, specialization, recorded
        )


def _optional_object(doc: Mapping[str, Any], key: str, path: Path) -> dict[str, Any]:
    value = doc.get(key, {})
    if not isinstance(value, dict):
        raise CorruptBaselineError(path, f"{key}: expected an object, got {type(value).__name__}")
    return value


def _require_str(doc: Mapping[str, Any], key: str, path: Path, where: str = "") -> str:
    value = doc.get(key)
    if not isinstance(value, str):
        got = "missing" if key not in doc else f"got {type(value).__name__}"
        raise CorruptBaselineError(path, f"{where}{key}: expected a string, {got}")
    return value


def get_baselines_dir(base: str | os.PathLike[str] | None = None) -> Path:
    """Directory holding the baseline files.

    `base` wins, then the `TRITON_INVARIANCE_BASELINE_DIR` environment variable, then
    `./baselines/numerical_invariance` relative to the current directory.
    """
    if base is not None:
        return Path(base)
    from_env = os.environ.get(BASELINE_DIR_ENV, "").strip()
    return Path(from_env) if from_env else DEFAULT_BASELINE_DIR


def baseline_path(
    kernel_name: str, sig_hash: str, base: str | os.PathLike[str] | None = None
) -> Path:
    """`{base}/{kernel_name}_{sig_hash}.json`, after checking both parts are file-name safe."""
    if not _SAFE_NAME.fullmatch(kernel_name):
        raise InvarianceConfigError(
            f"kernel name {kernel_name!r} is not an identifier; cannot name a baseline file"
        )
    if not _SAFE_HASH.fullmatch(sig_hash):
        raise InvarianceConfigError(f"signature hash {sig_hash!r} is not a lowercase hex digest")
    return get_baselines_dir(base) / f"{kernel_name}_{sig_hash}.json"


def read_baseline_file(path: Path) -> Baseline:
    """Load and validate one baseline file (missing, corrupt and wrong-version are errors)."""
    try:
        text = _read_regular(path).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CorruptBaselineError(path, f"cannot read: {exc}") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CorruptBaselineError(
            path, f"not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from None
    except RecursionError:
        raise CorruptBaselineError(path, "JSON nested too deeply to be a baseline") from None
    except ValueError as exc:  # e.g. an integer over Python's 4,300-digit conversion limit
        raise CorruptBaselineError(path, f"not a usable JSON document ({exc})") from None
    return Baseline.from_dict(doc, path)


def _read_regular(path: Path) -> bytes:
    """The bytes of `path`, refusing a FIFO, a device (or a link to one) or an oversized file."""
    try:
        return read_regular_bytes(path, max_bytes=MAX_BASELINE_BYTES)
    except MissingFileError:
        raise BaselineNotFoundError(path, "no such baseline file") from None
    except FileTooLargeError as exc:
        raise CorruptBaselineError(
            path, f"{exc.size} bytes, more than a baseline's {MAX_BASELINE_BYTES}"
        ) from None
    except PathError as exc:
        raise CorruptBaselineError(path, exc.problem) from None


def load_baseline(
    kernel_name: str, sig_hash: str, base: str | os.PathLike[str] | None = None
) -> Baseline | None:
    """The committed baseline of one kernel signature, or None when none was committed."""
    path = baseline_path(kernel_name, sig_hash, base)
    if not path.exists():
        return None
    baseline = read_baseline_file(path)
    if (baseline.kernel_name, baseline.signature_hash) != (kernel_name, sig_hash):
        raise CorruptBaselineError(
            path,
            f"holds kernel {baseline.kernel_name!r} signature {baseline.signature_hash}, "
            f"not the {kernel_name!r} {sig_hash} its name says",
        )
    return baseline


def list_baselines(base: str | os.PathLike[str] | None = None) -> list[Path]:
    """Every `*.json` file in the baseline directory, sorted by name."""
    directory = get_baselines_dir(base)
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.glob("*.json") if p.is_file())


def usable_baselines(paths: list[Path]) -> list[Baseline]:
    """The baselines among `paths` that read cleanly; an unusable file is skipped here (it is
    reported where it is compared, not where it is only a candidate)."""
    out = []
    for path in paths:
        try:
            out.append(read_baseline_file(path))
        except BaselineError:
            continue
    return out


def commit_invariance(
    kernel_name: str,
    sig_hash: str,
    inv: InvarianceData,
    *,
    config_hash: str,
    config: Mapping[str, Any] | None = None,
    specialization: Mapping[str, Any] | None = None,
    base: str | os.PathLike[str] | None = None,
    recorded: Mapping[str, Any] | None = None,
) -> CommitOutcome:
    """Write the winner's fingerprint as the baseline of `kernel_name`/`sig_hash`.

    `recorded` (unhashed observations: assembly digest, launch scalars, autotune key) is stored
    next to the fingerprint for the reports.

    Returns "created", "updated" (an earlier, different baseline was replaced) or "unchanged"
    (the same fingerprint and config are already committed; the file is left untouched).
    """
    path = baseline_path(kernel_name, sig_hash, base)
    new = Baseline(
        kernel_name,
        sig_hash,
        config_hash,
        inv,
        dict(config or {}),
        dict(specialization or {}),
        dict(recorded or {}),
    )
    text = _text(new)
    with _baselines_locked(path.parent):
        outcome: CommitOutcome = "created"
        if path.exists():
            try:  # never blocks on a FIFO planted under the baseline's name
                old_text: str | None = _read_regular(path).decode("utf-8")
            except (OSError, UnicodeDecodeError, BaselineError):
                old_text = None
            if old_text == text:
                return "unchanged"
            outcome = "updated"
        write_text_atomic(path, text, overwrite=True)
    return outcome


@contextmanager
def _baselines_locked(directory: Path) -> Iterator[None]:
    """Create `directory` and hold its lock while the body writes baselines into it.

    A lock held too long, or a directory this user cannot write, is a `BaselineError` naming
    the directory: a read-only or foreign baselines directory is a setup problem, not a crash.
    """
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with hold_lock(directory / LOCK_NAME, timeout_s=_LOCK_TIMEOUT_S):
            yield
    except LockBusyError:
        raise BaselineError(
            directory, f"another process held the baselines lock for {_LOCK_TIMEOUT_S:.0f} s"
        ) from None
    except OSError as exc:
        raise BaselineError(
            directory, f"cannot write baselines here ({exc.strerror or exc})"
        ) from None


def _text(baseline: Baseline) -> str:
    return json.dumps(baseline.to_dict(), indent=2, allow_nan=False) + "\n"


def write_new_baseline(baseline: Baseline, base: str | os.PathLike[str] | None = None) -> bool:
    """Write `baseline` under its own key unless a file is already there (atomically, under the
    directory lock); False when one was, which is left untouched (it is newer than a re-keyed
    old baseline)."""
    path = baseline_path(baseline.kernel_name, baseline.signature_hash, base)
    with _baselines_locked(path.parent):
        if path.exists() or path.is_symlink():
            return False
        write_text_atomic(path, _text(baseline), overwrite=True)
    return True


# Why a baseline may sit under another key than the one a compile files it under now.
BY_NAMES = "filed by argument names (before this release)"
KEYLESS = "one baseline for every autotune key (before per-key baselines)"


def fallback_keys(family: str | None, legacy: str | None) -> list[tuple[str, str]]:
    """The older keys a baseline may be filed under, most specific first: the signature's
    single baseline of releases before per-autotune-key baselines (`family`), then the
    argument-name-keyed hash of releases before position keys (`legacy`)."""
    keys = [] if family is None else [(family, KEYLESS)]
    if legacy is not None:
        keys.append((legacy, BY_NAMES))
    return keys


def recorded_fallbacks(current: Baseline) -> list[tuple[str, str]]:
    """`fallback_keys` for a file a COMMIT run wrote, from what it recorded (`family`,
    `legacy_signature`); a value that is not a hex digest is ignored."""

    def digest(key: str) -> str | None:
        value = current.recorded.get(key)
        return value if isinstance(value, str) and _SAFE_HASH.fullmatch(value) else None

    return fallback_keys(digest("family"), digest("legacy_signature"))


@dataclass(frozen=True)
class FoundBaseline:
    """A baseline and the file it came from; `note` says how to re-key one read from an older
    key (None when it sits under the current key)."""

    baseline: Baseline
    path: Path
    note: str | None = None
    why: str | None = None  # why it sits under an older key (None: the current key)


def find_baseline(
    kernel_name: str,
    sig_hash: str,
    fallbacks: Sequence[tuple[str, str]] = (),
    base: str | os.PathLike[str] | None = None,
) -> FoundBaseline | None:
    """The baseline of `kernel_name`/`sig_hash`, else the first of `fallbacks` (older key, why it
    was filed there; see `fallback_keys`) that has one, else None.

    The one lookup the hooks, the pytest gate, `check` and `rekey` share, so they never disagree
    on which file a compile is compared with.
    """
    found = load_baseline(kernel_name, sig_hash, base)
    if found is not None:
        return FoundBaseline(found, baseline_path(kernel_name, sig_hash, base))
    for old_hash, why in fallbacks:
        if old_hash == sig_hash:
            continue
        found = load_baseline(kernel_name, old_hash, base)
        if found is not None:
            old = baseline_path(kernel_name, old_hash, base)
            new = baseline_path(kernel_name, sig_hash, base)
            note = (
                f"baseline read from {old.name}, {why}; re-key it: `triton-invariance rekey "
                f"CURRENT --write` (CURRENT: a TRITON_INVARIANCE_COMMIT run's directory), or "
                f"commit once with TRITON_INVARIANCE_COMMIT=1 (writes {new.name}) and delete {old}"
            )
            return FoundBaseline(found, old, note, why)
    return None


def family_baselines(
    kernel_name: str, family: str, base: str | os.PathLike[str] | None = None
) -> list[Baseline]:
    """The per-autotune-key baselines of one kernel signature (`recorded.family == family`)."""
    paths = [p for p in list_baselines(base) if p.stem.rsplit("_", 1)[0] == kernel_name]
    return [b for b in usable_baselines(paths) if b.recorded.get("family") == family]
