"""`aorta.runner.host_load`: the host's load over a trial, sampled cheaply, read back strictly."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from aorta_testing import make_trial

from aorta.runner import RunRequest, run_trials
from aorta.runner.host_load import HostLoad, LoadSampler, read_loadavg
from aorta.runner.models import TrialResult


def write_loadavg(path: Path, one_minute: float) -> None:
    path.write_text(f"{one_minute:.2f} 0.50 0.40 2/300 12345\n")


def test_sampler_keeps_the_range_and_takes_at_most_one_sample_per_interval(
    tmp_path: Path,
) -> None:
    loadavg = tmp_path / "loadavg"
    sampler = LoadSampler(interval_s=10.0, path=str(loadavg))
    assert sampler.record() is None  # nothing sampled yet
    write_loadavg(loadavg, 0.4)
    sampler.sample(100.0, force=True)
    write_loadavg(loadavg, 9.0)
    sampler.sample(105.0)  # within the interval: not read
    write_loadavg(loadavg, 3.1)
    sampler.sample(110.0)
    write_loadavg(loadavg, 1.0)
    sampler.sample(111.0, force=True)  # the end of a trial is always sampled
    assert sampler.record() == HostLoad(0.4, 3.1, 3, os.cpu_count())


def test_unreadable_loadavg_records_nothing(tmp_path: Path) -> None:
    assert read_loadavg(str(tmp_path / "missing")) is None
    (tmp_path / "garbage").write_text("not a number\n")
    sampler = LoadSampler(path=str(tmp_path / "garbage"))
    sampler.sample(0.0, force=True)
    assert sampler.record() is None


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc/loadavg")
def test_reads_this_hosts_loadavg() -> None:
    value = read_loadavg()
    assert value is not None and value >= 0.0


def test_trial_record_round_trips_host_load_and_old_records_still_load() -> None:
    load = HostLoad(0.5, 2.25, 4, 16)
    trial = make_trial(0, passed=True, step_times_ms=[1.0], host_load=load)
    data = json.loads(json.dumps(trial.to_dict()))
    assert data["host_load"] == {"min_1m": 0.5, "max_1m": 2.25, "samples": 4, "cpus": 16}
    assert TrialResult.from_dict(data) == trial
    del data["host_load"]  # written before the field existed
    assert TrialResult.from_dict(data).host_load is None


@pytest.mark.parametrize(
    ("host_load", "message"),
    [
        ([1.0], "host_load: expected a mapping, got list"),
        (
            {"min_1m": 1, "max_1m": 2, "samples": 1, "cpus": 2, "x": 1},
            "host_load: unknown key(s) x",
        ),
        ({"min_1m": -1, "max_1m": 2, "samples": 1, "cpus": 2}, "host_load.min_1m: expected a load"),
        (
            {"min_1m": 1, "max_1m": "2", "samples": 1, "cpus": 2},
            "host_load.max_1m: expected a load",
        ),
        (
            {"min_1m": 3, "max_1m": 2, "samples": 1, "cpus": 2},
            "host_load.max_1m: expected >= min_1m",
        ),
        ({"min_1m": 1, "max_1m": 2, "samples": 0, "cpus": 2}, "host_load.samples: expected an"),
        ({"min_1m": 1, "max_1m": 2, "samples": 1, "cpus": True}, "host_load.cpus: expected a CPU"),
    ],
)
def test_bad_host_load_is_a_value_error_naming_the_key(host_load: Any, message: str) -> None:
    data = make_trial(0, passed=True, step_times_ms=[1.0]).to_dict()
    data["host_load"] = host_load
    with pytest.raises(ValueError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        TrialResult.from_dict(data)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc/loadavg")
@pytest.mark.usefixtures("plugin")
def test_in_process_trials_record_the_load_at_their_start_and_end(tmp_path: Path) -> None:
    (result,) = run_trials(RunRequest(workload="toy", output_dir=tmp_path, trials=1, steps=3))
    assert result.host_load is not None and result.host_load.samples >= 2
    on_disk = json.loads((tmp_path / "trial_0.json").read_text())
    assert on_disk["host_load"]["cpus"] == os.cpu_count()
