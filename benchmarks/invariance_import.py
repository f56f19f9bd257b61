"""Import cost of triton-invariance's start-up hook (issue 5: < 1 ms with the env vars unset).

Measures, in fresh interpreters of this environment:
1. the `.pth` line itself with both TRITON_INVARIANCE_* variables unset (what every Python
   process here pays), timed in-process over many executions;
2. interpreter start-up (`python -c pass`) with the variables unset vs set: set, start-up also
   loads `triton_invariance.startup` (Triton itself is only hooked when the program imports it);
3. `import triton` with the variables unset vs set (the cost of installing the hooks).
Prints medians and the verdict; exit 1 when (1) is over budget or (2, unset) imports anything.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
import timeit

from triton_invariance.startup import PTH_LINE

BUDGET_S = 1e-3
RUNS = 9
CLEAN = {k: v for k, v in os.environ.items() if not k.startswith("TRITON_INVARIANCE_")}
SET = {**CLEAN, "TRITON_INVARIANCE_COMPARE": "1", "TRITON_DEFAULT_FP_FUSION": "1"}
UNSET = {**CLEAN, "TRITON_DEFAULT_FP_FUSION": "1"}


def _wall(code: str, env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True)
    return time.perf_counter() - start


def _median_wall(code: str, env: dict[str, str]) -> float:
    _wall(code, env)  # warm the page cache
    return statistics.median(_wall(code, env) for _ in range(RUNS))


def main() -> int:
    """Run the three measurements and print the verdict."""
    compiled = compile(PTH_LINE, "triton_invariance_startup.pth", "exec")
    saved = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith("TRITON_INVARIANCE_")}
    try:
        number = 20000
        pth_s = min(timeit.repeat(lambda: exec(compiled, {}), number=number, repeat=5)) / number
    finally:
        os.environ.update(saved)
    probe = (
        "import json, sys; print(json.dumps(sorted(m for m in sys.modules "
        "if m.startswith(('triton', 'triton_invariance')))))"
    )
    loaded = json.loads(
        subprocess.run(
            [sys.executable, "-c", probe], env=UNSET, check=True, capture_output=True, text=True
        ).stdout
    )
    start_unset = _median_wall("pass", UNSET)
    start_set = _median_wall("pass", SET)
    triton_unset = _median_wall("import triton", UNSET)
    triton_set = _median_wall("import triton", SET)
    print(f".pth line, vars unset:        {pth_s * 1e6:8.2f} us per interpreter start")
    print(f"modules loaded at start-up:   {loaded or 'none'}")
    print(f"python -c pass, vars unset:   {start_unset * 1e3:8.1f} ms (median of {RUNS})")
    print(f"python -c pass, COMPARE=1:    {start_set * 1e3:8.1f} ms")
    print(f"import triton, vars unset:    {triton_unset * 1e3:8.1f} ms")
    print(f"import triton, COMPARE=1:     {triton_set * 1e3:8.1f} ms (hooks installed)")
    ok = pth_s < BUDGET_S and not loaded
    print(
        f"verdict: .pth line = {pth_s / BUDGET_S:.5f} x the 1 ms budget, {'ok' if ok else 'FAIL'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
