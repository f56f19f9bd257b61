"""Cost of fingerprinting a kernel relative to compiling it (triton-invariance issue).

For every test kernel (vector add, fused softmax, reduction, fp16/bf16 matmul, control flow,
atomic add) and target (cuda:80, cuda:90, hip:gfx942): Triton's compile time with an empty kernel
cache against `compute_invariance` on the resulting TTGIR text. Both are measured the same way,
as the best of several runs (`COMPILES`, `FINGERPRINTS`), the least noisy estimate on a shared
machine; the median fingerprint time is printed too. One warm-up compile runs first so that
Triton's one-time start-up is not counted (that makes compiles look faster: conservative).

The fingerprint is timed as the hooks pay for it: `compute_invariance(text).fingerprint`, i.e.
parsing, canonicalising and hashing (the data-flow DAG hash included; the hashes are computed
lazily, so timing `compute_invariance` alone would leave them out), plus the digest of the
compiled code's `.text` sections (cubin / hsaco) the hooks record for the "option changed;
compiled code identical" verdict.

Budget: median ratio fingerprint/compile <= 2 %. Prints every ratio and the median; exit 1 when
over budget.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "packages/triton-invariance/tests"))

from compile_helpers import TARGETS, compile_kernel  # noqa: E402
from kernels import KERNELS  # noqa: E402

from triton_invariance.fingerprint import compute_invariance  # noqa: E402
from triton_invariance.verdict import CODE_KINDS, asm_digest_of_text  # noqa: E402

BUDGET = 0.02
COMPILES = 2
FINGERPRINTS = 9


def _compile_seconds(kernel: str, target: str, cache_root: Path) -> tuple[float, str, bytes]:
    """Best-of-`COMPILES` wall time of a cold-cache compile, the TTGIR text and the binary."""
    spec = KERNELS[kernel]
    best, compiled = float("inf"), None
    for attempt in range(COMPILES):
        os.environ["TRITON_CACHE_DIR"] = str(cache_root / f"{kernel}-{target}-{attempt}")
        start = time.perf_counter()
        compiled = compile_kernel(spec.fn, spec.signature, spec.constexprs, target)
        best = min(best, time.perf_counter() - start)
    assert compiled is not None
    code = next(compiled.asm[k] for k in CODE_KINDS if k in compiled.asm)
    return best, str(compiled.asm["ttgir"]), code


def _fingerprint_seconds(text: str, code: bytes) -> tuple[float, float]:
    """Best and median wall time of the fingerprint and the code digest over `FINGERPRINTS`
    runs."""
    times = []
    for _ in range(FINGERPRINTS):
        start = time.perf_counter()
        compute_invariance(text).fingerprint  # noqa: B018 (the hashing is the point)
        asm_digest_of_text(code)
        times.append(time.perf_counter() - start)
    return min(times), statistics.median(times)


def main() -> int:
    """Measure, print the table and the verdict."""
    with tempfile.TemporaryDirectory(prefix="invariance-cost-") as tmp:
        cache_root = Path(tmp)
        _compile_seconds("add", "hip:gfx942", cache_root / "warm-up")
        ratios = []
        print(
            f"{'kernel':<12} {'target':<11} {'compile':>9} {'fingerprint':>12} {'(median)':>10} "
            f"{'ratio':>7}  ops"
        )
        for kernel in KERNELS:
            for target in TARGETS:
                compile_s, text, code = _compile_seconds(kernel, target, cache_root)
                finger_s, finger_median_s = _fingerprint_seconds(text, code)
                ratio = finger_s / compile_s
                ratios.append(ratio)
                n_ops = len(compute_invariance(text).ops)
                print(
                    f"{kernel:<12} {target:<11} {compile_s * 1000:7.1f}ms "
                    f"{finger_s * 1000:10.2f}ms {finger_median_s * 1000:8.2f}ms "
                    f"{ratio * 100:6.2f}%  {n_ops}"
                )
    median = statistics.median(ratios)
    verdict = "ok" if median <= BUDGET else "OVER BUDGET"
    print(
        f"median fingerprint/compile ratio {median * 100:.2f}% "
        f"(max {max(ratios) * 100:.2f}%, budget {BUDGET * 100:.0f}%): {verdict}"
    )
    return 0 if median <= BUDGET else 1


if __name__ == "__main__":
    sys.exit(main())
