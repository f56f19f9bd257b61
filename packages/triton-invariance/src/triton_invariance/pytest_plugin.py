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
    # file stem -> (kernel name, variant hash, fingerprint data, readable config, specialisation)
    seen: dict[str, tuple[str, str, Any, dict[str, Any], dict[str, Any]]] = field(
        default_factory=dict
    )
    lock: threading.Lock = field(default_factory=threading.Lock)
    report: list[str] = field(default_factory=list)
    failed: bool = False

    def record(self, variant: CompiledVariant) -> None:
        keys = variant.keys(frozenset())
        digest = hashlib.blake2b(
            f"{keys.sig_hash}:{keys.cfg_hash}".encode("ascii"), digest_size=8
        ).hexdigest()
        entry = (
            variant.kernel_name,
            digest,
            variant.invariance,
            dict(keys.config),
            dict(keys.specialization),
        )
        with self.lock:
            self.seen[f"{variant.kernel_name}_{digest}"] = entry


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
    for stem, (kernel, digest, inv, config, specialization) in sorted(gate.seen.items()):
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
    from triton_invariance.storage import list_baselines, load_baseline

    matched = 0
    for stem, (kernel, digest, inv, _config, _spec) in sorted(gate.seen.items()):
        try:
            baseline = load_baseline(kernel, digest, gate.directory)
        except TritonInvarianceError as exc:
            gate.failed = True
            gate.report.append(f"ERROR {stem}: {exc}")
            continue
        if baseline is None:
            gate.failed = True
            gate.report.append(f"MISSING {stem}: no baseline in {gate.directory}")
            continue
        if baseline.invariance.matches(inv):
            matched += 1
            gate.report.extend(
                f"note {stem}: {n}" for n in baseline.invariance.comparison_notes(inv)
            )
            continue
        gate.failed = True
        gate.report.append(f"MISMATCH {stem}")
        gate.report.append(baseline.invariance.diff_report(inv))
    unseen = [p.stem for p in list_baselines(gate.directory) if p.stem not in gate.seen]
    if unseen:
        gate.report.append(f"not compiled in this session ({len(unseen)}): {', '.join(unseen)}")
    verdict = "FAILED" if gate.failed else "passed"
    gate.report.append(
        f"triton-invariance compare {verdict}: {matched}/{len(gate.seen)} kernel variant(s) "
        f"match {gate.directory}"
    )
