"""Cost of fingerprinting a kernel relative to compiling it (triton-invariance issue).

For every test kernel (vector add, fused softmax, reduction, fp16/bf16 matmul, atomic add) and
target (cuda:80, cuda:90, hip:gfx942): Triton's compile time with an empty kernel cache (best of
`COMPILES`, after one warm-up compile so that Triton's one-time start-up is not counted; both
choices make the compile look *faster*, i.e. the ratio conservative) against the median of
`FINGERPRINTS` runs of `compute_invariance` on the resulting TTGIR text.

Budget: median ratio fingerprint/compile <= 5 %. Prints every ratio and the median; exit 1 when
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

from compile_helpers import TARGETS, compile_ttgir  # noqa: E402
from kernels import KERNELS  # noqa: E402

from triton_invariance.fingerprint import compute_invariance  # noqa: E402

BUDGET = 0.05
COMPILES = 2
FINGERPRINTS = 7


def _compile_seconds(kernel: str, target: str, cache_root: Path) -> tuple[float, str]:
    """Best-of-`COMPILES` wall time of a cold-cache compile, and the TTGIR text."""
    spec = KERNELS[kernel]
    best, text = float("inf"), ""
    for attempt in range(COMPILES):
        os.environ["TRITON_CACHE_DIR"] = str(cache_root / f"{kernel}-{target}-{attempt}")
        start = time.perf_counter()
        text = compile_ttgir(spec.fn, spec.signature, spec.constexprs, target)
        best = min(best, time.perf_counter() - start)
    return best, text


def _fingerprint_seconds(text: str) -> float:
    times = []
    for _ in range(FINGERPRINTS):
        start = time.perf_counter()
        compute_invariance(text)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    """Measure, print the table and the verdict."""
    with tempfile.TemporaryDirectory(prefix="invariance-cost-") as tmp:
        cache_root = Path(tmp)
        _compile_seconds("add", "hip:gfx942", cache_root / "warm-up")
        ratios = []
        print(f"{'kernel':<12} {'target':<11} {'compile':>9} {'fingerprint':>12} {'ratio':>7}  ops")
        for kernel in KERNELS:
            for target in TARGETS:
                compile_s, text = _compile_seconds(kernel, target, cache_root)
                finger_s = _fingerprint_seconds(text)
                ratio = finger_s / compile_s
                ratios.append(ratio)
                n_ops = len(compute_invariance(text).ops)
                print(
                    f"{kernel:<12} {target:<11} {compile_s * 1000:7.1f}ms "
                    f"{finger_s * 1000:10.2f}ms {ratio * 100:6.2f}%  {n_ops}"
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
