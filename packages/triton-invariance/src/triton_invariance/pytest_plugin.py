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
summary and fails the session (exit 1) even when every test passed. A committed file whose
variant the session did not compile is listed but does not fail (the session may have run a
subset of the tests); `triton-invariance check --strict` is the strict gate for that.
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
        "--triton-invariance-dir",
        default=None,
        metavar="DIR",
        help="Baseline directory [default: $TRITON_INVARIANCE_BASELINE_DIR or "
        "./baselines/numerical_invariance].",
    )


@dataclass
class _Gate:
    mode: str
    directory: Path
    listening: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)
    # file stem -> (kernel name, variant hash, fingerprint data, readable config, specialisation,
    # the variant hash earlier releases filed it under: argument names were part of it)
    seen: dict[str, tuple[str, str, Any, dict[str, Any], dict[str, Any], str]] = field(
        default_factory=dict
    )
    lock: threading.Lock = field(default_factory=threading.Lock)
    report: list[str] = field(default_factory=list)
    failed: bool = False

    def record(self, variant: CompiledVariant) -> None:
        keys = variant.keys(frozenset())
        entry = (
            variant.kernel_name,
            _variant_digest(keys.sig_hash, keys.cfg_hash),
            variant.invariance,
            dict(keys.config),
            dict(keys.specialization),
            _variant_digest(keys.legacy_sig_hash, keys.cfg_hash),
        )
        with self.lock:
            self.seen[f"{variant.kernel_name}_{entry[1]}"] = entry


def _variant_digest(sig_hash: str, cfg_hash: str) -> str:
    return hashlib.blake2b(f"{sig_hash}:{cfg_hash}".encode("ascii"), digest_size=8).hexdigest()


def pytest_configure(config: pytest.Config) -> None:
    """Start listening to Triton's compiles when the gate is asked for."""
    mode = config.getoption("--triton-invariance")
    if mode is None:
        return
    from triton_invariance.record import on_compile
    from triton_invariance.storage import get_baselines_dir

    gate = _Gate(mode, get_baselines_dir(config.getoption("--triton-invariance-dir")))
    gate.listening.enter_context(on_compile(gate.record))
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
    from triton_invariance.storage import commit_invariance

    counts: dict[str, int] = {}
    for stem, (kernel, digest, inv, config, specialization, _legacy) in sorted(gate.seen.items()):
        try:
            outcome = commit_invariance(
                kernel,
                digest,
                inv,
                config_hash=digest,
                config=config,
                specialization=specialization,
                base=gate.directory,
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


def _compare(gate: _Gate) -> None:
    from triton_invariance.errors import TritonInvarianceError
    from triton_invariance.nearest import nearest_baseline
    from triton_invariance.storage import (
        Baseline,
        list_baselines,
        load_baseline,
        usable_baselines,
    )

    matched = 0
    used: set[str] = set()  # file stems a compiled variant was compared with
    missing: list[str] = []
    # kernel name -> [(stem, baseline, current)]: one report block per kernel, so one edit to
    # an autotuned kernel reads as one change, not one per config.
    mismatched: dict[str, list[tuple[str, Baseline, Any]]] = {}
    for stem, (kernel, digest, inv, _config, _spec, legacy) in sorted(gate.seen.items()):
        try:
            baseline = load_baseline(kernel, digest, gate.directory)
            used.add(stem)
            if baseline is None and legacy != digest:
                baseline = load_baseline(kernel, legacy, gate.directory)
                if baseline is not None:
                    used.add(f"{kernel}_{legacy}")
                    gate.report.append(
                        f"note {stem}: baseline read from {kernel}_{legacy}.json, filed by "
                        f"argument names (before this release); re-key it: commit once, then "
                        f"delete that file"
                    )
        except TritonInvarianceError as exc:
            gate.failed = True
            gate.report.append(f"ERROR {stem}: {exc}")
            continue
        if baseline is None:
            gate.failed = True
            missing.append(stem)
            continue
        if baseline.invariance.matches(inv):
            matched += 1
            gate.report.extend(
                f"note {stem}: {n}" for n in baseline.invariance.comparison_notes(inv)
            )
            continue
        gate.failed = True
        mismatched.setdefault(kernel, []).append((stem, baseline, inv))
    _report_mismatches(gate, mismatched)
    unused = [p for p in list_baselines(gate.directory) if p.stem not in used]
    candidates = usable_baselines(unused)
    for stem in missing:
        kernel, _digest, inv, config, spec, _legacy = gate.seen[stem]
        gate.report.append(f"MISSING {stem}: no baseline in {gate.directory}")
        near = nearest_baseline(inv, config, spec, candidates)
        if near is not None:
            used.add(f"{near.baseline.kernel_name}_{near.baseline.signature_hash}")
            gate.report.append("  " + near.describe())
            gate.report.append(near.baseline.invariance.diff_report(inv))
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
