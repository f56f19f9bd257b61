"""`JobContext`: `replace` copies it; `output_dir` is one Path, given as a Path or its text."""

from __future__ import annotations

from pathlib import Path

import pytest

from oellm_autoexp.backends.base import JobContext


def _ctx(output_dir: Path | str) -> JobContext:
    return JobContext("id1", "job", 3, {"lr": 0.1}, output_dir, "proj", world_size=8)


def test_text_and_path_give_the_same_context() -> None:
    from_text, from_path = _ctx("/out/jobs/job"), _ctx(Path("/out/jobs/job"))
    assert from_text == from_path
    assert from_text.output_dir == Path("/out/jobs/job")
    assert from_text.output_dir is from_text.output_dir  # made once
    assert from_text.format_fields() == from_path.format_fields()
    assert from_text.format_fields()["output_dir"] == from_path.output_dir_text == "/out/jobs/job"
    assert from_text.cluster_env == {}


def test_replace_makes_a_changed_copy() -> None:
    ctx = _ctx("/out/jobs/job")
    changed = ctx.replace(params={"lr": 0.2})
    assert changed.params == {"lr": 0.2} and ctx.params == {"lr": 0.1}
    assert (changed.job_id, changed.output_dir, changed.world_size) == (
        ctx.job_id,
        ctx.output_dir,
        ctx.world_size,
    )
    assert changed != ctx
    with pytest.raises(TypeError, match="no field 'nope'"):
        ctx.replace(nope=1)
