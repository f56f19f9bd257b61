"""The seam between a triage run's lifecycle and where its trials run.

`aorta.triage.lifecycle` owns the run directory (creates it, probes the host, locks it,
archives the matrix it replaces, writes the report and the manifest); a `TrialExecutor` runs
the trials the run is missing into it and says what came of them (`Execution`). Two exist:
`LocalExecutor` (this interpreter, `aorta.triage.run.local`) and `SlurmExecutor` (one SLURM
array task per trial, `aorta.triage.slurm.executor`). The shape follows submitit's
`Executor` and Hydra's `Launcher`: the caller hands over the work and one context, the
executor hands back results; neither knows the other's internals.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from aorta.atomic import write_json_atomic
from aorta.triage.layout import RunDir
from aorta.triage.run.manifest import ExecutorName

if TYPE_CHECKING:
    from aorta.instrumentation.models import EnvSnapshot
    from aorta.runner.models import TrialResult
    from aorta.triage.analysis.cells import CellStats
    from aorta.triage.recipe import Recipe
    from aorta.triage.report.reporting import MatrixReporter
    from aorta.triage.report.writer import PlotDrawer

# Injected by tests that need a specific probe outcome; `collect_env` by default.
Probe = Callable[..., "EnvSnapshot"]


@dataclass
class RunContext:
    """What an executor gets from the lifecycle for one attempt on one run directory."""

    recipe: Recipe
    run: RunDir
    reporter: MatrixReporter
    probe: Probe
    writer: bool = True  # False: a torchrun rank other than 0 (runs trials, writes nothing)
    earlier: dict[str, list[TrialResult]] = field(default_factory=dict)  # trials already on disk
    digests: dict[str, str] = field(default_factory=dict)  # docker environment -> image digest
    plot_drawer: PlotDrawer | None = None

    def probe_environment(self, environment: str) -> None:
        """Write `environments/<env>/env.json` unless it is there (before the environment's
        first trial, before any mitigation is applied)."""
        path = self.run.env_json(environment)
        if not self.writer or path.exists():
            return
        snapshot = self.probe(scope="environment", environ=dict(os.environ))
        write_json_atomic(path, snapshot.to_dict())


@dataclass(frozen=True)
class Execution:
    """What an executor's attempt came to.

    `stats`: every recipe cell in recipe order. `stopped`: the Ctrl-C or crash that ended the
    attempt early (the lifecycle writes the partial matrix, then raises it). `finished`:
    False when the executor left the trials running (SLURM `--detach`): no matrix is written.
    """

    stats: tuple[CellStats, ...] = ()
    stopped: BaseException | None = None
    cells_not_run: tuple[str, ...] = ()
    rounds: tuple[tuple[str, ...], ...] = ()  # this attempt's interleaved rounds
    in_progress: tuple[str, ...] = ()  # cells with trials still queued or running elsewhere
    finished: bool = True


class TrialExecutor(Protocol):
    """Runs a recipe's missing trials into a run directory."""

    @property
    def name(self) -> ExecutorName:
        """What `run.json` records: `local` or `slurm`."""

    @property
    def in_process(self) -> bool:
        """Whether trials run in this process group: under torchrun every rank then runs
        them and only rank 0 writes."""

    def check(self) -> None:
        """Refuse in one line before anything is created (e.g. SLURM is not installed)."""

    def settle(self, run: RunDir, recipe: Recipe) -> None:
        """Before a resume reads the run, under its lock: deal with what an earlier attempt
        left running (or refuse to go on)."""

    def execute(self, context: RunContext) -> Execution:
        """Run the trials `context.run` is missing; report progress to `context.reporter`."""
