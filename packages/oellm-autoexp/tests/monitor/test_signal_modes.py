"""What a log signal's `mode` and `on_match` mean for classification, and permanent exit codes."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from compoconf import parse_config

from oellm_autoexp.config.interfaces import RestartPolicyInterface
from oellm_autoexp.errors import ConfigError
from oellm_autoexp.monitor.classify import classify_end
from oellm_autoexp.monitor.log_signals import DEFAULT_SIGNALS, LogSignal, parse_signals
from oellm_autoexp.monitor.policies import RestartContext
from oellm_autoexp.monitor.settings import load_settings
from oellm_autoexp.persistence.states import Mode
from oellm_autoexp.slurm.client import JobInfo

SELECTIVE_PRESET = Path(__file__).resolve().parents[2] / "config" / "restart" / "selective.yaml"
EVAL_DONE = LogSignal("eval_done", "EVAL DONE", regex=False, mode="success")
OUT_OF_TIME = LogSignal("out_of_time", "exiting: time budget", regex=False, mode="timeout")
NO_PROGRESS = LogSignal("no_progress", "no progress for", regex=False, mode="stall")
OOM = next(s for s in DEFAULT_SIGNALS if s.name == "oom")


def _end(state: str, code: int | None, signals: list[LogSignal], **kw: bool):
    return classify_end(
        JobInfo("1", state, exit_code=code),
        signals,
        completed_marker=kw.get("marker", False),
        marker_required=kw.get("required", True),
    )


def test_a_success_signal_and_exit_0_is_success_even_when_a_marker_is_required() -> None:
    assert _end("COMPLETED", 0, [EVAL_DONE]).mode is Mode.SUCCESS
    # Without it, the same exit is incomplete (the termination marker is missing) ...
    assert _end("COMPLETED", 0, []).error_type == "incomplete"
    # ... and a success signal does not turn a failed exit into success.
    assert _end("FAILED", 1, [EVAL_DONE]).mode is Mode.CRASH


def test_timeout_and_stall_signals_classify_a_failed_or_clean_exit() -> None:
    timeout = _end("FAILED", 1, [OUT_OF_TIME])
    assert (timeout.mode, timeout.error_type, timeout.metadata["signal_name"]) == (
        Mode.TIMEOUT,
        "timeout",
        "out_of_time",
    )
    # A graceful exit 0 at the time budget (Megatron's --exit-duration-in-mins) is a timeout too.
    assert _end("COMPLETED", 0, [OUT_OF_TIME]).mode is Mode.TIMEOUT
    stall = _end("FAILED", 1, [NO_PROGRESS])
    assert (stall.mode, stall.error_type) == (Mode.STALL, "hang")


def test_a_crash_signal_keeps_its_error_type_when_the_job_exits_0() -> None:
    for required in (True, False):
        cls = _end("COMPLETED", 0, [OOM], required=required)
        assert (cls.mode, cls.error_type, cls.metadata["subsystem"]) == (Mode.CRASH, "oom", "cuda")
    # The completion marker still wins: the run reported success after the line.
    assert _end("COMPLETED", 0, [OOM], marker=True).mode is Mode.SUCCESS
    # What SLURM did to the job stays SLURM's fact.
    assert _end("CANCELLED", 0, [OUT_OF_TIME]).error_type == "cancelled"


def test_the_users_signals_are_preferred_over_the_pre_registered_ones() -> None:
    settings = load_settings(
        {
            "monitor": {
                "class_name": "LogMonitor",
                "log_signals": [
                    {"name": "out_of_time", "pattern": "exiting: time budget", "mode": "timeout"}
                ],
            }
        }
    )
    assert [s.name for s in settings.ranked][:2] == ["out_of_time", "gpu_hardware"]
    # The job printed a traceback when it gave up: the user's signal says what happened.
    seen = {"exception", "out_of_time"}
    signals = [s for s in settings.ranked if s.name in seen]
    assert _end("FAILED", 1, signals).mode is Mode.TIMEOUT


@pytest.mark.parametrize(
    ("code", "error_type"), [(2, "usage"), (126, "cannot_execute"), (127, "cannot_execute")]
)
def test_exit_2_126_127_are_permanent_for_the_selective_preset(code: int, error_type: str) -> None:
    cls = _end("FAILED", code, [], required=False)
    assert (cls.error_type, cls.metadata["subsystem"]) == (error_type, "job")
    preset = yaml.safe_load(SELECTIVE_PRESET.read_text())["policies"][0]
    policy = parse_config(RestartPolicyInterface.cfgtype, preset).instantiate(
        RestartPolicyInterface
    )
    decision = policy.decide(RestartContext("crash", cls.metadata, 0))
    assert decision.action == "stop"
    assert error_type in decision.reason
    # A plain non-zero exit stays a (retried) slurm_failure.
    other = _end("FAILED", 1, [], required=False)
    assert other.error_type == "slurm_failure"
    assert policy.decide(RestartContext("crash", other.metadata, 0)).restart


def test_permanent_types_stop_under_any_selective_policy_unless_listed() -> None:
    def policy(**raw: object):
        config = {"class_name": "SelectiveRestartPolicy", "default_action": "restart", **raw}
        return parse_config(RestartPolicyInterface.cfgtype, config).instantiate(
            RestartPolicyInterface
        )

    usage = {"error_type": "usage", "subsystem": "job", "exit_code": 2}
    assert not policy().decide(RestartContext("crash", usage, 0)).restart
    listed = policy(restart_on_error_types=["usage"])
    assert listed.decide(RestartContext("crash", usage, 0)).restart


def test_on_match_is_checked_and_defaults_to_record() -> None:
    (plain,) = parse_signals([{"name": "a", "pattern": "x"}])
    assert (plain.on_match, plain.acts) == ("record", False)
    (cancel,) = parse_signals([{"name": "a", "pattern": "x", "on_match": "cancel"}])
    assert cancel.acts
    with pytest.raises(ConfigError) as err:
        parse_signals([{"name": "a", "pattern": "x", "on_match": "kill"}])
    assert str(err.value) == (
        "monitoring.log_signals[0].on_match: on_match must be one of record, cancel, restart, "
        "got 'kill'"
    )
