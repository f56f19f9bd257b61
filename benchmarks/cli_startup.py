"""Start-up time of the commands that run no workload, and that they import no heavy module.

Budgets (issue 26), on the 2-core machine where the bare interpreter starts in 23 ms:
`aorta --help`, `oellm-autoexp --help`, `triton-invariance --help` <= 0.15 s; a recipe
`--dry-run` (`aorta triage run --recipe <smoke> --dry-run`) and a config `--dry-run`
(`oellm-autoexp submit <hello_sweep> --dry-run`) <= 0.25 s. A loaded machine slows every
process, so each budget is judged as a ratio to the bare interpreter measured in the same run:
budget / 23 ms = 6.5x for `--help`, 10.9x for a dry run, never less than the budget itself
(a machine whose interpreter starts faster than 23 ms does not shrink it). Taken on CPU time
(user + system, from wait4): under load a process's wall time is mostly waiting for a core,
which says nothing about the command. Commands are run round-robin, RUNS times each, after one
warm-up round (page cache, bytecode); medians are printed with wall time beside them. The
children run without PYTHONDONTWRITEBYTECODE (set in some development shells), so that the
warm-up writes the bytecode an installed tool has: otherwise every run recompiles the
package's own modules (~20-50 ms of a dry run) and times the compiler, not the command.

The aorta commands must not import torch, triton, numpy, matplotlib, scipy or rich; the
oellm-autoexp and triton-invariance ones not torch or triton. Exit 1 on any miss.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

RUNS = 7
BARE_REFERENCE_S = 0.023  # `python -c pass` on the idle 2-core machine (issue 26)
ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
SMOKE = str(ROOT / "packages/aorta/recipes/example-fsdp-smoke.yaml")
HELLO = str(ROOT / "packages/oellm-autoexp/examples/hello_sweep.yaml")
HEAVY_AORTA = ("torch", "triton", "numpy", "matplotlib", "scipy", "rich")
HEAVY_OTHER = ("torch", "triton")


@dataclass(frozen=True)
class Command:
    """One budgeted command: its argv (after the console script) and budget in seconds."""

    tool: str
    argv: tuple[str, ...]
    budget_s: float
    heavy: tuple[str, ...]

    @property
    def label(self) -> str:
        return " ".join((self.tool, *self.argv)).replace(SMOKE, "<smoke>").replace(HELLO, "<hello>")


COMMANDS = (
    Command("aorta", ("--help",), 0.15, HEAVY_AORTA),
    Command("oellm-autoexp", ("--help",), 0.15, HEAVY_OTHER),
    Command("triton-invariance", ("--help",), 0.15, HEAVY_OTHER),
    Command("aorta", ("triage", "run", "--recipe", SMOKE, "--dry-run"), 0.25, HEAVY_AORTA),
    Command(
        "oellm-autoexp",
        ("submit", HELLO, "--dry-run", "--test-only", "never"),
        0.25,
        HEAVY_OTHER,
    ),
)

# Runs a command's entry point in a fresh interpreter and reports what got imported.
_ENTRY = {
    "aorta": "aorta.cli.main",
    "oellm-autoexp": "oellm_autoexp.cli.main",
    "triton-invariance": "triton_invariance.cli",
}
PROBE = """
import contextlib, io, json, sys
from {module} import main
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    main({argv!r})
print(json.dumps(sorted(m for m in {heavy!r} if m in sys.modules)))
"""


# What every child runs with (see the module docs).
ENV = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}


def _run(cmd: list[str], cwd: str) -> tuple[float, float]:
    """Wall and CPU seconds (user + system, from wait4) of one run of `cmd`."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        cmd, cwd=cwd, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}")
    return wall, usage.ru_utime + usage.ru_stime


def _heavy_modules(command: Command, cwd: str) -> list[str]:
    probe = PROBE.format(module=_ENTRY[command.tool], argv=list(command.argv), heavy=command.heavy)
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=cwd, env=ENV, check=True, capture_output=True, text=True
    ).stdout
    found: list[str] = json.loads(out.strip().splitlines()[-1])
    return found


def main() -> int:
    """Time every command round-robin, print medians and ratios; 1 when a budget is missed."""
    cmds = {"python -c pass": [sys.executable, "-c", "pass"]}
    cmds.update({c.label: [str(BIN / c.tool), *c.argv] for c in COMMANDS})
    samples: dict[str, list[tuple[float, float]]] = {label: [] for label in cmds}
    with tempfile.TemporaryDirectory(prefix="cli-startup-") as cwd:  # dry runs write here
        for cmd in cmds.values():
            _run(cmd, cwd)  # warm-up
        for _ in range(RUNS):
            for label, cmd in cmds.items():
                samples[label].append(_run(cmd, cwd))
        heavy = {c.label: _heavy_modules(c, cwd) for c in COMMANDS}
    wall = {label: statistics.median(w for w, _ in runs) for label, runs in samples.items()}
    cpu = {label: statistics.median(c for _, c in runs) for label, runs in samples.items()}
    bare_wall, bare_cpu = wall["python -c pass"], cpu["python -c pass"]
    print(
        f"bare interpreter: median {bare_wall * 1000:.1f} ms wall, {bare_cpu * 1000:.1f} ms CPU "
        f"over {RUNS} runs (reference {BARE_REFERENCE_S * 1000:.0f} ms)"
    )
    failures = 0
    scale = max(1.0, bare_cpu / BARE_REFERENCE_S)  # how much slower than the reference machine
    for c in COMMANDS:
        allowed = c.budget_s / BARE_REFERENCE_S  # budget as a multiple of the bare start-up
        times = cpu[c.label] / bare_cpu
        ratio = cpu[c.label] / (c.budget_s * scale)
        ok = ratio <= 1.0 and not heavy[c.label]
        failures += not ok
        print(
            f"{c.label:<44} {wall[c.label] * 1000:7.1f} ms wall, {cpu[c.label] * 1000:6.1f} ms "
            f"CPU = {times:4.1f}x bare, budget {c.budget_s:.2f} s = {allowed:4.1f}x: "
            f"{ratio:.2f} x budget, heavy modules: {heavy[c.label] or 'none'} "
            f"[{'ok' if ok else 'FAIL'}]"
        )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
