"""Command workloads: per-trial overhead, aorta's peak memory under a flood, hang-to-end time.

1. Overhead: one command (fixed CPU work, a jsonl step line every ~50 ms) run bare
   (`subprocess.run`, output to a file, as a shell redirect would) and as a command trial
   through `run_trials` (process group, streamed scanning, step parsing, stop, trial JSON).
   On a shared machine the command's own running time swings by tens of percent between
   rounds, which would drown a 2 % budget; so the command stamps its own start and end, and
   what is judged is the wall time each side adds around it (start-up, teardown; median over
   alternating rounds), as a share of the command's own time. aorta's CPU use while the trial
   runs (its scanning) is printed beside it: it costs a core's share, not the trial's wall
   time, unless the machine has no core to spare. Budget: <= 2 % on a 20 s trial
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
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

BUDGET = 0.02
SCRIPTS = Path(__file__).parents[1] / "packages/aorta/tests/runner/command/scripts"

# Fixed work, printed as jsonl steps: `python -c WORK ITERATIONS`. The command stamps its own
# start and end (wall clock), so its own running time can be taken out of both sides. No
# braces: a command's arguments are templates ({seed}, ...).
WORK = """
import json, sys, time
print("started " + repr(time.time()), flush=True)
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
print("ended " + repr(time.time()), flush=True)
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


def own_seconds(log: Path) -> float:
    """The command's own running time, from the stamps it printed."""
    text = log.read_text()
    return float(text.split("ended ")[1].split()[0]) - float(text.split("started ")[1].split()[0])


@dataclass(frozen=True)
class Round:
    """One run: wall time, the command's own time, and this process's CPU time meanwhile."""

    wall: float
    own: float
    cpu: float

    @property
    def added(self) -> float:
        """Wall time that is not the command's own running time (start-up, teardown)."""
        return self.wall - self.own


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def bare(argv: list[str], log: Path) -> Round:
    """The command with its output redirected to a file, as a shell would."""
    cpu, start = _cpu(), time.time()
    with log.open("wb") as out:
        subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, check=True)
    return Round(time.time() - start, own_seconds(log), _cpu() - cpu)


def as_trial(argv: list[str], out_dir: Path) -> Round:
    """The command as one trial of `run_trials` (registry, JSON and all)."""
    from aorta.runner import RunRequest, run_trials
    from aorta.runner.command.spec import parse_command_spec

    spec = parse_command_spec(
        {"command": argv, "step_time": "jsonl", "hang_after": 60, "keep_logs": "all"}
    )
    request = RunRequest(workload="command", output_dir=out_dir, command=spec, steps=100)
    cpu, start = _cpu(), time.time()
    (result,) = run_trials(request)
    wall = time.time() - start
    assert result.outcome == "passed", result.failure
    return Round(wall, own_seconds(out_dir / "trial_0.log"), _cpu() - cpu)


def overhead(seconds: float, rounds: int, tmp: Path) -> bool:
    """Alternate bare and trial rounds; judge the added wall time over the command's own."""
    iterations = calibrate(seconds)
    argv = [sys.executable, "-c", WORK, str(iterations)]
    as_trial(argv, tmp / "warm-up")  # imports and the registry's first load are not per trial
    bare_r, trial_r = [], []
    for index in range(rounds):
        bare_r.append(bare(argv, tmp / f"bare_{index}.log"))
        trial_r.append(as_trial(argv, tmp / f"trial_{index}"))
    own = statistics.median(r.own for r in trial_r)
    added = statistics.median(r.added for r in trial_r) - statistics.median(r.added for r in bare_r)
    cpu = statistics.median(r.cpu / r.wall for r in trial_r)
    ratio = added / own
    print(
        f"overhead: {rounds} rounds of a ~{seconds:g} s command (its own time: median {own:.2f} s)"
    )
    print(
        "  wall added around the command: bare median "
        f"{statistics.median(r.added for r in bare_r) * 1000:.0f} ms, trial median "
        f"{statistics.median(r.added for r in trial_r) * 1000:.0f} ms"
    )
    print(f"  aorta's CPU while the trial ran: {cpu * 100:.2f} % of one core (median)")
    print(
        f"  raw walls: bare {[round(r.wall, 2) for r in bare_r]} s, "
        f"trial {[round(r.wall, 2) for r in trial_r]} s (machine noise)"
    )
    print(f"  per-trial overhead {ratio * 100:+.2f} % of the command's time  (budget 2 %)")
    return ratio <= BUDGET


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
