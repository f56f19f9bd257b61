"""One SLURM array task: `python -m aorta.triage.slurm.task RUN_DIR SUBMISSION TASK`.

The task looks up its (cell, trial) in the submission's task table and runs that trial as a
local run would: the request comes from `aorta.triage.run.local.cell_request` (same ids,
seeds, variables), and `open_trials(...).run(trial)` runs it in this process (a child only
where a local run would start one: process-scoped mitigations, non-local environments; the
command of a command workload) and writes `cells/<cell>/trial_<id>.json`.

Exit 0 with the `RECORDED` line means the trial is final: its JSON is on disk (or the cell's
stop rule was met before it started, so it is not run, as locally). The line is what
oellm-autoexp's monitor reads as the task's completion marker; a task that ends without it
(killed, node lost, time limit, no JSON) is a SLURM-side loss its restart policy resubmits.
A task restarted after its trial was written exits at once: no trial ever runs twice.
"""

from __future__ import annotations

import sys
from pathlib import Path

from aorta.triage.slurm.state import record_attempt
from toolkit_core.errors import ToolkitError

# The completion marker (oellm-autoexp `monitoring.termination_str`).
RECORDED = "aorta-triage: trial recorded"


def _run(run_dir: Path, number: int, index: int) -> str:
    """Run (or skip) the task's trial; the note for the attempts ledger."""
    from aorta.runner.trials import open_trials
    from aorta.triage.run.assemble import stop_rule_met
    from aorta.triage.run.local import cell_request
    from aorta.triage.run.rundir import load_run_recipe, trials_on_disk
    from aorta.triage.slurm.state import load_state
    from aorta.triage.slurm.trials import write_lost_trial

    recipe = load_run_recipe(run_dir)
    state = load_state(run_dir, {cell.name: cell.trials for cell in recipe.cells})
    submission = next(s for s in state.submissions if s.number == number)
    cell_name, trial_id = submission.tasks[index]
    cell = recipe.cell(cell_name)
    # The task is itself a fresh interpreter that has imported no GPU runtime yet: the trial
    # runs in it, as a local run's would in its own process (issue 26: one interpreter start-up
    # per task, not the task's plus a child's). Trials whose mitigations need a process of
    # their own, and other environments, still get one (`open_trials` decides, as locally).
    request = cell_request(recipe, run_dir, cell, [trial_id], fresh_process=False)
    if request.trial_path(trial_id).exists():
        record_attempt(run_dir, cell_name, trial_id, ran=False, note="already recorded")
        return "already recorded"
    if stop_rule_met(cell, trials_on_disk(run_dir, cell)):
        record_attempt(run_dir, cell_name, trial_id, ran=False, note="stop rule met")
        return "not run: the cell's stop rule was met"
    record_attempt(run_dir, cell_name, trial_id, ran=True, note="running")
    try:
        session = open_trials(request)
    except ToolkitError as exc:  # the environment cannot run here: an error trial, final
        write_lost_trial(recipe, run_dir, cell, trial_id, f"could not start: {exc}")
        return "error: could not start"
    result = session.run(trial_id)
    return result.outcome


def main(argv: list[str]) -> int:
    """Run the task; exit 0 with the marker once the trial is final."""
    run_dir, number, index = Path(argv[0]), int(argv[1]), int(argv[2])
    note = _run(run_dir, number, index)
    print(f"aorta-triage: task {number}/{index}: {note}", flush=True)
    print(RECORDED, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
