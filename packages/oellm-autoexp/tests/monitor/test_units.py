"""Pure monitor pieces: classification metadata, policy decisions, log reading, time limits."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from compoconf import parse_config
from hypothesis import given
from hypothesis import strategies as st

from oellm_autoexp.config.interfaces import RestartPolicyInterface
from oellm_autoexp.errors import ConfigError
from oellm_autoexp.monitor.classify import classify_end, classify_stall
from oellm_autoexp.monitor.log_signals import (
    DEFAULT_SIGNALS,
    SignalSet,
    parse_signals,
    read_new,
    scan,
)
from oellm_autoexp.monitor.observation import resolve_log_path
from oellm_autoexp.monitor.policies import (
    RestartContext,
    format_time_limit,
    time_limit_seconds,
)
from oellm_autoexp.monitor.submission import array_spec
from oellm_autoexp.persistence import JobRecord
from oellm_autoexp.persistence.states import Mode
from oellm_autoexp.persistence.store import SessionCorruptError
from oellm_autoexp.slurm.client import JobInfo

OOM, NCCL, EXC = (
    next(s for s in DEFAULT_SIGNALS if s.name == n) for n in ("oom", "nccl", "exception")
)


def _end(state: str, code: int = 0, reason: str = "None", signals: tuple = (), **kw: bool):
    info = JobInfo("1", state, reason=reason, exit_code=code)
    return classify_end(
        info,
        list(signals),
        completed_marker=kw.get("marker", False),
        marker_required=kw.get("required", False),
    )


def test_cancelled_is_a_crash_with_error_type_cancelled_from_slurm() -> None:
    cls = _end("CANCELLED", signals=(EXC,))
    assert cls.mode is Mode.CRASH
    assert (cls.metadata["error_type"], cls.metadata["subsystem"]) == ("cancelled", "slurm")


def test_failed_takes_the_most_specific_log_signal_else_slurm_failure() -> None:
    assert _end("FAILED", 1, signals=(OOM, EXC)).error_type == "oom"
    assert _end("FAILED", 1, signals=(NCCL,)).metadata["subsystem"] == "distributed"
    plain = _end("FAILED", 1, "NonZeroExitCode")
    assert (plain.error_type, plain.metadata["exit_code"]) == ("slurm_failure", 1)
    assert _end("OUT_OF_MEMORY", 0).error_type == "oom"


def test_timeout_success_marker_and_lost_jobs() -> None:
    timeout = _end("TIMEOUT", reason="TimeLimit")
    assert (timeout.mode, timeout.error_type, timeout.metadata["reason"]) == (
        Mode.TIMEOUT,
        "timeout",
        "TimeLimit",
    )
    assert _end("COMPLETED").mode is Mode.SUCCESS
    assert _end("COMPLETED", required=True).error_type == "incomplete"
    assert _end("CANCELLED", marker=True, required=True).mode is Mode.SUCCESS
    lost = classify_end(None, [], completed_marker=False, marker_required=True)
    assert lost.error_type == "lost"
    assert classify_stall(700, 600).metadata["error_type"] == "hang"


def _policy(raw: dict):
    return parse_config(RestartPolicyInterface.cfgtype, raw).instantiate(RestartPolicyInterface)


def test_selective_policy_restarts_by_type_and_subsystem_and_never_on_excluded() -> None:
    policy = _policy(
        {
            "class_name": "SelectiveRestartPolicy",
            "restart_on_error_types": ["cancelled"],
            "restart_on_subsystems": ["distributed"],
            "exclude_error_types": ["oom"],
            "max_retries": 2,
        }
    )

    def decide(meta: dict, attempt: int = 0):
        return policy.decide(RestartContext("crash", meta, attempt))

    assert decide({"error_type": "cancelled", "subsystem": "slurm"}).restart
    assert decide({"error_type": "nccl", "subsystem": "distributed"}).restart
    assert not decide({"error_type": "oom", "subsystem": "distributed"}).restart
    assert not decide({"error_type": "exception", "subsystem": "python"}).restart
    spent = decide({"error_type": "cancelled"}, attempt=2)
    assert (spent.action, spent.reason) == ("stop", "retry budget spent (2/2)")
    assert policy.handles("stall") and not policy.handles("timeout")


def test_time_limit_policy_grows_the_limit_up_to_its_cap() -> None:
    policy = _policy(
        {"class_name": "TimeLimitRestartPolicy", "factor": 2, "max_time_limit": "01:30:00"}
    )
    first = policy.decide(RestartContext("timeout", {}, 0, "00:40:00"))
    assert (first.action, first.time_limit) == ("restart", "01:20:00")
    capped = policy.decide(RestartContext("timeout", {}, 1, "01:20:00"))
    assert capped.time_limit == "01:30:00"
    assert not policy.decide(RestartContext("timeout", {}, 2, "01:30:00")).restart
    assert time_limit_seconds("2-03") == 2 * 86400 + 3 * 3600
    assert time_limit_seconds("90") == 5400
    assert time_limit_seconds("5:30") == 330
    assert format_time_limit(90061) == "1-01:01:01"


def test_bad_policy_and_signal_configs_name_the_key() -> None:
    with pytest.raises(ConfigError, match=r"restart_policies.modes: unknown mode\(s\) explode"):
        _policy({"class_name": "AlwaysRestartPolicy", "modes": ["explode"]})
    with pytest.raises(ConfigError, match=r"monitoring.log_signals\[0\].pattern: invalid regex"):
        parse_signals([{"name": "x", "pattern": "("}])
    with pytest.raises(ConfigError, match=r"log_signals\[1\]: unknown key\(s\) colour"):
        parse_signals([{"name": "a", "pattern": "a"}, {"name": "b", "pattern": "b", "colour": 1}])


def test_read_new_returns_only_complete_new_lines(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_text("a\nb\npart")
    lines, offset = read_new(log, 0)
    assert (lines, offset) == (["a", "b"], 4)
    with log.open("a") as handle:
        handle.write("ial\nCUDA out of memory\n")
    lines, offset = read_new(log, offset)
    assert lines == ["partial", "CUDA out of memory"]
    assert [h.signal.name for h in scan(lines, DEFAULT_SIGNALS)] == ["oom"]
    log.write_text("new\n")  # truncated/rotated: read from the start
    assert read_new(log, offset)[0] == ["new"]


def test_log_paths_and_array_specs() -> None:
    assert resolve_log_path("/l/%x_%A_%a.out", "12_3", "sweep") == Path("/l/sweep_12_3.out")
    assert resolve_log_path("/l/j%j-100%%.out", "40", "x") == Path("/l/j40-100%.out")
    assert array_spec([5, 0, 1, 2, 7, 8]) == "0-2,5,7-8"
    assert array_spec([3]) == "3"


@given(
    st.lists(
        st.sampled_from(
            [
                "step 1 ok",
                "Traceback (most recent call last)",
                "  Traceback (most recent call last)",  # not at line start: no exception
                "loss 3.2",
                "loss nan",
                "CUDA out of memory",
                "saved checkpoint iter 10",
                "start",
                "ends",
            ]
        ),
        max_size=12,
    )
)
def test_scanning_a_text_chunk_finds_what_scanning_its_lines_finds(lines: list[str]) -> None:
    signals = [
        *DEFAULT_SIGNALS,
        *parse_signals(
            [
                {"name": "anchored", "pattern": r"\Astart"},  # \A: checked per line only
                {"name": "tail", "pattern": "ends$"},
            ]
        ),
    ]
    text = "".join(f"{line}\n" for line in lines)
    chunk = [(h.signal.name, h.line) for h in SignalSet(signals).scan_text(text)]
    per_line = [(h.signal.name, h.line) for h in scan(lines, signals)]
    assert chunk == per_line


def test_array_log_templates_with_percent_j_are_refused() -> None:
    # For an array task SLURM's %j is the task's own job id, not the array id the monitor knows.
    with pytest.raises(ValueError, match=r"uses %j.*name array logs with %A_%a"):
        resolve_log_path("/l/run_%j.out", "12_3", "sweep")
    assert resolve_log_path("/l/run_%%j_%A_%a.out", "12_3", "s") == Path("/l/run_%j_12_3.out")
    with pytest.raises(ValueError, match=r"job t: log path '/l/%j.out' uses %j"):
        JobRecord("k", "t", "s.sbatch", "s", "/l/%j.out", "/o", array_index=0)
    assert JobRecord("k", "t", "s.sbatch", "s", "/l/%j.out", "/o").log_path == "/l/%j.out"


def test_a_session_file_with_a_percent_j_array_log_is_one_line_error(
    tmp_path: Path, make_session: Any
) -> None:
    session, store = make_session(tmp_path, jobs=2)
    path = store.path(session.session_id)
    path.write_text(path.read_text().replace("sweep_%A_%a.out", "sweep_%j.out"))
    with pytest.raises(SessionCorruptError, match=r"uses %j.*%A_%a"):
        store.load(session.session_id)
