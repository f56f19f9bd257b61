"""Fingerprint values pinned: the same TTGIR must keep fingerprinting to the same hashes.

Stored baselines are compared with fingerprints computed by later versions of this package, so a
change that makes the fingerprint cheaper (or tidier) must not change a single value. The TTGIR
texts in `data/ttgir` are Triton 3.9's compiles of every `kernels.KERNELS` entry for every
`compile_helpers.TARGETS` target (the kernels `benchmarks/invariance_cost.py` measures), and
`data/pinned_fingerprints.json` holds what this package computed from them when they were
recorded: the fingerprint, every component hash, and digests of the canonical lines, layouts and
per-line data-flow hashes (the parts a baseline stores and a mismatch report shows).

A deliberate change of the canonicalisation or the hashing bumps `FORMAT_VERSION` and rewrites
the pins: ``python tests/test_pinned_fingerprints.py --rewrite``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from triton_invariance.data import content_hash
from triton_invariance.fingerprint import compute_invariance

DATA = Path(__file__).parent / "data"
PINS = DATA / "pinned_fingerprints.json"
TEXTS = sorted((DATA / "ttgir").glob("*.ttgir"))


def record(text: str) -> dict[str, Any]:
    """Everything pinned about one TTGIR text."""
    inv = compute_invariance(text)
    return {
        "fingerprint": inv.fingerprint,
        **inv.component_hashes(),
        "ops": content_hash(inv.ops),
        "op_layouts": content_hash(inv.op_layouts),
        "layouts": content_hash(inv.layouts),
        "op_hashes": content_hash(inv.op_hashes()),
        "dtype_signature_text": inv.dtype_signature,
        "n_ops": len(inv.ops),
    }


def test_every_benchmark_kernel_and_target_is_pinned() -> None:
    from compile_helpers import TARGETS
    from kernels import KERNELS

    expected = {f"{k}-{t.replace(':', '-')}.ttgir" for k in KERNELS for t in TARGETS}
    assert {p.name for p in TEXTS} == expected
    assert set(json.loads(PINS.read_text())) == expected


@pytest.mark.parametrize("path", TEXTS, ids=lambda p: p.stem)
def test_fingerprint_is_unchanged(path: Path) -> None:
    pinned = json.loads(PINS.read_text())[path.name]
    assert record(path.read_text()) == pinned


if __name__ == "__main__":
    if sys.argv[1:] != ["--rewrite"]:
        sys.exit("usage: python tests/test_pinned_fingerprints.py --rewrite")
    pins = {p.name: record(p.read_text()) for p in TEXTS}
    PINS.write_text(json.dumps(pins, indent=1, sort_keys=True) + "\n")
