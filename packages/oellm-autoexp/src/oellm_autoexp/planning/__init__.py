"""Planning: config -> sweep points -> JobPlans (through the backend registry) -> scripts.

Three jobs, one module each: `preflight` (plan-time checks of the config), `build` (pure: every
job, script, path and command, decided one script at a time) and `write` (the I/O shell: the
artifacts under ``<output_root>/plans/<plan_id>/``, written atomically, and the script checks:
static lint, `bash -n`, `sbatch --test-only` where sbatch exists). `contexts` turns the sweep
into jobs lazily. Nothing here submits.
"""

from oellm_autoexp.planning.build import (
    PlanResult,
    PlanStream,
    ScriptChunk,
    build_plan,
    output_root,
    plan_stream,
)
from oellm_autoexp.planning.preflight import with_triage_templates
from oellm_autoexp.planning.write import WrittenPlan, write_plan, write_stream

__all__ = [
    "PlanResult",
    "PlanStream",
    "ScriptChunk",
    "WrittenPlan",
    "build_plan",
    "output_root",
    "plan_stream",
    "with_triage_templates",
    "write_plan",
    "write_stream",
]
