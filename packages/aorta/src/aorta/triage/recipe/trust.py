"""What a recipe read back from a run directory would execute that this machine does not vouch for.

A run directory (or its `recipe.resolved.yaml`) may come from someone else. Validation keeps
its names and values well-formed; this module answers the other question: does resuming or
re-running it execute anything new? It does when a cell

- runs in a venv interpreter or docker image that this machine's registry does not list under
  the same name (inline docker images always count: the image comes from the file),
- applies a mitigation whose variables differ from this machine's mitigation of that name (or
  one this machine does not know), or
- sets a variable that neither this machine's registry nor the short read-back allowlist
  vouches for (`env_allowlist`: an allowlist, since a denylist of `LD_PRELOAD`-like variables
  always misses one);

and always when the workload is a command (`workload: {command: ...}`): the command in the
file is what every trial runs, and no registry vouches for it.

The SLURM executor's setup lines, launcher and extra `#SBATCH` lines count too: they are shell
that every trial task runs.

The caller refuses such a recipe unless the user passed `--trust-environments`, and its message
lists what would run. Resuming a run this user started, whose recipe is unchanged since, needs
no flag: `signature` proves both (`check_run_trust`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from aorta.instrumentation.redaction import redact_value
from aorta.registry.models import Environment, Mitigation
from aorta.strict_modes import SharedStateError, refuse_shared_state
from aorta.triage.errors import UntrustedRecipeError
from aorta.triage.recipe.env_allowlist import is_vouched_variable
from aorta.triage.recipe.model import Cell, Recipe
from aorta.triage.recipe.signature import signed_by_this_user

__all__ = [
    "check_recipe_file_trust",
    "check_run_trust",
    "check_trust",
    "resume_needs_trust",
    "untrusted_actions",
]


def _environment_action(cell: Cell, registered: Mapping[str, Environment]) -> str | None:
    env = cell.environment
    if env.kind == "local":
        return None
    known = registered.get(env.name)
    same = (
        known is not None
        and known.kind == env.kind
        and known.python == env.python
        and known.image == env.image
        and dict(known.env) == dict(env.env)
    )
    if same:
        return None
    what = f"interpreter {env.python}" if env.kind == "venv" else f"docker image {env.image}"
    return f"cell {cell.name}: environment {env.name} runs {what}"


def _mitigation_actions(cell: Cell, registered: Mapping[str, Mitigation]) -> list[str]:
    actions = []
    for mitigation in cell.mitigation_entries:
        known = registered.get(mitigation.name)
        if known is None or dict(known.env) != dict(mitigation.env):
            here = "unknown here" if known is None else f"here: {dict(known.env)}"
            actions.append(
                f"cell {cell.name}: mitigation {mitigation.name} sets {dict(mitigation.env)} "
                f"({here})"
            )
    return actions


def _variable_actions(cell: Cell, bundles: list[Mapping[str, str]]) -> list[str]:
    """Each variable the cell sets that neither the registry nor the allowlist vouches for
    (`env_allowlist`); its value redacted, as this line is printed."""
    merged = {**cell.environment.env, **cell.env}
    return [
        f"cell {cell.name}: sets {key}={redact_value(key, merged[key])!r} "
        "(not set so by this machine's registry, not in the read-back allowlist)"
        for key in sorted(merged)
        if not is_vouched_variable(key, merged[key], bundles)
    ]


def _executor_actions(recipe: Recipe) -> list[str]:
    """The SLURM executor's shell: setup lines, a launcher prefix and extra #SBATCH lines."""
    settings = recipe.executor
    if settings is None:
        return []
    actions = [f"SLURM setup runs {line!r}" for line in settings.setup]
    if settings.launcher:
        actions.append(f"SLURM trials start under the launcher {settings.launcher!r}")
    actions.extend(f"SLURM script has #SBATCH {line}" for line in settings.sbatch_extra)
    return actions


def untrusted_actions(
    recipe: Recipe,
    environments: Mapping[str, Environment],
    mitigations: Mapping[str, Mitigation],
) -> list[str]:
    """One line per thing `recipe` would execute that the given registry does not vouch for."""
    actions: list[str] = []
    bundles = [m.env for m in mitigations.values()] + [e.env for e in environments.values()]
    if recipe.command is not None:
        shown = " ".join(recipe.command.command)
        actions.append(f"workload runs the command {shown!r} (cells may append command_args)")
    for cell in recipe.cells:
        environment = _environment_action(cell, environments)
        if environment:
            actions.append(environment)
        actions.extend(_mitigation_actions(cell, mitigations))
        actions.extend(_variable_actions(cell, bundles))
    actions.extend(_executor_actions(recipe))
    return actions


# What a resume reads back that decides what runs (`strict_modes`).
STEERING_FILES = ("recipe.resolved.yaml", "recipe.resolved.sig", "run.json")
STEERING_TREES = ("slurm",)


def check_run_trust(
    recipe: Recipe,
    run_dir: Path,
    recipe_sha256: str,
    *,
    label: str,
    trusted: bool,
    allow_shared_writable: bool = False,
) -> list[str]:
    """`check_trust` for the recipe of a run directory being resumed: nothing needs vouching
    for when this user started the run from these very bytes (`signature`).

    First, unless `allow_shared_writable`, the run directory and the state in it that steers
    execution must be this user's and writable by no one else (`strict_modes`, exit 2).
    """
    if not allow_shared_writable:
        refuse_shared_state(run_dir, STEERING_FILES, STEERING_TREES)
    if signed_by_this_user(run_dir, recipe_sha256):
        return []
    return check_trust(recipe, label=label, trusted=trusted)


def check_recipe_file_trust(recipe: Recipe, path: Path, *, trusted: bool) -> list[str]:
    """`check_trust` for `--recipe` of a resolved recipe: nothing needs vouching for when it is
    the `recipe.resolved.yaml` of a run this user signed, unchanged (`recipe.sha256`: the bytes
    parsed), in a run directory no one else can write (else the signature proves nothing)."""
    if path.name == STEERING_FILES[0] and recipe.sha256 is not None:
        try:
            refuse_shared_state(path.parent, STEERING_FILES, ())
        except SharedStateError:
            pass
        else:
            if signed_by_this_user(path.parent, recipe.sha256):
                return []
    return check_trust(recipe, label=str(path), trusted=trusted)


def resume_needs_trust(recipe: Recipe, run_dir: Path, recipe_sha256: str) -> bool:
    """Whether resuming `run_dir` needs `--trust-environments` (see `check_run_trust`)."""
    if signed_by_this_user(run_dir, recipe_sha256):
        return False
    from aorta.registry.loader import load_environments, load_mitigations

    return bool(untrusted_actions(recipe, load_environments(), load_mitigations()))


def check_trust(recipe: Recipe, *, label: str, trusted: bool) -> list[str]:
    """Refuse (`UntrustedRecipeError`) a read-back `recipe` that would execute something new.

    With `trusted` (the user passed `--trust-environments`) the actions are returned instead,
    for the caller to report what it is about to run.
    """
    from aorta.registry.loader import load_environments, load_mitigations

    actions = untrusted_actions(recipe, load_environments(), load_mitigations())
    if actions and not trusted:
        raise UntrustedRecipeError(
            f"{label}: would run what this machine's registry does not vouch for: "
            f"{'; '.join(actions)}; check it, then pass --trust-environments to run it"
        )
    return actions
