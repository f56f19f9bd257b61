"""B3: the registry of mitigations, environments and workloads (built-ins + entry points)."""

from aorta.errors import UnknownEnvironmentError, UnknownMitigationError, UnknownWorkloadError
from aorta.registry.loader import (
    ENVIRONMENTS_GROUP,
    MITIGATIONS_GROUP,
    WORKLOADS_GROUP,
    BrokenEntry,
    Catalog,
    get_environment,
    get_mitigation,
    get_workload,
    load_environments,
    load_mitigations,
    load_workloads,
)
from aorta.registry.models import Environment, EnvironmentKind, Mitigation, Workload

__all__ = [
    "ENVIRONMENTS_GROUP",
    "MITIGATIONS_GROUP",
    "WORKLOADS_GROUP",
    "BrokenEntry",
    "Catalog",
    "Environment",
    "EnvironmentKind",
    "Mitigation",
    "UnknownEnvironmentError",
    "UnknownMitigationError",
    "UnknownWorkloadError",
    "Workload",
    "get_environment",
    "get_mitigation",
    "get_workload",
    "load_environments",
    "load_mitigations",
    "load_workloads",
]
