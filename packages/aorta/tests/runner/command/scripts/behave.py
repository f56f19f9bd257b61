"""Misbehaving commands for the process-handling tests (standard library only).

behave.py steps N [--then hang|exit:CODE|nan] [--interval S]
    print N jsonl step lines, then hang (no output, sleeps), exit with CODE, or print a
    NaN loss and keep going.
behave.py ignore-term PIDFILE   ignore SIGTERM, write its pid, print a line, sleep forever
behave.py fork-orphan PIDFILE   fork a child that ignores SIGTERM in a new session (as
    torchrun starts its workers), write both pids, print, then the parent exits 0 while
    the child keeps printing
behave.py spew BYTES [--line-bytes N]   print BYTES of output in lines of N bytes
    (N > BYTES: one line without a newline), then a final step line
"""

import json
import os
import signal
import sys
import time
from pathlib import Path


def _steps(count: int, interval: float) -> None:
    for step in range(1, count + 1):
        time.sleep(interval)
        print(json.dumps({"step": step, "step_time_ms": 10.0 + step, "loss": 2.0 / step}))


def main(argv: list[str]) -> int:
    mode = argv[0]
    if mode == "steps":
        count = int(argv[1])
        then = argv[argv.index("--then") + 1] if "--then" in argv else "exit:0"
        interval = float(argv[argv.index("--interval") + 1]) if "--interval" in argv else 0.0
        _steps(count, interval)
        if then == "hang":
            time.sleep(3600)
        if then == "nan":
            print(json.dumps({"step": count + 1, "step_time_ms": 10.0, "loss": float("nan")}))
            time.sleep(3600)
        return int(then.split(":")[1])
    if mode == "ignore-term":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        Path(argv[1]).write_text(f"{os.getpid()}\n")
        print("ignoring SIGTERM", flush=True)
        time.sleep(3600)
        return 0
    if mode == "fork-orphan":
        ready_r, ready_w = os.pipe()
        child = os.fork()
        if child == 0:
            os.setsid()
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            os.write(ready_w, b"1")
            while True:
                print("child still here", flush=True)
                time.sleep(0.2)
        # Exit only once the child ignores SIGTERM: under load the runner's clean-up could
        # otherwise reach it first, and a plain SIGTERM would do.
        os.read(ready_r, 1)
        Path(argv[1]).write_text(f"{os.getpid()} {child}\n")
        print("parent done", flush=True)
        return 0
    if mode == "spew":
        total = int(argv[1])
        width = int(argv[argv.index("--line-bytes") + 1]) if "--line-bytes" in argv else 100
        out = sys.stdout.buffer
        if width > total:
            out.write(b"x" * total)
        else:
            line = b"y" * (width - 1) + b"\n"
            block = line * max(1, (1 << 20) // width)
            written = 0
            while written + len(block) <= total:
                out.write(block)
                written += len(block)
        out.write(b'\n{"step": 1, "step_time_ms": 5.0, "loss": 1.0}\n')
        out.flush()
        return 0
    raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
