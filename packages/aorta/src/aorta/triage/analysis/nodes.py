"""Which node: failure rate per node, and the nodes where failures concentrate (pure logic).

With trials spread over nodes (the SLURM executor) a bad node is a confound too: a cell whose
trials happened to land on it fails more for reasons no mitigation touches. Per node, the
failed trials out of the measured ones (passed + failed; errors measure nothing) are compared
with those of every other node by a two-sided Fisher exact test, Holm-adjusted across the
nodes (`aorta.triage.analysis.stats`). A node whose adjusted p is below alpha and whose rate
is above the rest's is a *suspect*: the matrix says so in a banner, and `aorta triage nodes RUN`
prints the suspects in the form oellm-autoexp's node exclusion takes (a comma-separated list, as
`sbatch --exclude` and `scontrol update ExcNodeList=` read it, or with `--json` the document
of its `excluded_nodes.json`).

The trials of all cells are pooled: with array tasks placed by the scheduler, cells spread over
the nodes alike; when they do not (a node that ran only baseline trials), a concentration can
also come from the cells it ran, which the banner says.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from aorta.triage.analysis.stats import fisher_p_value, holm_adjust

__all__ = [
    "EXCLUSIONS_FORMAT",
    "NodeRate",
    "exclusion_document",
    "exclusion_list",
    "node_banner",
    "node_rates",
    "suspect_nodes",
]

# The `format` key of oellm-autoexp's excluded_nodes.json (oellm_autoexp.monitor.node_exclusions);
# a test reads such a document back with oellm-autoexp's own loader.
EXCLUSIONS_FORMAT: Final = "oellm-autoexp/excluded-nodes/1"


@dataclass(frozen=True)
class NodeRate:
    """One node's measured trials and its test against the other nodes."""

    node: str
    failures: int
    trials: int
    rest_failures: int
    rest_trials: int
    p_adjusted: float | None  # None: nothing to compare with (one node, or no trials)

    @property
    def rate(self) -> float | None:
        """Failed share of this node's measured trials."""
        return self.failures / self.trials if self.trials else None


def node_rates(trials: Iterable[tuple[str | None, str]]) -> list[NodeRate]:
    """Per node (sorted by name), from `(node, outcome)` pairs; unknown nodes and errors are
    left out (errors measure nothing)."""
    counts: dict[str, list[int]] = {}
    for node, outcome in trials:
        if node is None or outcome not in ("passed", "failed"):
            continue
        entry = counts.setdefault(node, [0, 0])
        entry[0] += outcome == "failed"
        entry[1] += 1
    total_failures = sum(f for f, _ in counts.values())
    total_trials = sum(n for _, n in counts.values())
    names = sorted(counts)
    raw: list[float | None] = []
    for name in names:
        failures, trials_here = counts[name]
        rest = total_trials - trials_here
        raw.append(
            fisher_p_value(failures, trials_here, total_failures - failures, rest)
            if len(names) > 1 and rest > 0
            else None
        )
    adjusted = holm_adjust(raw)
    return [
        NodeRate(
            node=name,
            failures=counts[name][0],
            trials=counts[name][1],
            rest_failures=total_failures - counts[name][0],
            rest_trials=total_trials - counts[name][1],
            p_adjusted=p,
        )
        for name, p in zip(names, adjusted, strict=True)
    ]


def suspect_nodes(rates: Sequence[NodeRate], alpha: float) -> list[str]:
    """Nodes whose failures concentrate: adjusted p < alpha and a rate above the rest's."""
    return [
        r.node
        for r in rates
        if r.p_adjusted is not None
        and r.p_adjusted < alpha
        and r.failures * r.rest_trials > r.rest_failures * r.trials
    ]


def _p(p: float) -> str:
    return "p<0.001" if p < 0.001 else f"p={p:.2g}"


def node_banner(rates: Sequence[NodeRate], alpha: float) -> str | None:
    """The matrix banner when failures concentrate on some node(s); None otherwise."""
    suspects = set(suspect_nodes(rates, alpha))
    if not suspects:
        return None
    parts = [
        f"{r.node} ({r.failures} of {r.trials} trials failed vs {r.rest_failures} of "
        f"{r.rest_trials} elsewhere, adjusted {_p(r.p_adjusted or 0.0)})"
        for r in rates
        if r.node in suspects
    ]
    return (
        f"failures concentrate on node{'s' if len(parts) > 1 else ''} {'; '.join(parts)}: "
        "a bad node is a confound too (all cells pooled). Exclude it and re-run: "
        "`aorta triage nodes RUN` prints the list."
    )


def exclusion_list(nodes: Sequence[str]) -> str:
    """`node1,node2`: what `sbatch --exclude` and oellm-autoexp's exclusion take."""
    return ",".join(dict.fromkeys(nodes))


def exclusion_document(nodes: Sequence[str]) -> dict[str, Any]:
    """The content of an oellm-autoexp `excluded_nodes.json` holding `nodes`."""
    return {"format": EXCLUSIONS_FORMAT, "nodes": list(dict.fromkeys(nodes))}
