"""SLURM's ``--output`` filename patterns (``%A %a %j %x %%``) as the monitor resolves them.

The monitor knows a job by SLURM's display id: ``123`` for a single job, ``123_4`` for task 4 of
array 123. For an array task SLURM fills ``%j`` with the task's *own* job id (a number of its
own, assigned when the task is split off the array, not ``123``), so a log template with ``%j``
names a file the monitor cannot find from the display id. Such templates are refused where a
job record is made (`array_log_template_error`); array logs are named with ``%A_%a``.
"""

from __future__ import annotations

import re

# %j not preceded by another % (``%%j`` is a literal "%j").
_TASK_JOB_ID = re.compile(r"(?<!%)(?:%%)*%j")


def array_log_template_error(template: str) -> str | None:
    """Why `template` cannot name an array task's log, or None when it can."""
    if _TASK_JOB_ID.search(template):
        return (
            f"log path {template!r} uses %j, which SLURM fills with each array task's own job "
            "id (unknown to the monitor until the task runs); name array logs with %A_%a"
        )
    return None


def fill_log_pattern(template: str, job_id: str, slurm_name: str) -> str:
    """`template` filled in for display id `job_id` (``123`` or ``123_4``).

    Raises ValueError for ``%j`` with an array task id (see the module docstring).
    """
    if "%" not in template:
        return template
    base, _, task = job_id.partition("_")
    if task and "%j" in template and _TASK_JOB_ID.search(template):
        raise ValueError(array_log_template_error(template))
    text = template.replace("%%", "\0")
    for key, value in (("%A", base), ("%a", task), ("%j", base), ("%x", slurm_name)):
        text = text.replace(key, value)
    return text.replace("\0", "%")
