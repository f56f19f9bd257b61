"""Flag mode (`aorta triage run --mode matrix`): the recipe built from command-line axes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from aorta.registry.models import Environment
from aorta.runner.command.flags import spec_from_flags
from aorta.triage.analysis.adaptive_base import DEFAULT_ADAPTIVE_RULE
from aorta.triage.analysis.confound import DEFAULT_ALPHA, DEFAULT_CONFOUND_THRESHOLD
from aorta.triage.recipe.checks import (
    Where,
    adaptive_conflict,
    adaptive_rule_name,
    order_mode,
    positive_int,
    safe_name,
    string,
    ticket_name,
    valid_alpha,
    valid_threshold,
)
from aorta.triage.recipe.model import (
    DEFAULT_ORDER,
    IMAGE_PREFIX,
    SUPPORTED_SCHEMA_VERSIONS,
    AdaptiveSettings,
    Cell,
    ConfoundSettings,
    Recipe,
)
from aorta.triage.recipe.validation import (
    COMMAND_WORKLOAD,
    Registry,
    any_workload,
    build_cell,
    check_baseline,
    check_command_environment,
    check_unique,
    inline_environment,
    resolve_environment,
    resolve_mitigation,
)

__all__ = ["recipe_from_flags"]


def recipe_from_flags(
    *,
    workload: str | None,
    mitigation_axis: Sequence[str],
    environment_axis: Sequence[str],
    trials: int,
    steps: int,
    ticket: str | None = None,
    baseline_cell: str | None = None,
    confound_threshold: float = DEFAULT_CONFOUND_THRESHOLD,
    order: str = DEFAULT_ORDER,
    stop_after_failures: int | None = None,
    alpha: float = DEFAULT_ALPHA,
    command: Mapping[str, Any] | None = None,
    locate: bool = False,
    until_decided: bool = False,
    adaptive_rule: str | None = None,
) -> Recipe:
    """Build the in-memory recipe of `--mode matrix`: the full mitigation x environment product.

    Cells are named `<mitigation>-<environment>` in axis order (mitigation-major). An
    environment item `image:<ref>` is an inline docker environment named exactly like the
    recipe's `{docker: <ref>}` (`_inline_<blake2b8>`) and never touches the registry; a bare
    name must be registered. Default baseline: the (`none`, first environment) cell when `none`
    is on the mitigation axis, else the first cell. Errors name the flag, e.g.
    `--environment-axis[1]: unknown environment 'x' ...`. `order` is `--order`;
    `stop_after_failures` (`--stop-after-failures K`) stops each cell at K failed trials, with
    `trials` as the most it runs (`--max-trials N`); `locate` is `--locate`; `until_decided`
    (`--until-decided`) makes the run adaptive with `trials` as its `max_trials`, decided by
    `adaptive_rule` (`--adaptive-rule`; None: the default rule).

    `command` is a command workload mapping (`aorta.runner.command.flags.command_mapping`:
    the argv after `--` and the command flags) instead of a registered `workload`; exactly
    one of the two is given. Its errors name the flag (`--keep-logs: expected one of ...`).
    """
    where = Where(None)
    reg = Registry.load()
    if (workload is None) == (command is None):
        where.fail("--workload", "expected either --workload NAME or a command after --")
    if command is None:
        workload_name, source_package, spec = any_workload(where, "--workload", workload, reg)
    else:
        # Validated like a recipe's workload mapping; its errors name the flags.
        workload_name, source_package, spec = COMMAND_WORKLOAD, None, spec_from_flags(command)
    trials = positive_int(where, "--trials", trials)
    steps = positive_int(where, "--steps", steps)
    ticket = None if ticket is None else ticket_name(where, "--ticket", ticket)
    threshold = valid_threshold(where, "--confound-threshold", confound_threshold)
    order_value = order_mode(where, "--order", order)
    if stop_after_failures is not None:
        stop_after_failures = positive_int(where, "--stop-after-failures", stop_after_failures)
    alpha = valid_alpha(where, "--alpha", alpha)
    adaptive = _adaptive(where, trials, until_decided, adaptive_rule)
    conflict = adaptive_conflict(adaptive, order_value, stop_after_failures is not None, ())
    if conflict is not None:
        where.fail("--until-decided", conflict[1].replace("order: ", "--order "))

    if not mitigation_axis:
        where.fail("--mitigation-axis", "expected at least one mitigation name (e.g. none)")
    mitigations = [
        resolve_mitigation(where, f"--mitigation-axis[{i}]", item, reg)
        for i, item in enumerate(mitigation_axis)
    ]
    environments = _environment_axis(where, environment_axis, reg)
    check_unique(where, "--mitigation-axis", [m.name for m in mitigations])
    check_unique(where, "--environment-axis", [e.name for e in environments])

    cells: list[Cell] = []
    for i, mitigation in enumerate(mitigations):
        for environment in environments:
            name = f"{mitigation.name}-{environment.name}"
            safe_name(where, f"--mitigation-axis[{i}] (cell name)", name)
            cells.append(
                build_cell(
                    where,
                    name=name,
                    mitigations=[mitigation],
                    mitigations_path=f"--mitigation-axis[{i}]",
                    environment=environment,
                    extra_env={},
                    trials=trials,
                    steps=steps,
                    stop_after=stop_after_failures,
                )
            )

    for i, environment in enumerate(environments):
        check_command_environment(where, f"--environment-axis[{i}]", environment, spec is not None)
    if baseline_cell is not None:
        baseline = check_baseline(where, "--baseline-cell", baseline_cell, cells)
    elif "none" in [m.name for m in mitigations]:
        baseline = f"none-{environments[0].name}"
    else:
        baseline = cells[0].name

    return Recipe(
        schema_version=SUPPORTED_SCHEMA_VERSIONS[-1],
        ticket=ticket,
        workload=workload_name,
        trials=trials,
        steps=steps,
        confound=ConfoundSettings(threshold=threshold, baseline_cell=baseline_cell, alpha=alpha),
        cells=tuple(cells),
        baseline=baseline,
        source=None,
        sha256=None,
        workload_source_package=source_package,
        command=spec,
        order=order_value,
        locate=locate,
        adaptive=adaptive,
    )


def _adaptive(
    where: Where, trials: int, until_decided: bool, rule: str | None
) -> AdaptiveSettings | None:
    """`--until-decided [--adaptive-rule R]` -> the adaptive settings (None: not adaptive)."""
    if rule is not None and not until_decided:
        where.fail("--adaptive-rule", "only with --until-decided (an adaptive run)")
    if not until_decided:
        return None
    if rule is None:
        return AdaptiveSettings(trials, DEFAULT_ADAPTIVE_RULE)
    return AdaptiveSettings(trials, adaptive_rule_name(where, "--adaptive-rule", rule))


def _environment_axis(where: Where, axis: Sequence[str], reg: Registry) -> list[Environment]:
    """`--environment-axis`: registered names, or `image:<ref>` inline docker environments."""
    if not axis:
        where.fail("--environment-axis", "expected at least one environment (e.g. local)")
    environments: list[Environment] = []
    for i, item in enumerate(axis):
        item_path = f"--environment-axis[{i}]"
        text = string(where, item_path, item)
        if text.startswith(IMAGE_PREFIX):
            environments.append(inline_environment(where, item_path, text[len(IMAGE_PREFIX) :]))
        else:
            environments.append(resolve_environment(where, item_path, text, reg))
    return environments
