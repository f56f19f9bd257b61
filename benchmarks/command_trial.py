"""Command workloads: per-trial overhead, aorta's peak memory under a flood, hang-to-end time.

1. Overhead: one command (fixed CPU work, a jsonl step line every ~50 ms) run bare
   (`subprocess.run`, output to a file, as a shell redirect would) and as a command trial
   through `run_trials` (process group, streamed scanning, step parsing, stop, trial JSON).
   Rounds alternate so machine noise hits both; the verdict uses the minimum per side (the
   least disturbed run), medians are printed beside it. Budget: <= 2 % on a 20 s trial
   (`--seconds 20`, the default; shorter for a quick look).
2. Peak RSS: a fresh interpreter runs one command trial whose command prints `--flood-gib`
   GiB (100-byte lines), and reports its own peak RSS (`ru_maxrss`) next to the same
   interpreter's peak after a trial that prints one line: the difference is what the flood
   cost aorta. Also the scanning throughput.
3. Hang to end: a command prints 5 steps and goes silent; `hang_after` = `--hang-after`.
   Measured from the command's last output (its own timestamp in the log) to the end of
   `run_command_trial`, for a command that obeys SIGTERM and one that ignores it (which
   needs the SIGKILL after `kill_grace`).

Exit 1 when the overhead is over budget.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BUDGET = 0.02
SCRIPTS = Path(__file__).parents[1] / "packages/aorta/tests/runner/command/scripts"

# Fixed work, printed as jsonl steps: `python -c WORK ITERATIONS`. No braces: a command's
# arguments are templates ({seed}, ...).
WORK = """
import json, sys, time
iterations = int(sys.argv[1])
step = 0
while step * 200_000 < iterations:
    start = time.perf_counter()
    total = 0
    for i in range(200_000):
        total += i * i
    step += 1
    ms = (time.perf_counter() - start) * 1000.0
    print(json.dumps(dict(step=step, step_time_ms=ms, loss=1.0 / step)), flush=True)
"""

HANG = """
import json, signal, sys, time
if sys.argv[1] == "ignore":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
for step in range(1, 6):
    print(json.dumps(dict(step=step, step_time_ms=1.0, loss=1.0)), flush=True)
print("silent-from " + repr(time.time()), flush=True)
time.sleep(3600)
"""


def calibrate(seconds: float) -> int:
    """Iterations of WORK that take about `seconds` here."""
    probe = 4_000_000
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", WORK, str(probe)], stdout=subprocess.DEVNULL, check=True)
    return int(probe * seconds / (time.perf_counter() - start))


def bare(argv: list[str], log: Path) -> float:
    start = time.perf_counter()
    with log.open("wb") as out:
        subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, check=True)
    return time.perf_counter() - start


def as_trial(argv: list[str], out_dir: Path) -> float:
    from aorta.runner import RunRequest, run_trials
    from aorta.runner.command.spec import parse_command_spec

    spec = parse_command_spec({"command": argv, "step_time": "jsonl", "hang_after": 60})
    request = RunRequest(workload="command", output_dir=out_dir, command=spec, steps=100)
    start = time.perf_counter()
    (result,) = run_trials(request)
    took = time.perf_counter() - start
    assert result.outcome == "passed", result.failure
    return took


def overhead(seconds: float, rounds: int, tmp: Path) -> bool:
    iterations = calibrate(seconds)
    argv = [sys.executable, "-c", WORK, str(iterations)]
    bare_s, trial_s = [], []
    for index in range(rounds):
        bare_s.append(bare(argv, tmp / f"bare_{index}.log"))
        trial_s.append(as_trial(argv, tmp / f"trial_{index}"))
    best = min(trial_s) / min(bare_s) - 1.0
    median = statistics.median(trial_s) / statistics.median(bare_s) - 1.0
    print(f"overhead: {rounds} rounds of a ~{seconds:g} s command")
    print(f"  bare  min {min(bare_s):.3f} s  median {statistics.median(bare_s):.3f} s")
    print(f"  trial min {min(trial_s):.3f} s  median {statistics.median(trial_s):.3f} s")
    print(f"  overhead (min) {best * 100:+.2f} %  (median {median * 100:+.2f} %)  budget 2 %")
    return best <= BUDGET


FLOOD_CHILD = """
import os, resource, sys, time
from pathlib import Path
from aorta.runner.command.spec import parse_command_spec
from aorta.runner.command.trial import run_command_trial
script, size, tmp = sys.argv[1], sys.argv[2], Path(sys.argv[3])
argv = [sys.executable, script, "spew", size]
spec = parse_command_spec({"command": argv, "step_time": "jsonl", "keep_logs": "none"})
start = time.perf_counter()
out = run_command_trial(spec, argv, dict(os.environ), log_path=tmp / "t.log",
                        trial_dir=tmp / "t", steps=10)
took = time.perf_counter() - start
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(f"{rss} {took} {out.output_bytes} {out.outcome}")
"""


def flood(gib: float, tmp: Path) -> None:
    sizes = {"1 line": "1", f"{gib:g} GiB": str(int(gib * (1 << 30)))}
    print(f"peak RSS of aorta while a trial prints {gib:g} GiB (100-byte lines):")
    base = None
    for label, size in sizes.items():
        done = subprocess.run(
            [sys.executable, "-c", FLOOD_CHILD, str(SCRIPTS / "behave.py"), size, str(tmp)],
            capture_output=True,
            text=True,
            check=True,
        )
        rss_kib, took, nbytes, outcome = done.stdout.split()
        mib = int(rss_kib) / 1024
        base = mib if base is None else base
        rate = int(nbytes) / float(took) / (1 << 20)
        print(
            f"  {label:>8}: peak RSS {mib:.1f} MiB (+{mib - base:.1f} MiB), {outcome}, "
            f"{int(nbytes) / (1 << 20):.0f} MiB in {float(took):.1f} s ({rate:.0f} MiB/s)"
        )


def hang(hang_after: float, tmp: Path) -> None:
    from aorta.runner.command.spec import parse_command_spec
    from aorta.runner.command.trial import run_command_trial

    print(f"hang to trial end (hang_after {hang_after:g} s, kill_grace 2 s):")
    for mode in ("obeys", "ignore"):
        argv = [sys.executable, "-c", HANG, mode]
        spec = parse_command_spec(
            {"command": argv, "hang_after": hang_after, "kill_grace": 2, "keep_logs": "all"}
        )
        log = tmp / f"hang_{mode}.log"
        out = run_command_trial(
            spec, argv, dict(os.environ), log_path=log, trial_dir=tmp / mode, steps=5
        )
        ended = time.time()
        silent_from = float(log.read_text().split("silent-from ")[1].split()[0])
        total = ended - silent_from
        what = "obeys SIGTERM" if mode == "obeys" else "ignores SIGTERM"
        print(
            f"  {what:>15}: {total:.3f} s from last output to trial end "
            f"({total - hang_after:.3f} s after hang_after; {out.outcome} {out.reason!r}, "
            f"needed {out.signal_needed})"
        )


def main() -> int:
    """Run the three measurements; exit 1 when the overhead is over budget."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="length of one trial")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--flood-gib", type=float, default=1.0)
    parser.add_argument("--hang-after", type=float, default=2.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="aorta-bench-command-") as tmp:
        ok = overhead(args.seconds, args.rounds, Path(tmp))
        flood(args.flood_gib, Path(tmp))
        hang(args.hang_after, Path(tmp))
    print(json.dumps({"overhead_within_budget": ok}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
