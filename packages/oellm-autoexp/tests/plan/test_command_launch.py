"""The command backend formats each template exactly as `str.format_map` over the job's fields."""

from __future__ import annotations

from pathlib import Path

import pytest

from oellm_autoexp.backends.base import JobContext
from oellm_autoexp.backends.command import CommandBackend, CommandBackendConfig

TEMPLATES = [
    "plain",
    "{lr}",  # one field: the compiled fast path
    "{flag}",
    "{none}",
    "{steps}",
    "{output_dir}",
    "{lr:.3e}",  # a format spec
    "{lr!r}",  # a conversion
    "--lr={lr}",  # text around a field
    "{name}-{index}",
    "{{lr}}",  # escaped braces: literal text
    "x}}",  # no "{": taken as is, never formatted
    "{backend_lr}",  # a dotted param under its underscore name
]


def _job() -> JobContext:
    params = {"lr": 3e-4, "flag": True, "none": None, "steps": 10, "backend.lr": 0.5}
    return JobContext("abc123", "job_a", 7, params, Path("/out/jobs/job_a"), "proj")


def test_templates_format_as_format_map() -> None:
    job = _job()
    config = CommandBackendConfig(argv=TEMPLATES, env={f"V{i}": t for i, t in enumerate(TEMPLATES)})
    launch = CommandBackend(config).build_launch(job)
    fields = job.format_fields()
    expected = [t.format_map(fields) if "{" in t else t for t in TEMPLATES]
    assert list(launch.argv) == expected
    assert list(launch.env.values()) == expected
    assert launch.argv[1] == "0.0003" and launch.argv[-3] == "{lr}"


def test_a_missing_field_raises_as_format_map_does() -> None:
    backend = CommandBackend(CommandBackendConfig(argv=["run", "{nope}"]))
    with pytest.raises(KeyError, match="nope"):
        backend.build_launch(_job())
