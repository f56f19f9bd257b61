"""Static checks on rendered SBATCH scripts, plus `sbatch --test-only` where sbatch exists.

What sbatch itself would not tell us: a `#SBATCH` line after the first command is silently
ignored by sbatch, so a directive there is an error here; the job name and array spec must be
exactly what the plan recorded; `bash -n` must accept the script.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from oellm_autoexp.errors import AutoexpRunError, ConfigError
from oellm_autoexp.slurm.render import DIRECTIVE_OPTION

_DIRECTIVE = re.compile(rf"#SBATCH\s+(?P<opt>{DIRECTIVE_OPTION})\s*")
TEST_ONLY_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class ScriptIssue:
    """A problem found in a rendered script, with its line number (1-based)."""

    line: int
    message: str


def lint_script(text: str, *, job_name: str, array_spec: str | None) -> list[ScriptIssue]:
    """Problems in a rendered script (empty list when it is fine)."""
    issues: list[ScriptIssue] = []
    # Lines as bash and sbatch see them: split at "\n" only (str.splitlines would also split at
    # \x0b, \x1c, U+2028, ... inside a quoted value, which are ordinary characters to bash).
    lines = text.removesuffix("\n").split("\n")
    if not lines or not lines[0].startswith("#!"):
        issues.append(ScriptIssue(1, "first line is not a #! interpreter line"))
    names: list[tuple[int, str]] = []
    arrays: list[tuple[int, str]] = []
    body_start = len(lines)  # the line number of the first command, once found
    for number, line in enumerate(lines, start=1):
        stripped = line.strip()
        if stripped.startswith("#SBATCH"):
            match = _DIRECTIVE.fullmatch(stripped)
            if not match:
                issues.append(ScriptIssue(number, f"malformed directive {stripped!r}"))
                continue
            option = match["opt"]
            if option.startswith("--job-name="):
                names.append((number, option.split("=", 1)[1]))
            elif option.startswith("--array="):
                arrays.append((number, option.split("=", 1)[1]))
        elif stripped and not stripped.startswith("#") and number > 1:
            body_start = number
            break
    issues.extend(_stray_directives(lines, body_start))
    if len(names) != 1:
        issues.append(ScriptIssue(1, f"expected one #SBATCH --job-name, found {len(names)}"))
    elif names[0][1] != job_name:
        issues.append(
            ScriptIssue(names[0][0], f"--job-name={names[0][1]} but the plan says {job_name}")
        )
    if array_spec is None and arrays:
        issues.append(ScriptIssue(arrays[0][0], "--array in a single-job script"))
    if array_spec is not None and [a for _, a in arrays] != [array_spec]:
        issues.append(ScriptIssue(1, f"expected one #SBATCH --array={array_spec}"))
    return issues


def _stray_directives(lines: list[str], body_start: int) -> list[ScriptIssue]:
    """#SBATCH lines below the first command (line `body_start`), which sbatch ignores.

    Below it lie an array's thousand tasks: a substring test picks the few candidate lines
    without stripping every line.
    """
    return [
        ScriptIssue(number, "#SBATCH after the first command is ignored by sbatch")
        for number, line in enumerate(lines[body_start:], start=body_start + 1)
        if "#SBATCH" in line and line.strip().startswith("#SBATCH")
    ]


def check_script(path: Path, text: str, *, job_name: str, array_spec: str | None) -> None:
    """Raise ConfigError for the first static problem in the script at `path`."""
    issues = lint_script(text, job_name=job_name, array_spec=array_spec)
    if issues:
        first = issues[0]
        raise ConfigError(
            f"rendered script is invalid: {first.message}", file=f"{path}:{first.line}"
        )


def bash_syntax_check(paths: Sequence[Path]) -> None:
    """`bash -n` on each script (skipped when bash is missing); a failure is a template bug."""
    bash = shutil.which("bash")
    if bash is None:
        return
    for path in paths:
        done = subprocess.run(
            [bash, "-n", str(path)], capture_output=True, text=True, check=False, timeout=30
        )
        if done.returncode != 0:
            detail = (done.stderr.strip().splitlines() or ["syntax error"])[0]
            raise ConfigError(f"bash -n rejects the rendered script: {detail}", file=path)


def sbatch_available(submit_cmd: str = "sbatch") -> str | None:
    """Path of the sbatch executable that `submit_cmd` names, if it is on PATH."""
    import shlex

    tokens = shlex.split(submit_cmd)
    return shutil.which(tokens[0]) if tokens else None


def sbatch_test_only(path: Path, *, submit_cmd: str = "sbatch") -> str:
    """Run `sbatch --test-only` on `path`; return its message, raise if SLURM rejects the script.

    SLURM's verdict on a well-formed script is about the cluster (partition, limits), so a
    rejection is a run error naming the script and the first line of sbatch's answer.
    """
    import shlex

    argv = [*shlex.split(submit_cmd), "--test-only", str(path)]
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, check=False, timeout=TEST_ONLY_TIMEOUT_S
        )
    except subprocess.TimeoutExpired:
        raise AutoexpRunError(
            f"{path}: sbatch --test-only gave no answer within {TEST_ONLY_TIMEOUT_S:.0f} s"
        ) from None
    answer = (done.stderr or done.stdout).strip()
    if done.returncode != 0:
        unreachable = no_controller(answer)
        if unreachable is not None:
            raise AutoexpRunError(
                f"{path}: sbatch --test-only: no SLURM controller answered ({unreachable}); "
                "the script was not checked by SLURM"
            )
        first = answer.splitlines()[0] if answer else f"exit status {done.returncode}"
        raise AutoexpRunError(f"{path}: sbatch --test-only rejected the script: {first}")
    return answer


# What SLURM's commands print when they reach no slurmctld (no slurm.conf, no DNS SRV record,
# controller down or unreachable): the cluster's fault, not the script's.
_NO_CONTROLLER = (
    "Unable to contact slurm controller",
    "Could not establish a configuration source",
    "Unable to process configuration file",
    "Unknown host",
    "Connection refused",
    "Socket timed out",
    "Zero Bytes were transmitted or received",
)


def no_controller(answer: str) -> str | None:
    """The line of a SLURM command's stderr that says no controller answered, if one does."""
    lines = answer.splitlines()
    for marker in _NO_CONTROLLER:
        for line in lines:
            if marker in line:
                return line.strip()
    return None
