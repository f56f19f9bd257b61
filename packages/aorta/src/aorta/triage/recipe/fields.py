"""The recipe's fields, declared once; the three readers derive their keys and flags from here.

A recipe is read three ways: from a recipe file (`validation`), from command-line flags (flag
mode: `flags`, with the options `aorta.cli.recipe_options` builds) and from a run's
`recipe.resolved.yaml` (`serialisation`). Each `Field` below names its key, says which of the
three readers expose it, and carries the flag-mode options that set it (name, type, default,
help). The file reader's known keys (and so its "unknown key ... (allowed: ...)" lines), the
resolved reader's known keys and the flag-mode options are all derived from these tables, so
a field cannot be added to one reader and forgotten in another without a test failing
(tests/triage/test_recipe_fields.py).

How each value is checked stays with the readers (`checks`, `validation`): the same check
functions serve all three, under the key path or flag name of the reader.

A leaf: imports only the model's constants, the confound defaults and the adaptive rules'
names, nothing that reads files or the registry, so the CLI can build its options from it at
import time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from aorta.triage.analysis.adaptive_base import ADAPTIVE_RULES
from aorta.triage.analysis.confound import DEFAULT_ALPHA, DEFAULT_CONFOUND_THRESHOLD
from aorta.triage.recipe.model import DEFAULT_ORDER, ORDERS

__all__ = [
    "CELL_FIELDS",
    "CONFOUND_FIELDS",
    "TOP_FIELDS",
    "Field",
    "Flag",
    "Reader",
    "flag_fields",
    "keys",
    "recipe_flags",
]

# file: a recipe file; flags: flag mode (`--mode matrix`); resolved: `recipe.resolved.yaml`.
Reader = Literal["file", "flags", "resolved"]
FILE_AND_RESOLVED: frozenset[Reader] = frozenset({"file", "resolved"})
ALL_READERS: frozenset[Reader] = frozenset({"file", "flags", "resolved"})


@dataclass(frozen=True)
class Flag:
    """A flag-mode option that sets (part of) a field.

    `kind` picks the option's type: `text` (a string), `count` (an integer >= 1), `number`
    (a float), `choice` (one of `choices`), `switch` (an on/off flag, off by default).
    `default` None: the option has no default (and shows none); otherwise it is shown in
    `--help`.
    """

    name: str
    help: str
    kind: Literal["text", "count", "number", "choice", "switch"] = "text"
    default: object = None
    choices: tuple[str, ...] = ()

    @property
    def param(self) -> str:
        """The option's parameter name (`--confound-threshold` -> `confound_threshold`)."""
        return self.name.removeprefix("--").replace("-", "_")


@dataclass(frozen=True)
class Field:
    """One recipe field: its key, the readers that expose it, its flags.

    `resolved_key` is its key in `recipe.resolved.yaml` where that differs from the file's
    (a cell's `stop_after: {failures: K}` is recorded resolved as `stop_after_failures: K`).
    """

    key: str
    help: str
    readers: frozenset[Reader] = ALL_READERS
    flags: tuple[Flag, ...] = ()
    resolved_key: str | None = None

    @property
    def resolved_name(self) -> str:
        """The field's key in `recipe.resolved.yaml`."""
        return self.resolved_key or self.key


_RESOLVED_ONLY: frozenset[Reader] = frozenset({"resolved"})

# Top-level keys, in the order the file reader lists them in its errors (and flag mode its
# options in `--help`).
TOP_FIELDS: tuple[Field, ...] = (
    Field(
        "schema_version",
        "Recipe format version (flag mode: the newest).",
        FILE_AND_RESOLVED,
    ),
    Field("origin", "Where the run's recipe came from: recipe or flags.", _RESOLVED_ONLY),
    Field("source", "The recipe file a run read (null in flag mode).", _RESOLVED_ONLY),
    Field("sha256", "Digest of the recipe file's bytes (null in flag mode).", _RESOLVED_ONLY),
    Field(
        "ticket",
        "Investigation ticket (groups the run directories).",
        flags=(Flag("--ticket", "Flag mode: investigation ticket (output grouping)."),),
    ),
    Field(
        "workload",
        "A registered workload name, or a command workload mapping.",
        flags=(Flag("--workload", "Flag mode: workload name."),),
    ),
    Field(
        "trials",
        "Trials per cell (the most per cell with stop_after).",
        flags=(
            Flag("--trials", "Flag mode: trials per cell.", kind="count"),
            Flag(
                "--max-trials",
                "Flag mode, with --stop-after-failures or --until-decided: the most trials a "
                "cell runs (instead of --trials).",
                kind="count",
            ),
        ),
    ),
    Field(
        "steps",
        "Steps per trial.",
        flags=(Flag("--steps", "Flag mode: steps per trial.", kind="count", default=100),),
    ),
    Field(
        "order",
        "interleaved or sequential trial order.",
        flags=(
            Flag(
                "--order",
                "Flag mode: interleaved runs trial k of every cell (shuffled) before trial k+1, "
                "so machine drift hits all cells alike; sequential runs each cell's trials in "
                "one go.",
                kind="choice",
                default=DEFAULT_ORDER,
                choices=ORDERS,
            ),
        ),
    ),
    Field("order_seed", "Seed of the per-round cell order.", FILE_AND_RESOLVED),
    Field(
        "stop_after",
        "Stop a cell once K of its trials failed: {failures: K}.",
        frozenset({"file", "flags"}),  # resolved: per cell, as stop_after_failures
        flags=(
            Flag(
                "--stop-after-failures",
                "Flag mode: stop a cell once K of its trials failed (with --max-trials N).",
                kind="count",
            ),
        ),
    ),
    Field(
        "adaptive",
        "Adaptive trials: {max_trials: N, rule: curtailment | alpha-spending}; rounds run "
        "until every cell is decided or has N.",
        flags=(
            Flag(
                "--until-decided",
                "Flag mode, with --max-trials N: run rounds until every cell's verdict is "
                "decided (cured / not cured) or it has N trials (recipe: adaptive).",
                kind="switch",
                default=False,
            ),
            Flag(
                "--adaptive-rule",
                "Flag mode, with --until-decided: the rule that decides a cell: curtailment "
                "(default: fewest trials, family-wise bound measured) or alpha-spending "
                "(family-wise bound guaranteed; recipe: adaptive.rule).",
                kind="choice",
                choices=ADAPTIVE_RULES,
            ),
        ),
    ),
    Field("confound", "Speed-confound settings (see CONFOUND_FIELDS)."),
    Field(
        "cells",
        "The matrix rows (flag mode: the mitigation x environment product).",
        flags=(
            Flag("--mitigation-axis", "Flag mode: comma-separated mitigations."),
            Flag(
                "--environment-axis",
                "Flag mode: comma-separated environments; image:<ref> = docker.",
            ),
        ),
    ),
    Field(
        "fingerprint_kernels",
        "Record each trial's Triton kernel fingerprints.",
        FILE_AND_RESOLVED,
    ),
    Field(
        "locate",
        "Record where each trial's first non-finite value appeared (module, phase).",
        flags=(
            Flag(
                "--locate",
                "Flag mode: every trial records where its first non-finite value appeared "
                "(module, forward/backward/optimizer); costs step time (recipe: locate: true).",
                kind="switch",
                default=False,
            ),
        ),
    ),
    # Flag mode and --recipe both take --executor / --slurm-config (aorta.cli.triage_slurm):
    # options of the run command, not of flag mode.
    Field("executor", "local, or {slurm: {...}} (SLURM array tasks).", FILE_AND_RESOLVED),
)

CONFOUND_FIELDS: tuple[Field, ...] = (
    Field(
        "threshold",
        "Step-time ratio above which a cell reads speed.",
        flags=(
            Flag(
                "--confound-threshold",
                "Flag mode: step-time ratio above which a cell reads speed (+N%).",
                kind="number",
                default=DEFAULT_CONFOUND_THRESHOLD,
            ),
        ),
    ),
    Field(
        "baseline_cell",
        "The baseline cell (default: baseline-*, else a [none] cell, else the only cell).",
        flags=(Flag("--baseline-cell", "Flag mode: baseline cell name."),),
    ),
    Field(
        "alpha",
        "Significance level of the failure-rate labels.",
        flags=(
            Flag(
                "--alpha",
                "Flag mode: significance level of the failure-rate labels (two-sided Fisher p).",
                kind="number",
                default=DEFAULT_ALPHA,
            ),
        ),
    ),
)

# A cell's keys. Flag mode builds its cells from the axes (see `cells` above), with the
# top-level trials / steps / stop_after.
CELL_FIELDS: tuple[Field, ...] = (
    Field("name", "The cell's name (a directory name).", FILE_AND_RESOLVED),
    Field(
        "mitigations",
        "Mitigation names (resolved: with their env bundles).",
        FILE_AND_RESOLVED,
    ),
    Field(
        "environment",
        "Environment name or {docker: <ref>} (resolved: expanded).",
        FILE_AND_RESOLVED,
    ),
    Field("trials", "Trials of this cell (default: the top level's).", FILE_AND_RESOLVED),
    Field("steps", "Steps of this cell's trials (default: the top level's).", FILE_AND_RESOLVED),
    Field(
        "stop_after",
        "{failures: K} for this cell, or null to run all its trials.",
        FILE_AND_RESOLVED,
        resolved_key="stop_after_failures",
    ),
    Field("extra_env", "Variables set on top of the mitigations'.", FILE_AND_RESOLVED),
    Field("env", "The merged variables a trial runs with.", _RESOLVED_ONLY),
    Field("command_args", "Arguments appended to a command workload.", FILE_AND_RESOLVED),
)


def keys(fields: tuple[Field, ...], reader: Reader) -> tuple[str, ...]:
    """The keys `reader` knows among `fields`, in declaration order (its allowed keys)."""
    if reader == "resolved":
        return tuple(f.resolved_name for f in fields if reader in f.readers)
    return tuple(f.key for f in fields if reader in f.readers)


def flag_fields() -> tuple[tuple[Flag, str], ...]:
    """Every flag-mode option with the key path of the field it sets (`confound.alpha`)."""
    found: list[tuple[Flag, str]] = []
    for prefix, fields in (("", TOP_FIELDS), ("confound.", CONFOUND_FIELDS)):
        for field in fields:
            found.extend((flag, prefix + field.key) for flag in field.flags)
    return tuple(found)


def recipe_flags() -> tuple[Flag, ...]:
    """The flag-mode options, in declaration order."""
    return tuple(flag for flag, _ in flag_fields())
