"""Run one trial in a fresh Python process (for process-scoped mitigations).

Some variables (`HSA_XNACK`, `NVIDIA_TF32_OVERRIDE`, ...) are read once when the GPU runtime
or a math library initialises; setting them in a running interpreter changes nothing. Trials
with such a mitigation therefore run here: the parent starts
`python -m aorta.runner.child SPEC TRIAL_ID` with the trial's variables in the child's
environment from the first instruction, the child runs the same in-process trial code and
writes the same `trial_<id>.json`. The child's stdout/stderr go to `trial_<id>.log`.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from aorta.atomic import write_json_atomic
from aorta.registry.models import Environment, Mitigation
from aorta.runner.in_process import build_trial_result, run_trial_in_process, utc_timestamp
from aorta.runner.launchers import Launcher, python_launcher
from aorta.runner.lifetime import child_tmp_prefix, die_with_parent, remove_orphaned_child_dirs
from aorta.runner.models import RunRequest, TrialResult
from aorta.runner.ownership import TrialOwnership
from aorta.runner.resolve import ResolvedRequest, resolve_request

# How much of a crashed child's log ends up in the failed trial's `traceback` field.
_LOG_TAIL_CHARS = 8000


def _entry_spec(env: Environment | Mitigation) -> dict[str, Any]:
    # Not dataclasses.asdict: it deep-copies the read-only env mapping, which cannot be copied.
    spec = {field.name: getattr(env, field.name) for field in dataclasses.fields(env)}
    spec["env"] = dict(env.env)
    return spec


def _request_to_spec(request: RunRequest) -> dict[str, Any]:
    env = request.environment
    return {
        "workload": request.workload,
        "output_dir": str(request.output_dir),
        "mitigations": list(request.mitigations),
        "environment": env if isinstance(env, str) else _entry_spec(env),
        "extra_env": dict(request.extra_env),
        "trials": request.trials,
        "steps": request.steps,
        "seed": request.seed,
        "pinned_mitigations": [_entry_spec(m) for m in request.pinned_mitigations],
        "fingerprint_kernels": request.fingerprint_kernels,
        "locate": request.locate,
    }


def _request_from_spec(spec: dict[str, Any]) -> RunRequest:
    env = spec["environment"]
    return RunRequest(
        workload=spec["workload"],
        output_dir=Path(spec["output_dir"]),
        mitigations=tuple(spec["mitigations"]),
        environment=env if isinstance(env, str) else Environment(**env),
        extra_env=spec["extra_env"],
        trials=spec["trials"],
        steps=spec["steps"],
        seed=spec["seed"],
        pinned_mitigations=tuple(Mitigation(**m) for m in spec.get("pinned_mitigations", ())),
        fingerprint_kernels=spec.get("fingerprint_kernels", False),
        locate=spec.get("locate", False),
    )


def run_trial_in_child(
    resolved: ResolvedRequest,
    trial_id: int,
    launcher: Launcher | None = None,
    *,
    owner: TrialOwnership | None = None,
) -> TrialResult:
    """Run one trial in a fresh interpreter and return the result the child wrote.

    `launcher` starts the child (default: this interpreter; see `aorta.runner.launchers` for
    other venvs and docker). If the child dies without writing its result (segfault, OOM kill,
    missing image), the trial is recorded as an `error` (it measured nothing the parent can
    see) with the exit code and the tail of its log; the parent writes that record.
    `owner` (the trial's owner record) gets the child's PID and marks its environment.
    """
    launch = launcher or python_launcher(sys.executable)
    request = resolved.request
    result_path = request.trial_path(trial_id)
    log_path = request.output_dir / f"trial_{trial_id}.log"
    remove_orphaned_child_dirs()  # left by an earlier parent that was SIGKILLed
    with tempfile.TemporaryDirectory(prefix=child_tmp_prefix()) as tmp:
        spec_path = Path(tmp) / "request.json"
        spec_path.write_text(json.dumps(_request_to_spec(request)), encoding="utf-8")
        shared = [request.output_dir.resolve(), Path(tmp).resolve()]
        command = launch([str(spec_path), str(trial_id)], resolved.trial_env(trial_id), shared)
        started_at, start = utc_timestamp(), time.perf_counter()
        with log_path.open("w", encoding="utf-8") as log:
            proc = subprocess.Popen(
                command.argv,
                env=owner.marked(command.env) if owner is not None else command.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                # A SIGKILLed parent takes the trial with it. The hook only calls prctl,
                # getppid and kill; the runner starts trials from one thread.
                preexec_fn=die_with_parent(),  # noqa: PLW1509
            )
            try:
                if owner is not None:
                    owner.started(proc.pid)
                returncode = proc.wait()
            finally:
                if proc.poll() is None:  # interrupted while waiting: do not leave it running
                    proc.terminate()
                    proc.wait()
    if result_path.exists():
        return TrialResult.from_dict(json.loads(result_path.read_text(encoding="utf-8")))
    log_text = log_path.read_text(encoding="utf-8", errors="replace")
    reason = f"child process exited with code {returncode} without a result (log: {log_path})"
    result = build_trial_result(
        resolved,
        trial_id,
        outcome=None,
        verdict="error",
        failure=reason,
        traceback_text=log_text[-_LOG_TAIL_CHARS:] or None,
        started_at=started_at,
        wall_clock_sec=time.perf_counter() - start,
        env_snapshot={},
        execution="child_process",
    )
    write_json_atomic(result_path, result.to_dict())
    return result


def main(argv: list[str]) -> int:
    """Child side: `python -m aorta.runner.child SPEC TRIAL_ID`."""
    spec_path, trial_id = Path(argv[0]), int(argv[1])
    request = _request_from_spec(json.loads(spec_path.read_text(encoding="utf-8")))
    resolved = resolve_request(request)
    result = run_trial_in_process(resolved, trial_id, execution="child_process")
    write_json_atomic(request.trial_path(trial_id), result.to_dict())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
