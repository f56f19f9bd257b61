"""Validation and name resolution of recipe data, shared by file loading and flag mode.

Every check raises a one-line error `<file>: <key path>: expected ..., got ...` through a
`Where` (a recipe file, or flags with the flag name as the key path). Both `loading` and
`flags` resolve names through the helpers here, so the two modes cannot drift apart.
"""

from __future__ import annotations

import dataclasses
import importlib.util
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aorta.errors import (
    UnknownEnvironmentError,
    UnknownMitigationError,
    UnknownWorkloadError,
)
from aorta.registry.loader import load_environments, load_mitigations, load_workloads
from aorta.registry.models import Environment, Mitigation, Workload, check_env_var_name
from aorta.runner.environ import MitigationConflictError, merge_env
from aorta.triage.analysis.confound import (
    DEFAULT_ALPHA,
    DEFAULT_CONFOUND_THRESHOLD,
)
from aorta.triage.errors import RecipeSchemaError
from aorta.triage.names import (
    image_ref_problem,
    inline_environment_name,
)
from aorta.triage.recipe.checks import (
    Problems,
    Where,
    boolean,
    check_keys,
    join_path,
    order_mode,
    order_seed,
    positive_int,
    require,
    safe_name,
    stop_after_failures,
    string,
    ticket_name,
    valid_alpha,
    valid_threshold,
)
from aorta.triage.recipe.executor import executor_from_data
from aorta.triage.recipe.fields import CELL_FIELDS, CONFOUND_FIELDS, TOP_FIELDS, keys
from aorta.triage.recipe.model import (
    DEFAULT_ORDER,
    INLINE_SOURCE_PACKAGE,
    SUPPORTED_SCHEMA_VERSIONS,
    Cell,
    ConfoundSettings,
    Order,
    Recipe,
)

if TYPE_CHECKING:
    from aorta.runner.command.spec import CommandSpec

# Known keys, derived from the one declaration of the recipe's fields.
_TOP_KEYS = keys(TOP_FIELDS, "file")
_CONFOUND_KEYS = keys(CONFOUND_FIELDS, "file")
_CELL_KEYS = keys(CELL_FIELDS, "file")
# The workload name of a command workload (in run directories and trial JSONs).
COMMAND_WORKLOAD = "command"
_INLINE_ENV_KEYS = ("docker",)


@dataclass(frozen=True)
class Registry:
    """One snapshot of the registry per recipe: entry points are read once, not per cell."""

    mitigations: Mapping[str, Mitigation]
    environments: Mapping[str, Environment]
    workloads: Mapping[str, Workload]

    @classmethod
    def load(cls) -> Registry:
        return cls(load_mitigations(), load_environments(), load_workloads())


def resolve_workload(where: Where, path: str, value: object, reg: Registry) -> Workload:
    """The registered workload named `value`."""
    name = string(where, path, value)
    if name not in reg.workloads:
        where.unknown(UnknownWorkloadError, path, name, list(reg.workloads))
    safe_name(where, path, name)
    return reg.workloads[name]


def command_workload(where: Where, path: str, value: Mapping[str, Any]) -> CommandSpec:
    """A `workload: {command: [...], ...}` mapping, validated (see aorta.runner.command.spec)."""
    from aorta.runner.command.spec import CommandSpecError, parse_command_spec

    try:
        return parse_command_spec(value, where=path)
    except CommandSpecError as exc:
        raise RecipeSchemaError(where.at(str(exc))) from None


def any_workload(
    where: Where, path: str, value: object, reg: Registry
) -> tuple[str, str | None, CommandSpec | None]:
    """(name, source package, command) of a registered workload name or a command mapping."""
    if isinstance(value, Mapping):
        return COMMAND_WORKLOAD, None, command_workload(where, path, value)
    workload = resolve_workload(where, path, value, reg)
    return workload.name, workload.source_package, None


def command_args(where: Where, path: str, value: object, is_command: bool) -> tuple[str, ...]:
    """A cell's `command_args`: strings with known placeholders, for a command workload only.

    `is_command`: the workload is a command mapping, valid or not (a mistake in it is
    reported once, at the workload, not again as a false error in every cell).
    """
    from aorta.runner.command.spec import CommandSpecError, check_placeholders

    if not is_command:
        where.fail(path, "expected no command_args: the workload is not a command", value)
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        where.fail(path, "expected a list of strings (arguments appended to the command)", value)
    try:
        check_placeholders(value, path)
    except CommandSpecError as exc:
        raise RecipeSchemaError(where.at(str(exc))) from None
    return tuple(value)


def check_command_environment(
    where: Where, path: str, environment: Environment, is_command: bool
) -> None:
    """Command workloads run locally: a docker or venv environment is refused."""
    if is_command and environment.kind != "local":
        where.fail(
            path,
            "expected a local environment: a command workload runs on this machine "
            "(put docker or a venv's python in the command itself)",
            environment.name,
        )


def resolve_mitigation(where: Where, path: str, value: object, reg: Registry) -> Mitigation:
    """The registered mitigation named `value`."""
    name = string(where, path, value)
    if name not in reg.mitigations:
        where.unknown(UnknownMitigationError, path, name, list(reg.mitigations))
    return reg.mitigations[name]


def inline_environment(where: Where, path: str, ref: object) -> Environment:
    """The inline docker environment of image `ref`, auto-named `_inline_<hash>`."""
    image = string(where, path, ref)
    problem = image_ref_problem(image)
    if problem:
        where.fail(path, problem, image)
    return Environment(
        name=inline_environment_name(image),
        kind="docker",
        image=image,
        description=f"inline docker environment for {image}",
        source_package=INLINE_SOURCE_PACKAGE,
    )


def resolve_environment(where: Where, path: str, value: object, reg: Registry) -> Environment:
    """A registered environment name, or an inline `{docker: <ref>}` mapping."""
    if isinstance(value, Mapping):
        check_keys(where, path, value, _INLINE_ENV_KEYS, "an inline environment")
        return inline_environment(
            where, join_path(path, "docker"), require(where, path, value, "docker")
        )
    if not isinstance(value, str):
        where.fail(path, "expected an environment name or a mapping {docker: <image-ref>}", value)
    if value not in reg.environments:
        where.unknown(UnknownEnvironmentError, path, value, list(reg.environments))
    return reg.environments[value]


def extra_env_mapping(where: Where, path: str, value: object) -> dict[str, str]:
    """A cell's `extra_env`: valid variable names, string values without NUL."""
    if not isinstance(value, Mapping):
        where.fail(path, "expected a mapping {VARIABLE: 'value'}", value)
    result: dict[str, str] = {}
    for key, item in value.items():
        key_path = join_path(path, str(key))
        if not isinstance(key, str):
            where.fail(key_path, "expected a variable name string", key)
        try:
            check_env_var_name(key)
        except ValueError:
            where.fail(key_path, "expected a variable name matching [A-Za-z_][A-Za-z0-9_]*", key)
        if not isinstance(item, str):
            where.fail(key_path, "expected a string value (quote it in YAML)", item)
        if "\x00" in item:
            where.fail(key_path, "expected a value without NUL characters", item)
        result[key] = item
    return result


def build_cell(
    where: Where,
    *,
    name: str,
    mitigations: Sequence[Mitigation],
    mitigations_path: str,
    environment: Environment,
    extra_env: Mapping[str, str],
    trials: int,
    steps: int,
    stop_after: int | None = None,
) -> Cell:
    """A `Cell` with the mitigations' env bundles merged (a key collision is a cell error)."""
    try:
        env = merge_env(mitigations, extra_env)
    except MitigationConflictError as exc:
        where.fail(mitigations_path, f"conflicting mitigations: {exc}", cell=True)
    return Cell(
        name=name,
        mitigations=tuple(m.name for m in mitigations),
        environment=environment,
        extra_env=extra_env,
        trials=trials,
        steps=steps,
        env=env,
        mitigation_entries=tuple(mitigations),
        stop_after_failures=stop_after,
    )


def _cell_from_data(
    where: Where,
    problems: Problems,
    index: int,
    data: object,
    reg: Registry,
    trials: int,
    steps: int,
    stop_after: int | None,
    is_command: bool,
) -> Cell | None:
    """The cell at `cells[index]`, or None after recording each of its problems."""
    path = f"cells[{index}]"
    if not isinstance(data, Mapping):
        problems.attempt(
            lambda: where.fail(
                path, "expected a mapping with keys name, mitigations, environment", data
            )
        )
        return None
    before = len(problems.found)
    problems.attempt(lambda: check_keys(where, path, data, _CELL_KEYS, "a cell"))
    name = problems.attempt(
        lambda: safe_name(where, join_path(path, "name"), require(where, path, data, "name"))
    )
    mit_path = join_path(path, "mitigations")
    raw = problems.attempt(lambda: _mitigation_list(where, mit_path, data))
    mitigations: list[Mitigation] = []
    for i, item in enumerate(raw or ()):
        item_path = f"{mit_path}[{i}]"
        mitigation = problems.attempt(partial(resolve_mitigation, where, item_path, item, reg))
        if mitigation is None:
            continue
        if any(m.name == mitigation.name for m in mitigations):
            problems.attempt(
                partial(where.fail, item_path, "expected each mitigation once per cell", item)
            )
            continue
        mitigations.append(mitigation)
    environment = problems.attempt(
        lambda: resolve_environment(
            where, join_path(path, "environment"), require(where, path, data, "environment"), reg
        )
    )
    extra = problems.attempt(
        lambda: extra_env_mapping(where, join_path(path, "extra_env"), data.get("extra_env", {}))
    )
    if "trials" in data:
        trials = (
            problems.attempt(lambda: positive_int(where, join_path(path, "trials"), data["trials"]))
            or trials
        )
    if "steps" in data:
        steps = (
            problems.attempt(lambda: positive_int(where, join_path(path, "steps"), data["steps"]))
            or steps
        )
    if "stop_after" in data:
        stop_after = problems.attempt(
            lambda: stop_after_failures(where, join_path(path, "stop_after"), data["stop_after"])
        )
    if len(problems.found) > before or name is None or environment is None or extra is None:
        return None
    cell = problems.attempt(
        lambda: build_cell(
            where,
            name=name,
            mitigations=mitigations,
            mitigations_path=mit_path,
            environment=environment,
            extra_env=extra,
            trials=trials,
            steps=steps,
            stop_after=stop_after,
        )
    )
    if cell is None or "command_args" not in data:
        return cell
    args = problems.attempt(
        lambda: command_args(
            where, join_path(path, "command_args"), data["command_args"], is_command
        )
    )
    return None if args is None else dataclasses.replace(cell, command_args=args)


def _mitigation_list(where: Where, path: str, data: Mapping[Any, Any]) -> list[object]:
    raw = require(where, path.rsplit(".", 1)[0], data, "mitigations")
    if not isinstance(raw, list) or not raw:
        where.fail(path, "expected a non-empty list of mitigation names (use [none])", raw)
    return raw


def _default_baseline(cells: Sequence[Cell]) -> str | None:
    """Recipe-mode default: first `baseline-*` cell, else first `[none]` cell, else the only
    cell; None when none of these applies (the caller reports it)."""
    for cell in cells:
        if cell.name.startswith("baseline-"):
            return cell.name
    for cell in cells:
        if cell.mitigations == ("none",):
            return cell.name
    return cells[0].name if len(cells) == 1 else None


def check_baseline(where: Where, path: str, value: object, cells: Sequence[Cell]) -> str:
    """`value` if it names one of `cells`."""
    name = string(where, path, value)
    names = [cell.name for cell in cells]
    if name not in names:
        where.fail(path, f"expected the name of a cell ({', '.join(names)})", name)
    return name


def schema_version(where: Where, value: object) -> int:
    """`value` if it is a supported `schema_version`."""
    supported = ", ".join(str(v) for v in SUPPORTED_SCHEMA_VERSIONS)
    if isinstance(value, bool) or not isinstance(value, int):
        where.fail("schema_version", f"expected an integer (supported: {supported})", value)
    if value not in SUPPORTED_SCHEMA_VERSIONS:
        where.fail("schema_version", f"unsupported version (supported: {supported})", value)
    return value


def check_unique(where: Where, path: str, names: Sequence[str]) -> None:
    """Refuse a value given twice on one axis."""
    seen: set[str] = set()
    for i, name in enumerate(names):
        if name in seen:
            where.fail(f"{path}[{i}]", "expected each value once (duplicate)", name)
        seen.add(name)


def _confound(where: Where, value: object) -> tuple[Mapping[Any, Any], float, float]:
    """The `confound` mapping (empty when absent), its validated threshold and alpha."""
    if value is None:
        return {}, DEFAULT_CONFOUND_THRESHOLD, DEFAULT_ALPHA
    if not isinstance(value, Mapping):
        where.fail("confound", f"expected a mapping with keys {', '.join(_CONFOUND_KEYS)}", value)
    check_keys(where, "confound", value, _CONFOUND_KEYS, "confound")
    threshold = DEFAULT_CONFOUND_THRESHOLD
    if value.get("threshold") is not None:
        threshold = valid_threshold(where, "confound.threshold", value["threshold"])
    alpha = DEFAULT_ALPHA
    if value.get("alpha") is not None:
        alpha = valid_alpha(where, "confound.alpha", value["alpha"])
    return value, threshold, alpha


def invariance_installed() -> bool:
    """Whether the optional triton-invariance package (`aorta[invariance]`) is importable."""
    return importlib.util.find_spec("triton_invariance") is not None


def _fingerprint_kernels(where: Where, value: object, is_command: bool) -> bool:
    """The `fingerprint_kernels` flag: a boolean; true only with the extra installed and a
    registered workload."""
    value = boolean(where, "fingerprint_kernels", value)
    if value and is_command:
        # aorta cannot look inside a command's processes: the column would claim "0 changed"
        # without having seen a single kernel.
        where.fail(
            "fingerprint_kernels",
            "not available for command workloads (aorta cannot see the kernels a command "
            "compiles); use a registered workload",
        )
    if value and not invariance_installed():
        where.fail(
            "fingerprint_kernels",
            "true needs the triton-invariance package: pip install 'aorta[invariance]'",
        )
    return value


def _cell_list(where: Where, data: Mapping[Any, Any]) -> list[object]:
    raw = require(where, "", data, "cells")
    if not isinstance(raw, list) or not raw:
        where.fail("cells", "expected a non-empty list of cells", raw)
    return raw


def _unique_cells(
    where: Where,
    problems: Problems,
    cells_raw: Sequence[object],
    make: Callable[[int, object], Cell | None],
) -> list[Cell]:
    """The valid cells of `cells_raw` (built by `make`), recording a problem for each repeated
    name. A set of names seen, not a scan of the cells so far: 30,000 cells stay linear."""
    cells: list[Cell] = []
    seen: set[str] = set()
    for index, item in enumerate(cells_raw):
        cell = make(index, item)
        if cell is None:
            continue
        if cell.name in seen:
            name_path = f"cells[{index}].name"
            problems.attempt(
                partial(where.fail, name_path, "expected a unique cell name", cell.name)
            )
            continue
        seen.add(cell.name)
        cells.append(cell)
    return cells


def recipe_from_data(where: Where, data: object, *, source: Path, sha256: str) -> Recipe:
    """Validate and resolve a parsed recipe mapping into a `Recipe`.

    Independent problems are all reported at once (`RecipeProblemsError`, one line each); a single
    problem raises its own error type (e.g. `UnknownMitigationError`).
    """
    if not isinstance(data, Mapping):
        where.fail("(top level)", "expected a mapping of recipe keys", data)
    # Fatal on its own: against another schema version every other finding could be wrong.
    version = schema_version(where, require(where, "", data, "schema_version"))
    problems = Problems()
    problems.attempt(lambda: check_keys(where, "", data, _TOP_KEYS, "the recipe"))
    reg = Registry.load()
    ticket = None
    if data.get("ticket") is not None:
        ticket = problems.attempt(lambda: ticket_name(where, "ticket", data["ticket"]))
    workload = problems.attempt(
        lambda: any_workload(where, "workload", require(where, "", data, "workload"), reg)
    )
    trials = problems.attempt(
        lambda: positive_int(where, "trials", require(where, "", data, "trials"))
    )
    steps = problems.attempt(
        lambda: positive_int(where, "steps", require(where, "", data, "steps"))
    )
    confound = problems.attempt(lambda: _confound(where, data.get("confound")))
    confound_raw, threshold, alpha = confound or ({}, DEFAULT_CONFOUND_THRESHOLD, DEFAULT_ALPHA)
    # Judged by its shape: a command workload with a mistake is still a command workload.
    is_command = isinstance(data.get("workload"), Mapping)

    order: Order = DEFAULT_ORDER
    if "order" in data:
        order = problems.attempt(lambda: order_mode(where, "order", data["order"])) or order
    seed = 0
    if "order_seed" in data:
        seed = problems.attempt(lambda: order_seed(where, "order_seed", data["order_seed"])) or 0
    stop_after = problems.attempt(
        lambda: stop_after_failures(where, "stop_after", data.get("stop_after"))
    )
    fingerprint = problems.attempt(
        lambda: _fingerprint_kernels(where, data.get("fingerprint_kernels", False), is_command)
    )

    executor = problems.attempt(lambda: executor_from_data(where, "executor", data.get("executor")))
    locate = problems.attempt(lambda: boolean(where, "locate", data.get("locate", False)))

    cells_raw = problems.attempt(lambda: _cell_list(where, data)) or []
    cells = _unique_cells(
        where,
        problems,
        cells_raw,
        lambda index, item: _cell_from_data(
            where, problems, index, item, reg, trials or 1, steps or 1, stop_after, is_command
        ),  # a bad top-level count still lets each cell be checked (with a stand-in of 1)
    )

    for index, cell in enumerate(cells):
        env_path = f"cells[{index}].environment"
        problems.attempt(
            partial(check_command_environment, where, env_path, cell.environment, is_command)
        )
    explicit = confound_raw.get("baseline_cell")
    baseline: str | None = None
    if len(cells) == len(cells_raw) and cells:  # judged only against a complete cell list
        if explicit is not None:
            baseline = problems.attempt(
                lambda: check_baseline(where, "confound.baseline_cell", explicit, cells)
            )
        else:
            baseline = _default_baseline(cells)
            if baseline is None:
                problems.attempt(
                    lambda: where.fail(
                        "confound.baseline_cell",
                        "required: no cell is named 'baseline-*' or has mitigations [none]",
                    )
                )
    problems.raise_if_any()
    # No problem recorded: every value above was produced.
    assert workload is not None and baseline is not None
    workload_name, source_package, command = workload
    assert trials is not None and steps is not None
    return Recipe(
        schema_version=version,
        ticket=ticket,
        workload=workload_name,
        trials=trials,
        steps=steps,
        confound=ConfoundSettings(threshold=threshold, baseline_cell=explicit, alpha=alpha),
        cells=tuple(cells),
        baseline=baseline,
        source=source,
        sha256=sha256,
        workload_source_package=source_package,
        command=command,
        order=order,
        order_seed=seed,
        fingerprint_kernels=bool(fingerprint),
        locate=bool(locate),
        executor=executor,
    )
