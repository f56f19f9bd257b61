"""One monitor poll over 1,000 and 10,000 jobs against the fake SLURM.

Steady-state polls (every job RUNNING and writing its log) are timed as wall and CPU time; the
session save is timed apart (state changes are saved at once, log offsets and activity marks
only every `ACTIVITY_SAVE_S`). "submit s" is the first poll: 10 sbatch calls plus two session
writes (all intents before the first sbatch, all ids after the last).

Budgets (issues 7 and 26): SLURM calls per steady-state poll are 1-2 (one squeue, at most one
sacct), never one per job; a steady-state poll over 10,000 jobs costs <= 0.4 s CPU (wall time
is printed beside it: on a shared machine it measures the neighbours too); the session file of
10,000 jobs is <= 16 MiB. The session is built from a real plan as `submit` builds it (config,
plan and job records). Every job is a task of 1,000-task arrays (the planner's default array
size) and writes a real log file, so a poll stats and reads 10,000 logs. Exit 1 when a budget
is missed.
"""

from __future__ import annotations

import gc
import logging
import os
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

from oellm_autoexp.monitor import MonitorController
from oellm_autoexp.monitor.observation import resolve_log_path
from oellm_autoexp.persistence import Session, SessionStore
from oellm_autoexp.slurm.client import SubmitRequest
from oellm_autoexp.slurm.fake import FakeClock, FakeSlurmClient, Timeline

SIZES = (1_000, 10_000)
ARRAY_SIZE = 1_000
STEADY_POLLS = 5
POLL_CPU_BUDGET_S = 0.4  # median steady-state poll at 10,000 jobs
SESSION_FILE_BUDGET_MIB = 16.0  # the session file at 10,000 jobs
MAX_CALLS_PER_POLL = 2


def build_session(root: Path, jobs: int) -> tuple[Session, SessionStore]:
    """A saved session of a real `jobs`-job plan (arrays of 1,000), as `submit` creates it.

    The session file holds the resolved config and the whole plan beside the job records, so
    its size is what a user's 10,000-job session takes on disk.
    """
    from oellm_autoexp.config.loader import parse_config
    from oellm_autoexp.monitor.session_builder import session_from_plan
    from oellm_autoexp.planning import build_plan

    data = {
        "project": {"name": "bench", "base_output_dir": str(root)},
        "backend": {
            "class_name": "CommandBackend",
            "argv": ["python", "train.py", "--seed", "{seed}", "--save", "{output_dir}"],
        },
        "sweep": {"axes": {"seed": list(range(jobs))}, "name_template": "job{seed:05d}"},
        "slurm": {"sbatch": {"time": "01:00:00"}, "max_array_size": ARRAY_SIZE},
        "monitoring": {
            "class_name": "LogMonitor",
            "termination_str": "TRAINING DONE",
            "inactivity_threshold_seconds": 3600.0,
            "output_paths": ["{output_dir}/train.log"],
        },
    }
    result = build_plan(parse_config(data))
    session = session_from_plan(result.plan, result.config)
    store = SessionStore.for_output_dir(root)
    store.create(session)
    return session, store


def measure(jobs: int) -> dict[str, float]:
    """Submit, then time steady-state polls; returns the figures for one size."""
    with tempfile.TemporaryDirectory(prefix="monitor-scale-") as tmp:
        root = Path(tmp)
        (root / "logs").mkdir()
        gc.collect()
        tracemalloc.start()
        session, store = build_session(root, jobs)
        session_bytes = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        clock = FakeClock()
        patterns = {job.script: job.log_path for job in session.jobs.values()}

        def timeline(request: SubmitRequest, job_id: str, _attempt: int) -> Timeline:
            log = resolve_log_path(patterns[str(request.script)], job_id, request.job_name)
            return Timeline(run_s=None, log_path=log, log_every_s=1.0)

        fake = FakeSlurmClient(clock, timeline)
        controller = MonitorController(fake, store, [session], clock=clock)
        start = time.perf_counter()
        controller.poll_once()  # submits: one sbatch per array script
        submit_s = time.perf_counter() - start
        sbatch_calls = fake.calls["sbatch"]
        times, cpu, calls = [], [], []
        for _ in range(STEADY_POLLS):
            clock.advance(30)
            fake.write_logs()  # the jobs write; not the monitor's cost
            before = sum(fake.calls.values())
            start, start_cpu = time.perf_counter(), time.process_time()
            report = controller.poll_once()
            times.append(time.perf_counter() - start)
            cpu.append(time.process_time() - start_cpu)
            calls.append(sum(fake.calls.values()) - before)
            assert report.jobs_polled == jobs, report
            assert report.states.get("running") == jobs, report.states
        save_start = time.perf_counter()
        store.save(session)
        save_s = time.perf_counter() - save_start
        file_bytes = store.path(session.session_id).stat().st_size
        return {
            "jobs": jobs,
            "sbatch_calls": sbatch_calls,
            "submit_poll_s": submit_s,
            "calls_per_poll_max": max(calls),
            "poll_s_median": statistics.median(times),
            "poll_s_max": max(times),
            "poll_cpu_s_median": statistics.median(cpu),
            "save_s": save_s,
            "session_mib": session_bytes / 2**20,
            "session_file_mib": file_bytes / 2**20,
        }


def main() -> int:
    """Measure every size, print a table, exit 1 when a budget is missed."""
    logging.disable(logging.INFO)  # the per-poll INFO line is not part of the measurement
    failed = False
    print(
        f"{'jobs':>6} {'sbatch':>6} {'calls/poll':>10} {'poll med s':>10} {'poll max s':>10} "
        f"{'poll cpu s':>10} {'save s':>7} {'session MiB':>11} {'file MiB':>8} {'submit s':>8}"
    )
    for size in SIZES:
        row = measure(size)
        print(
            f"{row['jobs']:>6} {row['sbatch_calls']:>6} {row['calls_per_poll_max']:>10} "
            f"{row['poll_s_median']:>10.3f} {row['poll_s_max']:>10.3f} "
            f"{row['poll_cpu_s_median']:>10.3f} {row['save_s']:>7.3f} "
            f"{row['session_mib']:>11.1f} {row['session_file_mib']:>8.1f} "
            f"{row['submit_poll_s']:>8.3f}"
        )
        if row["calls_per_poll_max"] > MAX_CALLS_PER_POLL:
            print(f"FAIL: {row['calls_per_poll_max']} SLURM calls in one poll", file=sys.stderr)
            failed = True
        if row["jobs"] == 10_000:
            for label, value, budget, unit in (
                ("poll CPU", row["poll_cpu_s_median"], POLL_CPU_BUDGET_S, "s"),
                ("session file", row["session_file_mib"], SESSION_FILE_BUDGET_MIB, "MiB"),
            ):
                verdict = value <= budget
                failed = failed or not verdict
                print(
                    f"10,000 jobs: {label} {value:.3f} {unit} / {budget} {unit} = "
                    f"{value / budget:.2f}: {'ok' if verdict else 'OVER'}"
                )
    load = os.getloadavg()[0]
    print(f"load average during the run: {load:.1f} on {os.cpu_count()} CPUs (wall times scale)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
