"""The `triage:` log-signal action: recipe generation, template checks, once per attempt."""

from __future__ import annotations

import json
import os
import stat
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from oellm_autoexp import api
from oellm_autoexp.cli import main
from oellm_autoexp.errors import ConfigError
from oellm_autoexp.monitor import MonitorController
from oellm_autoexp.monitor.log_signals import parse_signals
from oellm_autoexp.monitor.observation import resolve_log_path
from oellm_autoexp.monitor.triage_launch import (
    NO_COMMAND,
    TriageRequest,
    check_with_aorta,
    describe,
    launch_triage,
    load_template,
)
from oellm_autoexp.monitor.triage_recipe import (
    JobCommand,
    check_template,
    job_command,
    triage_recipe,
)
from oellm_autoexp.persistence import SessionStore
from oellm_autoexp.persistence.session import TriageEvent
from oellm_autoexp.plan import JobPlan, Plan
from oellm_autoexp.slurm.fake import FakeClock, FakeSlurmClient, Timeline

TEMPLATE: dict[str, Any] = {
    "schema_version": 1,
    "ticket": "NAN-1",
    "trials": 2,
    "steps": 5,
    "workload": {"step_marker": "^step ", "timeout": 60},
    "executor": {"slurm": {"partition": "debug", "max_concurrent": 4}},
    "cells": [
        {"name": "baseline", "mitigations": ["none"], "environment": "local"},
        {"name": "fix", "mitigations": ["none"], "environment": "local", "extra_env": {"X": "1"}},
    ],
}


# -- recipe generation (pure) ------------------------------------------------------------------
def test_the_recipe_is_the_template_plus_the_jobs_argv_as_data() -> None:
    command = JobCommand(
        ("python", "-c", "print({'loss': 1})", "--save", "/runs/jobs/a/ckpt", "$(rm -rf ~)"),
        {"A": "1"},
        "/runs/jobs/a",
    )
    before = json.dumps(TEMPLATE, sort_keys=True)
    recipe = triage_recipe(TEMPLATE, command)
    assert json.dumps(TEMPLATE, sort_keys=True) == before  # the template is not modified
    assert recipe["workload"] == {
        "step_marker": "^step ",
        "timeout": 60,
        # braces escaped for aorta's placeholders; the job's output dir becomes the trial's
        # own; shell text stays one literal argument
        "command": [
            "python",
            "-c",
            "print({{'loss': 1}})",
            "--save",
            "{output_dir}/ckpt",
            "$(rm -rf ~)",
        ],
    }
    # Everything else passes through unchanged, the SLURM executor included.
    assert {k: v for k, v in recipe.items() if k != "workload"} == {
        k: v for k, v in TEMPLATE.items() if k != "workload"
    }


def test_a_template_without_workload_settings_gets_a_bare_command_workload() -> None:
    recipe = triage_recipe({"trials": 1, "steps": 1, "cells": []}, JobCommand(("true",), {}, ""))
    assert recipe["workload"] == {"command": ["true"]}


def _planned(job_id: str, name: str, command: list[str], env: dict[str, str], out: str) -> Any:
    return JobPlan(
        job_id=job_id,
        name=name,
        index=0,
        params={},
        command=tuple(command),
        env=env,
        output_dir=Path(out),
        log_path=f"{out}/%j.out",
        script=Path("/plan/scripts/x.sbatch"),
        sbatch={},
    )


def _plan(*jobs: JobPlan) -> Plan:
    return Plan("p", Path("/r"), Path("/plan"), "p1", "sbatch", jobs=jobs, scripts=())


def test_the_job_command_is_read_from_the_plan_with_launcher_and_layered_env() -> None:
    config = {
        "slurm": {
            "launcher_cmd": "apptainer exec 'my image.sif'",
            "env": {"SHARED": "s", "FLAG": True, "EMPTY": None, "OVER": "cluster"},
        }
    }
    plan = _plan(
        _planned("other", "o", ["x"], {}, "/o"),
        _planned("j1", "lr1", ["python", "train.py"], {"OVER": "backend", "B": "b"}, "/r/j"),
    )
    got = job_command(plan, config, "j1", {"B": "restart"})
    assert got == JobCommand(
        ("apptainer", "exec", "my image.sif", "python", "train.py"),
        {
            "SHARED": "s",
            "FLAG": "true",
            "EMPTY": "",
            "OVER": "backend",
            "B": "restart",
            "AUTOEXP_JOB_ID": "j1",
            "AUTOEXP_JOB_NAME": "lr1",
        },
        "/r/j",
    )
    assert job_command(plan, config, "watched-log", {}) is None
    assert job_command(None, config, "j1", {}) is None  # watched logs have no plan
    empty = _plan(_planned("j1", "lr1", [], {}, "/r/j"))
    assert job_command(empty, config, "j1", {}) is None


# -- template checks ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ([1, 2], "expected a mapping (an aorta recipe without workload.command), got list"),
        ({**TEMPLATE, "workload": "fsdp"}, "workload: expected a mapping"),
        ({**TEMPLATE, "workload": {"command": ["x"]}}, "workload.command: leave it out"),
    ],
)
def test_a_bad_template_is_one_line_naming_the_key_and_the_file(data: Any, expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        check_template(data, where="/t/nan.yaml", key="monitoring.log_signals[0].triage")
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("monitoring.log_signals[0].triage: /t/nan.yaml: ")
    assert expected in message


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"cels": []}, "cels: unknown key 'cels' in the recipe"),
        ({"steps": None}, "steps: "),
        ({"workload": {"stepmarker": "x"}}, "workload.stepmarker: unknown key"),
        (
            {"cells": [{"name": "a", "mitigations": ["nonex"], "environment": "local"}]},
            "cells[0].mitigations[0]: unknown mitigation 'nonex'",
        ),
        ({"executor": {"slurm": {"partiton": "x"}}}, "partiton"),
    ],
)
def test_aorta_itself_judges_the_template_at_plan_time(
    tmp_path: Path, change: dict[str, Any], expected: str
) -> None:
    """No copy of aorta's schema here: the real aorta's dry run refuses what aorta would."""
    path = tmp_path / "nan.yaml"
    template = {k: v for k, v in {**TEMPLATE, **change}.items() if v is not None}
    key = "monitoring.log_signals[0].triage"
    with pytest.raises(ConfigError) as caught:
        check_with_aorta(template, path=path, key=key)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"{key}: aorta refuses the template: {path}: ")
    assert expected in message
    check_with_aorta(TEMPLATE, path=path, key=key)  # the unchanged template passes


def test_plan_without_aorta_says_the_action_needs_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "t.yaml").write_text(yaml.safe_dump(TEMPLATE))
    config = _experiment(tmp_path, str(tmp_path / "t.yaml"))
    monkeypatch.setenv("AUTOEXP_AORTA", str(tmp_path / "no-aorta-here"))
    assert main(["plan", str(config)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "the triage: action needs aorta" in line
    assert "AUTOEXP_AORTA" in line
    assert not (tmp_path / "runs").exists()


def test_template_files_missing_or_malformed_are_config_errors(tmp_path: Path) -> None:
    key = "monitoring.log_signals[2].triage"
    with pytest.raises(ConfigError, match=r"\[2\]\.triage: .*nope\.yaml does not exist"):
        load_template(tmp_path / "nope.yaml", key=key)
    with pytest.raises(ConfigError, match=r"is not a regular file"):
        load_template(tmp_path, key=key)
    broken = tmp_path / "broken.yaml"
    broken.write_text("cells: [\n")
    with pytest.raises(ConfigError) as caught:
        load_template(broken, key=key)
    assert str(caught.value).startswith(f"{broken}:")  # file:line:column of the YAML error
    assert key in str(caught.value)


def test_the_signal_value_must_be_a_path() -> None:
    with pytest.raises(ConfigError, match=r"log_signals\[0\]\.triage: expected the path"):
        parse_signals([{"name": "nan", "pattern": "nan", "triage": ["a.yaml"]}])
    (signal,) = parse_signals([{"name": "nan", "pattern": "nan", "triage": "/t.yaml"}])
    assert signal.triage == "/t.yaml"


def _experiment(tmp_path: Path, triage: str) -> Path:
    config = tmp_path / "exp.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "project": {"name": "nan", "base_output_dir": str(tmp_path / "runs")},
                "backend": {"class_name": "CommandBackend", "argv": ["python3", "-V"]},
                "slurm": {"use_srun": False},
                "monitoring": {
                    "class_name": "LogMonitor",
                    "termination_str": "done",
                    "log_signals": [{"name": "nan", "pattern": "loss: nan", "triage": triage}],
                },
            }
        )
    )
    return config


def test_plan_refuses_a_bad_template_in_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "t.yaml").write_text(yaml.safe_dump({**TEMPLATE, "typo": 1}))
    config = _experiment(tmp_path, str(tmp_path / "t.yaml"))
    assert main(["plan", str(config)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"oellm-autoexp: error: {config}: monitoring.log_signals[0].triage: ")
    assert f"aorta refuses the template: {tmp_path / 't.yaml'}: typo: unknown key 'typo'" in line
    assert not (tmp_path / "runs").exists()  # nothing planned


def test_plan_keeps_the_template_as_an_absolute_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "t.yaml").write_text(yaml.safe_dump(TEMPLATE))
    monkeypatch.chdir(tmp_path)
    result = api.plan(_experiment(tmp_path, "t.yaml"), test_only="never")
    (signal,) = result.config["monitoring"]["log_signals"]
    assert signal["triage"] == str(tmp_path / "t.yaml")


# -- once per attempt (the controller, with a recording launcher) ------------------------------
class Recorder:
    """Stands in for `launch_triage` (the process start is tested below and end to end)."""

    def __init__(self, error: str | None = None) -> None:
        self.requests: list[TriageRequest] = []
        self.error = error  # what a start that fails reports (e.g. aorta not found)

    def __call__(self, request: TriageRequest) -> TriageEvent:
        self.requests.append(request)
        event = TriageEvent(
            request.attempt, request.signal, request.line, request.at, request.template
        )
        return replace(event, error=self.error) if self.error else replace(event, pid=7)


def _nan_session(tmp_path: Path, make_session: Any) -> tuple[Any, SessionStore]:
    session, store = make_session(
        tmp_path,
        jobs=1,
        array=False,
        monitor={
            "log_signals": [{"name": "nan", "pattern": "loss: nan", "triage": "/t/nan.yaml"}],
            "restart_backoff_seconds": 1.0,
        },
        policies=[{"class_name": "AlwaysRestartPolicy", "max_retries": 1}],
    )
    job = session.jobs["k0"]
    session.config = {}  # no backend to rewrite restarts: the restart reruns the same script
    session.plan = _plan(
        _planned("k0", job.name, ["python", "train.py"], {"A": "1"}, job.output_dir)
    )
    store.save(session)
    return session, store


def _nan_cluster(clock: FakeClock, job: Any, **timeline: Any) -> FakeSlurmClient:
    """A fake SLURM on which every attempt of `job` logs two NaN lines, 10 s apart."""
    lines = ((2.0, "step 3 loss: nan"), (12.0, "step 4 loss: nan"))
    return FakeSlurmClient(
        clock,
        lambda _request, slurm_id, _attempt: Timeline(
            log_path=resolve_log_path(job.log_path, slurm_id, job.slurm_name),
            log_lines=lines,
            **timeline,
        ),
    )


def test_a_signal_starts_one_triage_per_attempt_even_after_a_monitor_restart(
    tmp_path: Path, make_session: Any
) -> None:
    session, store = _nan_session(tmp_path, make_session)
    job = session.jobs["k0"]
    clock = FakeClock()
    fake = _nan_cluster(clock, job, run_s=30, end_state="FAILED", exit_code=1)
    recorder = Recorder()
    first = MonitorController(fake, store, [session], clock=clock, start_triage=recorder)
    for _ in range(4):  # up to t=15: both NaN lines of the first attempt read, in two polls
        first.poll_once()
        clock.advance(5)
    assert [r.attempt for r in recorder.requests] == ["1000"]
    (request,) = recorder.requests
    assert request.line == "step 3 loss: nan"
    assert request.command == JobCommand(
        ("python", "train.py"),
        {"A": "1", "AUTOEXP_JOB_ID": "k0", "AUTOEXP_JOB_NAME": "job0"},
        job.output_dir,
    )
    actions = first.drain_actions()
    assert [a.action for a in actions if a.action.startswith("triage")] == ["triage_started"]
    saved = store.load(session.session_id).jobs["k0"]
    assert [(t.attempt, t.pid) for t in saved.triages] == [("1000", 7)]

    # A restarted monitor reads the log again from offset 0: the saved record stops it.
    reread = store.load(session.session_id)
    reread.jobs["k0"].log_offset = 0
    again = MonitorController(fake, store, [reread], clock=clock, start_triage=recorder)
    again.run(sleep=lambda _s: clock.advance(5), max_polls=40)
    # ... but the restart is a new attempt with its own triage.
    assert [r.attempt for r in recorder.requests] == ["1000", "1001"]
    final = store.load(session.session_id).jobs["k0"]
    assert [t.attempt for t in final.triages] == ["1000", "1001"]
    assert [a.job_id for a in final.attempts] == ["1000", "1001"]


def test_a_triage_that_could_not_start_is_recorded_once_not_retried(
    tmp_path: Path, make_session: Any
) -> None:
    session, store = _nan_session(tmp_path, make_session)
    job = session.jobs["k0"]
    clock = FakeClock()
    fake = _nan_cluster(clock, job, run_s=None)
    recorder = Recorder(error="'aorta' not found")
    controller = MonitorController(fake, store, [session], clock=clock, start_triage=recorder)
    for _ in range(4):  # both NaN lines read, in two polls
        controller.poll_once()
        clock.advance(5)
    assert len(recorder.requests) == 1
    (failed,) = [a for a in controller.drain_actions() if a.action.startswith("triage")]
    assert failed.action == "triage_failed"
    assert failed.line == "triage of attempt 1000 (signal nan): not started: 'aorta' not found"
    assert failed.job_id == "1000"
    (event,) = store.load(session.session_id).jobs["k0"].triages
    assert (event.pid, event.error) == (None, "'aorta' not found")


# -- the launcher (with a stand-in `aorta` executable) -----------------------------------------
def _request(tmp_path: Path, template: Path, command: JobCommand | None) -> TriageRequest:
    return TriageRequest(
        attempt="1000_3",
        signal="nan",
        line="step 3 loss: nan",
        at=1.0,
        template=str(template),
        job_output_dir=str(tmp_path / "runs" / "jobs" / "a"),
        output_root=str(tmp_path / "runs"),
        command=command,
    )


def test_launch_writes_the_recipe_and_starts_aorta_detached_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    template = tmp_path / "t.yaml"
    template.write_text(yaml.safe_dump(TEMPLATE))
    seen = tmp_path / "seen.json"
    fake_aorta = tmp_path / "bin" / "aorta"
    fake_aorta.parent.mkdir()
    go = tmp_path / "go"
    # Waits (at most 20 s) for the test's go-ahead, then reports what it was started with.
    fake_aorta.write_text(
        "#!/usr/bin/env python3\nimport json, os, sys, time\n"
        f"end = time.monotonic() + 20\nwhile not os.path.exists({str(go)!r}) and "
        "time.monotonic() < end:\n    time.sleep(0.02)\n"
        "data = {'argv': sys.argv[1:], 'sid': os.getsid(0), 'job': os.environ['JOB_VAR']}\n"
        f"json.dump(data, open({str(seen)!r} + '.tmp', 'w'))\n"
        f"os.replace({str(seen)!r} + '.tmp', {str(seen)!r})\nprint('aorta says hi')\n"
    )
    fake_aorta.chmod(fake_aorta.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("AUTOEXP_AORTA", str(fake_aorta))
    command = JobCommand(("python", "train.py"), {"JOB_VAR": "from the job"}, "/elsewhere")
    event = launch_triage(_request(tmp_path, template, command))
    assert event.error is None and event.pid is not None
    directory = tmp_path / "runs" / "jobs" / "a" / "triage" / "1000_3"
    assert event.directory == str(directory)
    assert event.recipe == str(directory / "recipe.yaml")
    # The monitor did not wait: the stand-in is still waiting for its go-ahead.
    assert Path(f"/proc/{event.pid}").exists()
    assert not seen.exists()
    go.touch()
    deadline = time.monotonic() + 10
    while not seen.exists():
        assert time.monotonic() < deadline, "the stand-in aorta never ran"
        time.sleep(0.05)
    ran = json.loads(seen.read_text())
    while "aorta says hi" not in (directory / "aorta.log").read_text():  # its stdout
        assert time.monotonic() < deadline, "the stand-in's output never reached aorta.log"
        time.sleep(0.05)
    assert ran["argv"] == [
        "triage",
        "run",
        "--recipe",
        str(directory / "recipe.yaml"),
        "--output-dir",
        str(directory / "runs"),
        "--progress",
        "plain",
    ]
    assert ran["sid"] == event.pid  # its own session: a Ctrl-C to the monitor does not reach it
    assert ran["sid"] != os.getsid(0)
    assert ran["job"] == "from the job"
    recipe = yaml.safe_load((directory / "recipe.yaml").read_text())
    assert recipe == triage_recipe(TEMPLATE, command)
    assert stat.S_IMODE((directory / "launch.json").stat().st_mode) == 0o600
    # The same attempt again (e.g. a monitor that lost its session write): refused.
    twice = launch_triage(_request(tmp_path, template, command))
    assert twice.pid is None
    assert twice.error is not None and "already started" in twice.error
    assert "not started: " in describe(twice)


def test_launch_without_aorta_or_without_a_command_records_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    template = tmp_path / "t.yaml"
    template.write_text(yaml.safe_dump(TEMPLATE))
    monkeypatch.setenv("AUTOEXP_AORTA", str(tmp_path / "no-such-aorta"))
    command = JobCommand(("python",), {}, "")
    missing = launch_triage(_request(tmp_path, template, command))
    assert missing.pid is None
    assert missing.error is not None
    assert "not found: pip install aorta" in missing.error and "AUTOEXP_AORTA" in missing.error
    assert not (tmp_path / "runs").exists()  # nothing was written
    watched = launch_triage(_request(tmp_path, template, None))
    assert watched.error == NO_COMMAND


def test_triage_events_survive_the_session_file(tmp_path: Path, make_session: Any) -> None:
    session, store = make_session(tmp_path, jobs=1)
    event = TriageEvent("1000", "nan", "loss: nan", 5.0, "/t.yaml", "/d", "/d/r", "/d/o", "/l", 42)
    session.jobs["k0"].triages.append(event)
    store.save(session)
    assert store.load(session.session_id).jobs["k0"].triages == [event]
