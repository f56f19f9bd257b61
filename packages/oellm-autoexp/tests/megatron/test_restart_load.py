"""Restarts through the backend hook: Megatron resumes with ``--load`` from its checkpoint tracker.

The planner, session and monitor are the real ones; SLURM is the fake (timelines), Megatron's
parser is the stand-in (see conftest).
"""

from __future__ import annotations

import importlib
import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from oellm_autoexp.backends.base import JobContext
from oellm_autoexp.backends.megatron.source import clear_caches
from oellm_autoexp.backends.per_job import backend_for_job
from oellm_autoexp.config.loader import load_config
from oellm_autoexp.monitor import MonitorController
from oellm_autoexp.monitor.observation import resolve_log_path
from oellm_autoexp.monitor.session_builder import submit_plan
from oellm_autoexp.persistence import SessionStore
from oellm_autoexp.planning import build_plan, write_plan
from oellm_autoexp.slurm.client import SubmitRequest
from oellm_autoexp.slurm.commands import RetryPolicy
from oellm_autoexp.slurm.fake import FakeClock, FakeSlurmClient, Timeline
from oellm_autoexp.slurm.real import RealSlurmClient

CONFIG = """\
project: {{name: gpt, base_output_dir: {root}}}
backend:
  class_name: MegatronBackend
  launcher: {launcher}
  megatron:
    num_layers: 2
    hidden_size: 64
    num_attention_heads: 4
    seq_length: 128
    save: "{{output_dir}}/checkpoints"
sweep:
  name_template: "gpt_{{index}}"
  axes: {{lr: {lrs}}}
slurm: {{use_srun: false, test_only: never}}
monitoring:
  class_name: LogMonitor
  termination_str: TRAINING DONE
  restart_backoff_seconds: 0
  poll_interval_seconds: 0.5
restart:
  policies:
    - {{class_name: AlwaysRestartPolicy, modes: [crash], max_retries: {retries}}}
"""


def _plan(root: Path, retries: int = 1, launcher: str = "[torchrun]", lrs: str = "[1.0e-4]") -> Any:
    path = root / "gpt.yaml"
    path.write_text(CONFIG.format(root=root, retries=retries, launcher=launcher, lrs=lrs))
    result = build_plan(load_config(str(path)).root)
    write_plan(result, test_only="never")
    return result


def _checkpoint(save: Path, tracker: str, folder: str | None) -> None:
    save.mkdir(parents=True, exist_ok=True)
    if folder is not None:
        (save / folder).mkdir()
    (save / "latest_checkpointed_iteration.txt").write_text(tracker + "\n")


def _drive(result: Any, on_first_start: Any) -> tuple[FakeSlurmClient, Any]:
    """Submit the plan; every attempt fails after 5 s; `on_first_start` runs as attempt 1 runs."""
    clock = FakeClock()

    def timeline(_request: SubmitRequest, _job_id: str, _attempt: int) -> Timeline:
        return Timeline(run_s=5, end_state="FAILED", exit_code=1, log_every_s=None)

    fake = FakeSlurmClient(clock, timeline)
    session = submit_plan(result.plan, result.config, fake, monitor=False)
    store = SessionStore(Path(result.plan.output_root) / "monitoring_state")
    controller = MonitorController(fake, store, [store.load(session.session_id)], clock=clock)
    on_first_start()
    for _ in range(20):
        if not controller.active:
            break
        clock.advance(3)
        controller.poll_once()
    assert not controller.active
    return fake, store.load(session.session_id)


def test_a_restart_after_a_checkpoint_runs_a_new_script_with_load(
    tmp_path: Path, megatron_importable: Path
) -> None:
    result = _plan(tmp_path, retries=1)
    job = result.plan.jobs[0]
    save = job.output_dir / "checkpoints"
    planned_text = job.script.read_text()
    fake, session = _drive(result, lambda: _checkpoint(save, "20", "iter_0000020"))

    scripts = [request.script for _, request in fake.submissions]
    assert len(scripts) == 2  # one restart: the policy's budget of 1, then failed
    assert scripts[0] == job.script
    assert scripts[1] == job.script.parent / "restarts" / f"{job.name}.restart1.sbatch"
    assert "--load" not in planned_text
    assert job.script.read_text() == planned_text  # the plan's script is never edited
    restart_text = scripts[1].read_text()
    assert f"--save={save} --load={save})" in restart_text  # the end of AUTOEXP_CMD=(...)
    assert f"#SBATCH --job-name={job.name}" in restart_text
    assert f"#SBATCH --output={job.log_path}" in restart_text
    record = session.jobs[job.job_id]
    assert record.state == "failed"
    assert record.restarts == {"crash": 1}
    assert record.outcome is not None and "retry budget spent" in record.outcome.decision
    assert record.script == str(scripts[1])


def test_without_a_complete_checkpoint_the_restart_reuses_the_planned_script(
    tmp_path: Path, megatron_importable: Path
) -> None:
    result = _plan(tmp_path, retries=1)
    job = result.plan.jobs[0]
    # The tracker names an iteration whose directory is not there (a save cut short).
    fake, _session = _drive(result, lambda: _checkpoint(job.output_dir / "checkpoints", "30", None))
    assert [request.script for _, request in fake.submissions] == [job.script, job.script]


@pytest.mark.parametrize(
    ("tracker", "folder", "expected"),
    [
        ("20", "iter_0000020", True),
        ("release", "release", True),
        ("20", None, False),
        ("garbage", None, False),
        (None, None, False),
    ],
)
def test_megatron_restart_overrides_follow_the_tracker_file(
    tmp_path: Path,
    megatron_importable: Path,
    tracker: str | None,
    folder: str | None,
    expected: bool,
) -> None:
    result = _plan(tmp_path)
    from oellm_autoexp.config.loader import parse_config

    job = result.plan.jobs[0]
    ctx = JobContext(job.job_id, job.name, job.index, job.params, job.output_dir, "gpt")
    backend = backend_for_job(parse_config(result.config).backend, ctx)
    save = job.output_dir / "checkpoints"
    if tracker is not None:
        _checkpoint(save, tracker, folder)
    overrides = backend.restart_overrides(ctx, {"mode": "crash"})
    assert overrides == ({"backend.megatron.load": str(save)} if expected else {})


def test_an_invalid_restart_command_stops_the_job_instead_of_restarting_from_scratch(
    tmp_path: Path, megatron_importable: Path
) -> None:
    result = _plan(tmp_path, retries=3)
    job = result.plan.jobs[0]
    # The session's config no longer validates (as if edited by hand): the restart with
    # --load cannot be built, and restarting without it could overwrite the checkpoint.
    result.config["backend"]["megatron"]["num_layers"] = "many"
    fake, session = _drive(
        result, lambda: _checkpoint(job.output_dir / "checkpoints", "7", "iter_0000007")
    )
    assert len(fake.submissions) == 1
    record = session.jobs[job.job_id]
    assert record.state == "failed"
    assert record.outcome is not None
    assert record.outcome.decision.startswith("restart command could not be built: ")
    assert "num_layers" in record.outcome.decision


def test_without_the_backend_where_the_monitor_runs_the_restart_is_as_planned(
    tmp_path: Path, megatron_importable: Path
) -> None:
    result = _plan(tmp_path, retries=1)
    job = result.plan.jobs[0]
    # As if the backend's plugin were installed only where the plan was made.
    result.config["backend"]["class_name"] = "PluginOnlyThereBackend"
    fake, session = _drive(
        result, lambda: _checkpoint(job.output_dir / "checkpoints", "7", "iter_0000007")
    )
    assert [request.script for _, request in fake.submissions] == [job.script, job.script]
    assert session.jobs[job.job_id].restarts == {"crash": 1}


# The "training" each array task runs on the real SLURM: without --load it saves a checkpoint the
# way Megatron-LM does (iteration directory, then the tracker file) and crashes; with --load it
# reports what it resumed from and finishes. No braces: launcher tokens are format templates.
FAKE_TRAINING = (
    'for a in "$@"; do case "$a" in '
    '--load=*) echo "resumed $a"; echo TRAINING DONE; exit 0;; '
    '--save=*) save=$(echo "$a" | cut -d= -f2-);; esac; done; '
    'mkdir -p "$save/iter_0000005"; echo 5 > "$save/latest_checkpointed_iteration.txt"; '
    "echo crashing; exit 3"
)


@pytest.mark.slurm
def test_array_tasks_restart_on_real_slurm_with_load_from_their_checkpoint(
    slurm_cluster: Any, tmp_path: Path, megatron_importable: Path
) -> None:
    launcher = f"[bash, -c, {json.dumps(FAKE_TRAINING)}]"
    result = _plan(tmp_path, retries=1, launcher=launcher, lrs="[1.0e-4, 2.0e-4]")
    assert len(result.plan.scripts) == 1 and result.plan.scripts[0].array_spec == "0-1"
    client = RealSlurmClient(env=slurm_cluster.env, retry=RetryPolicy(attempts=3, timeout_s=20))
    session = submit_plan(result.plan, result.config, client, monitor=False)
    store = SessionStore(tmp_path / "monitoring_state")
    controller = MonitorController(client, store, [store.load(session.session_id)])
    deadline = time.monotonic() + 120
    while controller.active:
        assert time.monotonic() < deadline, "jobs did not finish"
        controller.poll_once()
        time.sleep(0.5)
    saved = store.load(session.session_id)
    for job in result.plan.jobs:
        record = saved.jobs[job.job_id]
        assert record.state == "completed", record.outcome
        assert job.array is not None
        assert [a.mode for a in record.attempts] == ["crash", "success"]
        second = record.attempts[1].job_id
        assert second.endswith(f"_{job.array.task_index}")  # resubmitted as that array task
        log = resolve_log_path(record.log_path, second, record.slurm_name).read_text()
        assert f"resumed --load={job.output_dir / 'checkpoints'}" in log


def _megatron_gone(stand_in: Path) -> None:
    """From here on no `megatron` can be imported (as on a host without Megatron-LM)."""
    sys.path.remove(str(stand_in))
    clear_caches()
    for name in [n for n in sys.modules if n == "megatron" or n.startswith("megatron.")]:
        del sys.modules[name]


def test_a_restart_where_megatron_is_not_importable_uses_the_plans_schema(
    tmp_path: Path, megatron_importable: Path
) -> None:
    # Plan with Megatron's parser (inside the image) ...
    result = _plan(tmp_path, retries=1)
    job = result.plan.jobs[0]
    stored = result.plan.plan_dir / "megatron_schema.json"
    assert "Megatron-LM parser" in json.loads(stored.read_text())["origin"]
    # ... monitor where no megatron can be imported (the host).
    _megatron_gone(megatron_importable)
    with pytest.raises(ImportError):
        importlib.import_module("megatron.training.arguments")
    save = job.output_dir / "checkpoints"
    fake, session = _drive(result, lambda: _checkpoint(save, "20", "iter_0000020"))

    scripts = [request.script for _, request in fake.submissions]
    assert scripts == [job.script, job.script.parent / "restarts" / f"{job.name}.restart1.sbatch"]
    assert f"--save={save} --load={save})" in scripts[1].read_text()
    record = session.jobs[job.job_id]
    assert record.restarts == {"crash": 1}
    assert record.outcome is not None and "retry budget spent" in (record.outcome.decision or "")


def test_a_restart_without_a_stored_schema_and_without_megatron_is_not_made_from_scratch(
    tmp_path: Path, megatron_importable: Path
) -> None:
    # A plan directory from before schemas were kept: the monitor cannot validate --load, so
    # the job stops rather than restarting from scratch (the behaviour this fix replaces).
    result = _plan(tmp_path, retries=1)
    job = result.plan.jobs[0]
    (result.plan.plan_dir / "megatron_schema.json").unlink()
    _megatron_gone(megatron_importable)
    fake, session = _drive(
        result, lambda: _checkpoint(job.output_dir / "checkpoints", "20", "iter_0000020")
    )
    assert [request.script for _, request in fake.submissions] == [job.script]
    record = session.jobs[job.job_id]
    assert record.outcome is not None
    assert (record.outcome.decision or "").startswith("restart command could not be built")


def test_a_restart_script_keeps_short_and_flag_directives(
    tmp_path: Path, megatron_importable: Path
) -> None:
    path = tmp_path / "gpt.yaml"
    text = CONFIG.format(root=tmp_path, retries=1, launcher="[torchrun]", lrs="[1.0e-4]")
    path.write_text(
        text.replace(
            "slurm: {use_srun: false, test_only: never}",
            "slurm: {use_srun: false, test_only: never, extra_directives: ['-p debug'], "
            "sbatch: {exclusive: true, time: '00:10:00'}}",
        )
    )
    result = build_plan(load_config(str(path)).root)
    write_plan(result, test_only="never")
    job = result.plan.jobs[0]
    save = job.output_dir / "checkpoints"
    fake, _ = _drive(result, lambda: _checkpoint(save, "20", "iter_0000020"))
    restart = fake.submissions[1][1].script.read_text().splitlines()
    assert [line for line in restart if line.startswith("#SBATCH")][2:] == [
        "#SBATCH --exclusive",
        "#SBATCH --time=00:10:00",
        "#SBATCH -p debug",
    ]
