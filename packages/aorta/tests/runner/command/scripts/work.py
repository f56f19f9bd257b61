"""Steps that burn CPU or wait, for the step-clock tests (standard library only).

work.py MODE STEPS SECONDS
    print `step K printed 1.0 ms` after each of STEPS steps of SECONDS each, where a step is
    busy:     this process spins on the CPU for SECONDS of its own CPU time;
    sleep:    this process sleeps SECONDS (no CPU);
    child:    a fresh child process spins SECONDS of CPU, and is waited for (reaped);
    worker:   a worker started in a session of its own (as torchrun starts its workers)
              runs every step, spinning, and prints the step lines; this process only waits.
"""

import subprocess
import sys
import time


def spin(seconds: float) -> None:
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def step_line(step: int) -> None:
    # The printed time is deliberately wrong: a clock other than `log` must not read it.
    print(f"step {step} printed 1.0 ms", flush=True)


def main(mode: str, steps: int, seconds: float) -> int:
    if mode == "spin":  # one step's work, no step line (the `child` mode's child)
        spin(seconds)
        return 0
    if mode == "worker":
        worker = [sys.executable, __file__, "busy", str(steps), str(seconds)]
        return subprocess.run(worker, start_new_session=True, check=False).returncode
    for step in range(1, steps + 1):
        if mode == "busy":
            spin(seconds)
        elif mode == "sleep":
            time.sleep(seconds)
        elif mode == "child":
            subprocess.run([sys.executable, __file__, "spin", "0", str(seconds)], check=True)
        else:
            raise SystemExit(f"unknown mode {mode}")
        step_line(step)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], int(sys.argv[2]), float(sys.argv[3])))
