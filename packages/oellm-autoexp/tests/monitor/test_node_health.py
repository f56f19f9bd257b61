"""Flaky-node decisions (monitor.node_health): pure functions, no SLURM."""

from __future__ import annotations

from oellm_autoexp.monitor.node_health import (
    decide_exclusions,
    exclude_argument,
    expand_hostlist,
    node_level_failure,
)


def test_hostlists_expand_as_squeue_and_sacct_print_them() -> None:
    assert expand_hostlist("gpu[01-03,07],login1") == ["gpu01", "gpu02", "gpu03", "gpu07", "login1"]
    assert expand_hostlist("n[8-10]") == ["n8", "n9", "n10"]
    assert expand_hostlist("rack1-n[1-2]-ib") == ["rack1-n1-ib", "rack1-n2-ib"]
    assert expand_hostlist("node001") == ["node001"]
    assert expand_hostlist("None assigned") == []
    assert expand_hostlist("") == []


def test_only_node_level_error_types_blame_a_node() -> None:
    for error_type in ("node_failure", "nccl", "gpu_hardware"):
        assert node_level_failure({"error_type": error_type})
    for error_type in ("oom", "exception", "timeout", "hang", None):
        assert not node_level_failure({"error_type": error_type})


def _fail(error_type: str, nodes: str) -> dict[str, str]:
    return {"error_type": error_type, "nodes": nodes}


def test_a_node_is_excluded_after_n_node_level_failures_on_it() -> None:
    one = [_fail("nccl", "bad01")]
    assert decide_exclusions(one, [], after=2, limit=8).added == []
    two = [*one, _fail("node_failure", "bad01"), _fail("oom", "good01"), _fail("oom", "good01")]
    decision = decide_exclusions(two, [], after=2, limit=8)
    # The OOMs on good01 are the job's fault, not the node's.
    assert (decision.nodes, decision.added, decision.over_limit) == (["bad01"], ["bad01"], [])
    # Already excluded: nothing new.
    assert decide_exclusions(two, ["bad01"], after=2, limit=8).added == []
    assert decide_exclusions(two, [], after=0, limit=8).nodes == []


def test_a_multi_node_failure_counts_against_each_node_and_the_list_is_bounded() -> None:
    failures = [_fail("nccl", "gpu[01-03]"), _fail("gpu_hardware", "gpu[02-04]")]
    decision = decide_exclusions(failures, ["old9"], after=2, limit=2)
    # gpu02 and gpu03 both failed twice; only one fits next to the existing entry.
    assert decision.nodes == ["old9", "gpu02"]
    assert decision.added == ["gpu02"]
    assert decision.over_limit == ["gpu03"]


def test_exclude_argument_keeps_the_users_own_exclusions_first() -> None:
    assert exclude_argument(None, []) is None
    assert exclude_argument("n1", []) is None  # the script's own directive already says it
    assert exclude_argument(None, ["bad01"]) == "bad01"
    assert exclude_argument("n1,bad01", ["bad01", "bad02"]) == "n1,bad01,bad02"
