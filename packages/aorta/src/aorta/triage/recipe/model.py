"""The recipe as data: a frozen `Recipe` of fully resolved `Cell`s and its confound settings.

Nothing here validates user input (that is `validation`); the `__post_init__` checks guard
against programming errors of callers that build a `Recipe` by hand.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Literal

from aorta.registry.models import Environment, Mitigation
from aorta.triage.analysis.adaptive_base import DEFAULT_ADAPTIVE_RULE
from aorta.triage.analysis.confound import DEFAULT_ALPHA, DEFAULT_CONFOUND_THRESHOLD

if TYPE_CHECKING:
    from aorta.runner.command.spec import CommandSpec

__all__ = [
    "DEFAULT_ORDER",
    "IMAGE_PREFIX",
    "INLINE_SOURCE_PACKAGE",
    "ORDERS",
    "RECIPE_SUFFIXES",
    "SUPPORTED_SCHEMA_VERSIONS",
    "Cell",
    "ConfoundSettings",
    "Order",
    "Recipe",
]

SUPPORTED_SCHEMA_VERSIONS: tuple[int, ...] = (1,)
RECIPE_SUFFIXES = (".yaml", ".yml", ".json")
IMAGE_PREFIX = "image:"
# `source_package` of environments defined inline in a recipe or by an `image:` flag item.
INLINE_SOURCE_PACKAGE = "recipe"

# interleaved: round k of every cell (cells shuffled per round) before round k+1, so machine
# drift hits every cell alike; sequential: all trials of a cell, then the next cell (the
# spec's nested loop).
Order = Literal["interleaved", "sequential"]
ORDERS: tuple[Order, ...] = ("interleaved", "sequential")
DEFAULT_ORDER: Order = "interleaved"


DEFAULT_MAX_RESUBMITS = 2
DEFAULT_POLL_SECONDS = 10.0
MIN_POLL_SECONDS = 0.2


@dataclass(frozen=True)
class SlurmSettings:
    """What a user sets for the SLURM executor; every field optional (the cluster's defaults).

    `nodes` / `gpus_per_node` / `time` are per trial (each trial is one array task).
    `sbatch_extra` are more `#SBATCH` lines (`--mem=64G`), `setup` shell lines run before the
    trial (module loads, exports), `launcher` a prefix of the trial command (a container exec).
    `constraint` keeps every trial on one node type, `same_node` on one node (`--nodelist`),
    so that step times compare. `max_resubmits` caps the resubmissions of a trial SLURM lost
    (cancelled, node failure, preemption, time limit, vanished); `poll_seconds` is how often
    the driver asks SLURM.
    """

    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    time: str | None = None
    nodes: int | None = None
    gpus_per_node: int | None = None
    sbatch_extra: tuple[str, ...] = ()
    launcher: str = ""
    setup: tuple[str, ...] = ()
    max_concurrent: int | None = None
    constraint: str | None = None
    same_node: str | None = None
    max_resubmits: int = DEFAULT_MAX_RESUBMITS
    poll_seconds: float = DEFAULT_POLL_SECONDS


@dataclass(frozen=True)
class ConfoundSettings:
    """Speed-confound detection settings: ratio threshold and the explicit baseline, if any."""

    threshold: float = DEFAULT_CONFOUND_THRESHOLD
    baseline_cell: str | None = None  # as written; `Recipe.baseline` is the resolved one
    alpha: float = DEFAULT_ALPHA  # significance level of the failure-rate labels


@dataclass(frozen=True)
class Cell:
    """One row of the matrix, fully resolved.

    `trials`/`steps` are the effective counts (per-cell override, else top level); `env` is the
    mitigations' env bundles unioned in order with `extra_env` applied on top.
    """

    name: str
    mitigations: tuple[str, ...]
    environment: Environment
    extra_env: Mapping[str, str]
    trials: int
    steps: int
    env: Mapping[str, str]
    # The registry entries behind `mitigations`, for `recipe.resolved.yaml`.
    mitigation_entries: tuple[Mitigation, ...] = ()
    # Command workloads: arguments appended to the command for this cell's trials.
    command_args: tuple[str, ...] = ()
    # Stop the cell once this many of its trials failed (`trials` is then the most it runs);
    # None: run all `trials`.
    stop_after_failures: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "extra_env", MappingProxyType(dict(self.extra_env)))
        object.__setattr__(self, "env", MappingProxyType(dict(self.env)))

    @property
    def needs_fresh_process(self) -> bool:
        """Whether this cell's trials must run in child processes (environment or mitigation)."""
        return self.environment.kind != "local" or any(
            m.process_scoped for m in self.mitigation_entries
        )


@dataclass(frozen=True)
class AdaptiveSettings:
    """`adaptive: {max_trials: N, rule: R}`: rounds run until every non-baseline cell is
    decided by rule `R` (`aorta.triage.analysis.adaptive.RULES`: `curtailment` by default, or
    `alpha-spending`) or has run `max_trials` trials (every cell's `trials`)."""

    max_trials: int
    rule: str = DEFAULT_ADAPTIVE_RULE


@dataclass(frozen=True)
class Recipe:
    """A validated recipe: what to run and how to judge it. Build with `load_recipe()` or
    `recipe_from_flags()`; `baseline` is the resolved baseline cell name."""

    schema_version: int
    ticket: str | None
    workload: str
    trials: int
    steps: int
    confound: ConfoundSettings
    cells: tuple[Cell, ...]
    baseline: str
    source: Path | None = None  # None: built from flags
    sha256: str | None = None  # of the recipe file's bytes
    workload_source_package: str | None = None
    # A command workload (`workload` is then "command"): what every trial runs.
    command: CommandSpec | None = None
    order: Order = DEFAULT_ORDER
    # Seed of the per-round cell order (interleaved). A fixed default, not a random draw: every
    # torchrun rank must shuffle alike (the cells' collectives need all ranks in one cell), and
    # a resume must continue with the same rounds. Recorded in recipe.resolved.yaml.
    order_seed: int = 0
    # Read back from a `recipe.resolved.yaml`: its cells are pinned to the recorded bundles
    # and environments, which may come from another machine (see `trust`).
    resolved: bool = False
    # `fingerprint_kernels: true`: every trial records its Triton kernels' fingerprints and
    # the matrix says which kernels each cell changed vs the baseline.
    fingerprint_kernels: bool = False
    # `locate: true`: every trial records where its first non-finite value appeared
    # (`first_nonfinite`, see aorta.instrumentation.locate). Off by default: it costs step time.
    locate: bool = False
    # `executor: {slurm: {...}}`: every trial a SLURM array task (`aorta.triage.slurm`);
    # None: the trials run on this machine.
    executor: SlurmSettings | None = None
    # `adaptive: {max_trials: N}`: decided cells stop getting trials; None: every cell runs
    # all of its trials (or up to its stop_after rule).
    adaptive: AdaptiveSettings | None = None

    def __post_init__(self) -> None:
        names = [cell.name for cell in self.cells]
        if not names:
            raise ValueError("a recipe needs at least one cell")
        if len(set(names)) != len(names):
            raise ValueError(f"cell names must be unique, got {names}")
        if self.baseline not in names:
            raise ValueError(f"baseline {self.baseline!r} is not a cell ({', '.join(names)})")

    def cell(self, name: str) -> Cell:
        """The cell called `name` (KeyError if there is none)."""
        for cell in self.cells:
            if cell.name == name:
                return cell
        raise KeyError(name)

    @property
    def baseline_cell(self) -> Cell:
        """The resolved baseline cell."""
        return self.cell(self.baseline)
