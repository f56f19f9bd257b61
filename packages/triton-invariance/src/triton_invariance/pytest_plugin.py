"""pytest plugin: a CI gate over the Triton kernels a test session compiles.

    pytest --triton-invariance=commit [--triton-invariance-dir DIR]   # write the baselines
    pytest --triton-invariance=compare [--triton-invariance-dir DIR]  # fail on any change

Registered through the `pytest11` entry point and off unless `--triton-invariance` is given:
without it the plugin adds two options and imports nothing else (no Triton).

With it, every kernel variant the session compiles (or loads from Triton's on-disk cache) is
fingerprinted through `triton.knobs.compilation.listener` -- the TTGIR and the compile options,
as the hooks do -- and filed as ``{kernel}_{variant}.json`` in DIR (default
`$TRITON_INVARIANCE_BASELINE_DIR` or ``./baselines/numerical_invariance``), where the variant hash
covers the argument types, the specialisation and the launch options. Unlike the hooks, this
covers plain `@triton.jit` kernels and every autotune config, not only the winners.

`commit` writes the files at the end of the session. `compare` checks each compiled variant
against its file and, on a mismatch or a missing file, prints the diff reports in the terminal
summary and fails the session (exit 1) even when every test passed: one block per changed
kernel (not one per autotune config), and a missing variant diffed against the nearest baseline
of its kernel. Committed files the session did not compile are summed up in one line and do not
fail (the session may have run a subset of the tests); `triton-invariance check --strict` is the
strict gate for that. `--triton-invariance-record-scalars` adds the float launch arguments to
what is committed and compared.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from triton_invariance.hooks import CompiledVariant

MODES = ("compare", "commit")
_KEY = pytest.StashKey["_Gate"]()


def pytest_addoption(parser: pytest.Parser) -> None:
    """`--triton-invariance=compare|commit` and `--triton-invariance-dir`."""
    group = parser.getgroup("triton-invariance", "numerical invariance of Triton kernels")
    group.addoption(
        "--triton-invariance",
        choices=MODES,
        default=None,
        help="Fingerprint every Triton kernel the session compiles and commit them as "
        "baselines, or compare them with the baselines (a change fails the session).",
    )
    group.addoption(
        "--triton-invariance-record-scalars",
        action="store_true",
        default=False,
        help="Also record the float scalar arguments each kernel variant is launched with "
        "(commit) and fail when they changed (compare): runtime values are not part of the "
        "compiled kernel, so the fingerprint cannot see them.",
    )
    group.addoption(
        "--triton-invariance-dir",
        default=None,
        metavar="DIR",
        help="Baseline directory [default: $TRITON_INVARIANCE_BASELINE_DIR or "
        "./baselines/numerical_invariance].",
    )


@dataclass
class _Seen:
    """One compiled kernel variant, as the gate files it."""

    kernel: str
    digest: str  # the variant hash: argument types by position, specialisation, options
    invariance: Any
    config: dict[str, Any]
    specialization: dict[str, Any]
    legacy_digest: str  # what earlier releases filed it under (argument names were part of it)
    asm_digest: str | None
    # argument position -> (name, float values it was launched with), under --record-scalars
    scalars: dict[int, tuple[str, set[str]]] = field(default_factory=dict)

    @property
    def stem(self) -> str:
        return f"{self.kernel}_{self.digest}"


@dataclass
class _Gate:
    mode: str
    directory: Path
    record_scalars: bool = False
    listening: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)
    seen: dict[str, _Seen] = field(default_factory=dict)  # file stem -> variant
    by_hash: dict[str, str] = field(default_factory=dict)  # Triton's kernel hash -> file stem
    lock: threading.Lock = field(default_factory=threading.Lock)
    report: list[str] = field(default_factory=list)
    failed: bool = False

    def record(self, variant: CompiledVariant) -> None:
        keys = variant.keys(frozenset())
        entry = _Seen(
            variant.kernel_name,
            _variant_digest(keys.sig_hash, keys.cfg_hash),
            variant.invariance,
            dict(keys.config),
            dict(keys.specialization),
            _variant_digest(keys.legacy_sig_hash, keys.cfg_hash),
            variant.asm_digest,
        )
        with self.lock:
            self.seen.setdefault(entry.stem, entry)
            self.by_hash[variant.kernel_hash] = entry.stem

    def launched(self, kernel_hash: str, scalars: dict[int, tuple[str, str]]) -> None:
        with self.lock:
            entry = self.seen.get(self.by_hash.get(kernel_hash, ""))
            if entry is None:  # compiled before the session: not a variant the gate knows
                return
            for pos, (name, value) in scalars.items():
                entry.scalars.setdefault(pos, (name, set()))[1].add(value)


def _variant_digest(sig_hash: str, cfg_hash: str) -> str:
    return hashlib.blake2b(f"{sig_hash}:{cfg_hash}".encode("ascii"), digest_size=8).hexdigest()


def pytest_configure(config: pytest.Config) -> None:
    """Start listening to Triton's compiles when the gate is asked for."""
    mode = config.getoption("--triton-invariance")
    if mode is None:
        return
    from triton_invariance.record import on_compile
    from triton_invariance.storage import get_baselines_dir

    directory = get_baselines_dir(config.getoption("--triton-invariance-dir"))
    gate = _Gate(mode, directory, config.getoption("--triton-invariance-record-scalars"))
    gate.listening.enter_context(on_compile(gate.record))
    if gate.record_scalars:
        from triton_invariance.scalars import on_launch

        gate.listening.enter_context(on_launch(gate.launched))
    config.stash[_KEY] = gate


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Commit or compare what the session compiled; a compare failure fails the session."""
    gate = session.config.stash.get(_KEY, None)
    if gate is None:
        return
    gate.listening.close()
    if gate.mode == "commit":
        _commit(gate)
    else:
        _compare(gate)
    if gate.failed and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """The gate's verdict and, on a mismatch, every diff report."""
    gate = config.stash.get(_KEY, None)
    if gate is None:
        return
    terminalreporter.section("triton-invariance", red=gate.failed, green=not gate.failed)
    for line in gate.report:
        terminalreporter.write_line(line)


def pytest_unconfigure(config: pytest.Config) -> None:
    """Put Triton's listener back even when the session never finished."""
    gate = config.stash.get(_KEY, None)
    if gate is not None:
        gate.listening.close()


def _commit(gate: _Gate) -> None:
    from triton_invariance.errors import TritonInvarianceError
    from triton_invariance.scalars import to_record
    from triton_invariance.storage import commit_invariance

    counts: dict[str, int] = {}
    for stem, seen in sorted(gate.seen.items()):
        recorded: dict[str, Any] = {}
        if seen.asm_digest is not None:
            recorded["asm_digest"] = seen.asm_digest
        if seen.legacy_digest != seen.digest:  # lets `triton-invariance rekey` find old files
            recorded["legacy_signature"] = seen.legacy_digest
        if gate.record_scalars:
            recorded["launch_scalars"] = to_record(seen.scalars)
        try:
            outcome = commit_invariance(
                seen.kernel,
                seen.digest,
                seen.invariance,
                config_hash=seen.digest,
                config=seen.config,
                specialization=seen.specialization,
                base=gate.directory,
                recorded=recorded,
            )
        except TritonInvarianceError as exc:
            gate.failed = True
            gate.report.append(f"ERROR {stem}: {exc}")
            continue
        counts[outcome] = counts.get(outcome, 0) + 1
    summary = ", ".join(f"{n} {what}" for what, n in sorted(counts.items())) or "nothing"
    gate.report.append(
        f"committed {len(gate.seen)} kernel variant(s) to {gate.directory}: {summary}"
    )


def _baseline_of(gate: _Gate, seen: _Seen, used: set[str]) -> Any:
    """The committed baseline of a variant (under its name-keyed stem of earlier releases too)."""
    from triton_invariance.storage import fallback_keys, find_baseline

    used.add(seen.stem)
    found = find_baseline(
        seen.kernel, seen.digest, fallback_keys(None, seen.legacy_digest), gate.directory
    )
    if found is None:
        return None
    used.add(found.path.stem)
    if found.note is not None:
        gate.report.append(f"note {seen.stem}: {found.note}")
    return found.baseline


def _compare(gate: _Gate) -> None:
    from triton_invariance.errors import TritonInvarianceError
    from triton_invariance.storage import list_baselines
    from triton_invariance.verdict import identical_code_note

    matched = 0
    used: set[str] = set()  # file stems a compiled variant was compared with
    missing: list[str] = []
    # kernel name -> [(stem, baseline, current)]: one report block per kernel, so one edit to
    # an autotuned kernel reads as one change, not one per config.
    mismatched: dict[str, list[tuple[str, Any, Any]]] = {}
    for stem, seen in sorted(gate.seen.items()):
        try:
            baseline = _baseline_of(gate, seen, used)
        except TritonInvarianceError as exc:
            gate.failed = True
            gate.report.append(f"ERROR {stem}: {exc}")
            continue
        if baseline is None:
            gate.failed = True
            missing.append(stem)
            continue
        _check_scalars(gate, seen, baseline)
        inv = seen.invariance
        same_code = identical_code_note(
            baseline.invariance, baseline.recorded.get("asm_digest"), inv, seen.asm_digest
        )
        if baseline.invariance.matches(inv) or same_code is not None:
            matched += 1
            notes = baseline.invariance.comparison_notes(inv) + ([same_code] if same_code else [])
            gate.report.extend(f"note {stem}: {n}" for n in notes)
            continue
        gate.failed = True
        mismatched.setdefault(seen.kernel, []).append((stem, baseline, inv))
    _report_mismatches(gate, mismatched)
    unused = [p for p in list_baselines(gate.directory) if p.stem not in used]
    _report_missing(gate, missing, unused, used)
    unseen = sorted(p.stem for p in unused if p.stem not in used)
    if unseen:
        kernels = sorted({s.rsplit("_", 1)[0] for s in unseen})
        gate.report.append(
            f"not compiled in this session: {len(unseen)} baseline(s) of {len(kernels)} "
            f"kernel(s) ({', '.join(kernels)}); a run over a subset of the tests leaves these "
            f"out, `triton-invariance check --strict` is the gate for them"
        )
    verdict = "FAILED" if gate.failed else "passed"
    gate.report.append(
        f"triton-invariance compare {verdict}: {matched}/{len(gate.seen)} kernel variant(s) "
        f"match {gate.directory}"
    )


def _check_scalars(gate: _Gate, seen: _Seen, baseline: Any) -> None:
    """Under --record-scalars, a changed float launch argument fails the session."""
    recorded = baseline.recorded.get("launch_scalars")
    if not gate.record_scalars or not isinstance(recorded, dict):
        return
    from triton_invariance.scalars import scalar_changes

    changes = scalar_changes(recorded, seen.scalars)
    if changes:
        gate.failed = True
        gate.report.append(
            f"SCALARS {seen.stem}: launched with other float arguments than at commit "
            f"(not part of the compiled kernel): {'; '.join(changes)}"
        )


def _report_missing(gate: _Gate, missing: list[str], unused: list[Path], used: set[str]) -> None:
    """Each missing variant, diffed against the nearest unused baseline of its kernel."""
    from triton_invariance.nearest import nearest_baseline
    from triton_invariance.storage import usable_baselines

    candidates = usable_baselines(unused) if missing else []
    for stem in missing:
        seen = gate.seen[stem]
        gate.report.append(f"MISSING {stem}: no baseline in {gate.directory}")
        near = nearest_baseline(seen.invariance, seen.config, seen.specialization, candidates)
        if near is not None:
            used.add(f"{near.baseline.kernel_name}_{near.baseline.signature_hash}")
            gate.report.append("  " + near.describe())
            gate.report.append(near.baseline.invariance.diff_report(seen.invariance))


def _report_mismatches(gate: _Gate, mismatched: dict[str, list[tuple[str, Any, Any]]]) -> None:
    """One block per kernel: the first variant's diff, then only what differs in the others."""
    for kernel, entries in mismatched.items():
        stem, baseline, inv = entries[0]
        others = ", ".join(s for s, _, _ in entries[1:])
        more = f" (and {len(entries) - 1} more variant(s) of {kernel}: {others})" if others else ""
        gate.report.append(f"MISMATCH {stem}{more}")
        gate.report.append(baseline.invariance.diff_report(inv))
        first = baseline.invariance.changed_components(inv)
        for other_stem, other_base, other_inv in entries[1:]:
            changed = other_base.invariance.changed_components(other_inv)
            if changed != first:
                gate.report.append(f"  {other_stem} changed: {', '.join(changed)}")
