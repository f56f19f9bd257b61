"""Turn a `RunRequest`'s names into registry entries, once, before any trial runs."""

from __future__ import annotations

from dataclasses import dataclass

from aorta.errors import UnknownMitigationError
from aorta.registry.loader import (
    get_environment,
    get_workload,
    load_mitigations,
)
from aorta.registry.models import Environment, Mitigation, Workload
from aorta.runner.environ import merge_env, with_seed
from aorta.runner.models import RunRequest


@dataclass(frozen=True)
class ResolvedRequest:
    """A request with every name resolved and the trial environment merged."""

    request: RunRequest
    workload: Workload
    mitigations: tuple[Mitigation, ...]
    environment: Environment
    env: dict[str, str]  # the cell's variables: mitigations, then extra_env

    def trial_env(self, trial_id: int) -> dict[str, str]:
        """The variables of trial `trial_id`: its seed variables, then the cell's (`with_seed`)."""
        return with_seed(self.env, self.request.trial_seed(trial_id))

    @property
    def needs_fresh_process(self) -> bool:
        """True when a mitigation's variables are only read at runtime start-up, or when the
        trial records kernel fingerprints: a kernel compiled earlier in this process sits in
        Triton's in-memory JIT cache, compiles no more and would go unrecorded."""
        return self.request.fingerprint_kernels or any(m.process_scoped for m in self.mitigations)


def request_mitigations(request: RunRequest) -> tuple[Mitigation, ...]:
    """The request's mitigation entries: the pinned ones when it has them (a re-run or resumed
    triage run), else the registry's; raises `UnknownMitigationError` on a bad name."""
    if request.pinned_mitigations:
        return request.pinned_mitigations
    catalog = load_mitigations()
    unknown = [name for name in request.mitigations if name not in catalog]
    if unknown:
        raise UnknownMitigationError(unknown[0], list(catalog))
    return tuple(catalog[name] for name in request.mitigations)


def resolve_request(request: RunRequest) -> ResolvedRequest:
    """Resolve names through the registry; raises the `Unknown*Error`s on bad names.

    Pinned mitigations (`RunRequest.pinned_mitigations`) are used as they are.
    """
    workload = get_workload(request.workload)
    environment = (
        request.environment
        if isinstance(request.environment, Environment)
        else get_environment(request.environment)
    )
    mitigations = request_mitigations(request)
    env = merge_env(mitigations, request.extra_env)
    return ResolvedRequest(request, workload, mitigations, environment, env)
