"""Builders shared by the fake- and real-SLURM scenario tests (no test functions here)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from oellm_autoexp.persistence import JobRecord, Session, SessionStore, new_session_id


def make_session(
    root: Path,
    *,
    jobs: int = 4,
    array: bool = True,
    monitor: dict[str, Any] | None = None,
    policies: list[dict[str, Any]] | None = None,
    script_body: str = "echo hi",
    time_limit: str | None = None,
) -> tuple[Session, SessionStore]:
    """A saved session of `jobs` jobs (one array script, or one script per job)."""
    store = SessionStore.for_output_dir(root)
    session = Session(
        new_session_id(),
        "scenario",
        str(root),
        config={"project": {"name": "scenario", "base_output_dir": str(root)}},
        monitoring={
            "monitor": {
                "class_name": "LogMonitor",
                "poll_interval_seconds": 1.0,
                **(monitor or {}),
            },
            "restart_policies": policies or [],
        },
    )
    (root / "scripts").mkdir(parents=True, exist_ok=True)
    for index in range(jobs):
        name = f"job{index}"
        out = root / "jobs" / name
        out.mkdir(parents=True, exist_ok=True)
        if array:
            script = root / "scripts" / "array.sbatch"
            log = str(root / "logs" / "sweep_%A_%a.out")
            slurm_name = "sweep"
        else:
            script = root / "scripts" / f"{name}.sbatch"
            log = str(root / "logs" / f"{name}_%j.out")
            slurm_name = name
        if not script.exists():
            directives = [f"#SBATCH --output={log}", f"#SBATCH --error={log}"]
            if time_limit:
                directives.append(f"#SBATCH --time={time_limit}")
            script.write_text("#!/bin/bash\n" + "\n".join(directives) + f"\n{script_body}\n")
        (root / "logs").mkdir(exist_ok=True)
        job = JobRecord(
            key=f"k{index}",
            name=name,
            script=str(script),
            slurm_name=slurm_name,
            log_path=log,
            output_dir=str(out),
            array_index=index if array else None,
            output_paths=[str(out / "train.log")],
            time_limit=time_limit,
        )
        session.jobs[job.key] = job
    store.create(session)
    return session, store
