"""B1 data: what to run (`RunRequest`) and how each trial went (`TrialResult`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal

from aorta.errors import AortaUsageError
from aorta.registry.models import Environment, Mitigation
from aorta.runner.host import TrialHost
from aorta.runner.host_load import HostLoad

if TYPE_CHECKING:  # the command engine is loaded only when a command workload runs
    from aorta.runner.command.spec import CommandSpec

TRIAL_SCHEMA_VERSION = 1

Execution = Literal["in_process", "child_process"]
# passed: the trial measured and the failure under study did not fire. failed: it fired
# (non-finite loss / grad norm, or a workload-declared failure). error: the trial could not
# measure it at all (crashed before its first step, import/setup error, killed, out of memory).
Outcome = Literal["passed", "failed", "error"]
OUTCOMES: tuple[Outcome, ...] = ("passed", "failed", "error")


@dataclass(frozen=True)
class RunRequest:
    """One cell's worth of trials: a workload under some mitigations in one environment.

    `environment` is a registry name or an `Environment` object (e.g. an inline docker image
    that was never registered). Trial `i` is seeded with `seed + i`; the seed is recorded.
    `trial_ids` narrows the run to some of the trials `0..trials-1` (a resumed triage run
    fills in the ones an interruption left out); each keeps its own id, seed and file name.
    """

    workload: str
    output_dir: Path
    mitigations: tuple[str, ...] = ("none",)
    environment: str | Environment = "local"
    extra_env: Mapping[str, str] = field(default_factory=dict)
    trials: int = 1
    steps: int = 10
    seed: int = 0
    trial_ids: tuple[int, ...] | None = None  # None: every trial 0..trials-1
    # A command workload (`workload` is then only its display name, e.g. "command"): each
    # trial runs this command, with `command_args` appended, in a fresh process group.
    command: CommandSpec | None = None
    command_args: tuple[str, ...] = ()
    cell: str = ""  # the triage cell, for the command's {cell} placeholder
    # Run every trial in a fresh child process even when nothing requires one, so that this
    # request's timings compare with those of requests that do (a triage matrix of mixed cells).
    fresh_process: bool = False
    # The mitigations' entries as recorded (a re-run or resumed triage run): used instead of
    # today's registry, in `mitigations` order. Empty: resolve the names through the registry.
    pinned_mitigations: tuple[Mitigation, ...] = ()
    # Record `{kernel: fingerprint}` of the Triton kernels each trial compiles (needs the
    # triton-invariance package); forces a fresh process per trial, see `ResolvedRequest`.
    fingerprint_kernels: bool = False
    # Record where each trial's first non-finite value appeared (`TrialResult.first_nonfinite`,
    # see aorta.instrumentation.locate); off by default, it costs step time.
    locate: bool = False

    def __post_init__(self) -> None:
        if self.trials < 1:
            raise AortaUsageError(f"trials must be >= 1, got {self.trials}")
        if self.steps < 1:
            raise AortaUsageError(f"steps must be >= 1, got {self.steps}")
        if not self.mitigations:
            raise AortaUsageError("mitigations must name at least one entry (use 'none')")
        object.__setattr__(self, "mitigations", tuple(self.mitigations))
        object.__setattr__(self, "extra_env", MappingProxyType(dict(self.extra_env)))
        object.__setattr__(self, "output_dir", Path(self.output_dir))
        object.__setattr__(self, "command_args", tuple(self.command_args))
        if self.command_args and self.command is None:
            raise AortaUsageError("command_args need a command workload")
        if self.trial_ids is not None:
            ids = tuple(sorted(set(self.trial_ids)))
            if len(ids) != len(self.trial_ids) or not all(0 <= i < self.trials for i in ids):
                raise AortaUsageError(
                    f"trial_ids must be distinct ids within 0..{self.trials - 1}, "
                    f"got {list(self.trial_ids)}"
                )
            object.__setattr__(self, "trial_ids", ids)
        pinned = tuple(m.name for m in self.pinned_mitigations)
        if pinned and pinned != self.mitigations:
            raise AortaUsageError(
                f"pinned_mitigations {list(pinned)} do not match mitigations "
                f"{list(self.mitigations)}"
            )

    def selected_trials(self) -> tuple[int, ...]:
        """The ids of the trials this request runs, in order."""
        return self.trial_ids if self.trial_ids is not None else tuple(range(self.trials))

    @property
    def environment_name(self) -> str:
        """The environment's name whether it was given by name or as an object."""
        env = self.environment
        return env if isinstance(env, str) else env.name

    def trial_seed(self, trial_id: int) -> int:
        """Seed of trial `trial_id`: distinct per trial so trials are independent samples."""
        return self.seed + trial_id

    def trial_path(self, trial_id: int) -> Path:
        """Where trial `trial_id`'s JSON is written."""
        return self.output_dir / f"trial_{trial_id}.json"


@dataclass(frozen=True)
class TrialResult:
    """The record of one trial, as written to `trial_<id>.json`.

    `outcome` is `passed`, `failed` or `error` (see `Outcome`); `passed` stays in the record
    for readers of the first format and is always `outcome == "passed"`. `failure` holds the
    reason of a failed or errored trial. A record without `outcome` (written before it
    existed) reads as `passed` or `failed` from its `passed` field.
    """

    trial_id: int
    workload: str
    mitigations: tuple[str, ...]
    environment: str
    seed: int
    steps: int
    passed: bool
    failure: str | None
    step_times_ms: list[float]
    warmup_steps: int
    losses: list[float | None]
    wall_clock_sec: float
    started_at: str
    env_applied: dict[str, str]
    env_snapshot: dict[str, Any]
    observed: dict[str, Any]
    execution: Execution = "in_process"
    failed_at_step: int | None = None
    traceback: str | None = None
    rank: int = 0
    world_size: int = 1
    # Under torchrun: process-scoped variables the launcher already held (in effect from the
    # start of the process, which is what makes the mitigation act there).
    launcher_env: dict[str, str] = field(default_factory=dict)
    # What the workload's step times measure (e.g. fsdp: "wall" or "cpu"); None: not declared.
    step_clock: str | None = None
    schema_version: int = TRIAL_SCHEMA_VERSION
    outcome: Outcome = "passed"
    # Command workloads only: the argv that ran, exit status, why it stopped, the first
    # failure/error line, clock source, log and artifacts (see aorta.runner.command.runner).
    command: dict[str, Any] | None = None
    # `{kernel_name: fingerprint}` of the Triton kernels the trial compiled; None when the
    # request did not ask for them (`RunRequest.fingerprint_kernels`).
    kernel_fingerprints: dict[str, str] | None = None
    # Where the trial ran (node, SLURM ids, CPU/GPU models); None in records written before
    # it was recorded.
    host: TrialHost | None = None
    # The host's 1-minute load average over the trial (`aorta.runner.host_load`); None where
    # it was not sampled (in-process trials, records written before it existed).
    host_load: HostLoad | None = None
    # Where the first non-finite value appeared (`aorta.instrumentation.locate_record`: a
    # location or `{"located": false, "reason": ...}`); None when the request did not ask.
    first_nonfinite: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.outcome not in OUTCOMES:
            raise ValueError(f"outcome must be one of {', '.join(OUTCOMES)}, got {self.outcome!r}")
        if self.passed and self.outcome != "passed":
            raise ValueError(f"a passed trial cannot have outcome {self.outcome!r}")
        if not self.passed and self.outcome == "passed":
            # Not passed and no outcome given: the first format's meaning, a failure.
            object.__setattr__(self, "outcome", "failed")

    @property
    def errored(self) -> bool:
        """Whether the trial could not measure (outcome `error`)."""
        return self.outcome == "error"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (tuples become lists)."""
        data = asdict(self)
        data["mitigations"] = list(self.mitigations)
        data["host"] = None if self.host is None else self.host.to_dict()
        data["host_load"] = None if self.host_load is None else self.host_load.to_dict()
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TrialResult:
        """Rebuild a result from `to_dict()` output (e.g. a trial JSON read back).

        `host` is checked field by field (`TrialHost.from_dict`: `ValueError` naming the key);
        a record without it (written before it existed) reads as `host=None`; likewise
        `host_load` (`HostLoad.from_dict`).
        """
        version = data.get("schema_version")
        if version != TRIAL_SCHEMA_VERSION:
            raise ValueError(
                f"unsupported trial schema_version {version!r} (expected {TRIAL_SCHEMA_VERSION})"
            )
        fields = dict(data)
        fields["mitigations"] = tuple(fields["mitigations"])
        host = fields.get("host")
        fields["host"] = None if host is None else TrialHost.from_dict(host)
        load = fields.get("host_load")
        fields["host_load"] = None if load is None else HostLoad.from_dict(load)
        return cls(**fields)
