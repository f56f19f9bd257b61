"""Sweep expansion: product over mappings, union over lists, nesting, and type checks."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from oellm_autoexp.errors import ConfigError
from oellm_autoexp.sweep.expand import check_param_kinds, expand
from oellm_autoexp.sweep.ids import check_name, job_id, job_name


def test_mapping_is_the_product_of_its_axes_in_key_order() -> None:
    points = expand({"lr": [1, 2], "seed": [7, 8, 9], "steps": 10})
    assert len(points) == 6
    assert points[0] == {"lr": 1, "seed": 7, "steps": 10}
    assert points[1] == {"lr": 1, "seed": 8, "steps": 10}
    assert points[-1] == {"lr": 2, "seed": 9, "steps": 10}


def test_top_level_list_is_a_union_of_branches() -> None:
    points = expand([{"lr": [1, 2]}, {"lr": 5, "warmup": [0, 100]}])
    assert points == [{"lr": 1}, {"lr": 2}, {"lr": 5, "warmup": 0}, {"lr": 5, "warmup": 100}]


def test_alternatives_under_a_label_are_expanded_recursively_and_crossed_with_the_rest() -> None:
    points = expand(
        {
            "model": [{"hidden": 256, "layers": [2, 4]}, {"hidden": 512, "layers": 8}],
            "lr": [1, 2],
        }
    )
    # (2 + 1) model points x 2 lr; the label "model" is not a param.
    assert len(points) == 6
    assert {"hidden": 256, "layers": 4, "lr": 2} in points
    assert all("model" not in p for p in points)


def test_nested_mapping_gives_dotted_keys() -> None:
    points = expand({"backend": {"lr": [1, 2], "optim": {"beta": 0.9}}})
    assert points == [
        {"backend.lr": 1, "backend.optim.beta": 0.9},
        {"backend.lr": 2, "backend.optim.beta": 0.9},
    ]


def test_list_valued_param_is_written_as_a_list_of_lists() -> None:
    assert expand({"dims": [[1, 2], [3]]}) == [{"dims": [1, 2]}, {"dims": [3]}]


def test_empty_or_missing_axes_is_one_point() -> None:
    assert expand({}) == [{}]
    assert expand(None) == [{}]


@pytest.mark.parametrize(
    ("axes", "key", "words"),
    [
        ({"lr": [1e-4, "3e-4"]}, "sweep.axes.lr[1]", "mixed types"),
        ({"flag": [True, 1]}, "sweep.axes.flag[1]", "mixed types"),
        ({"lr": []}, "sweep.axes.lr", "empty axis"),
        ({"m": [{"a": 1}, 2]}, "sweep.axes.m", "mixes mappings"),
        ({"bad key": [1]}, "sweep.axes.bad key", "not a valid param key"),
        ([{"a": 1}, 3], "sweep.axes[1]", "expected a mapping"),
        ("lr=1,2", "sweep.axes", "expected a mapping or a list"),
    ],
)
def test_bad_axes_name_the_key_path(axes: object, key: str, words: str) -> None:
    with pytest.raises(ConfigError) as info:
        expand(axes)
    assert info.value.key == key
    assert words in str(info.value)
    assert "\n" not in str(info.value)


def test_null_mixes_with_any_kind_and_int_with_float() -> None:
    assert len(expand({"lr": [None, 1, 0.5]})) == 3


def test_same_param_with_different_types_across_branches_is_an_error() -> None:
    points = expand([{"lr": [1, 2]}, {"lr": "fast"}])
    with pytest.raises(ConfigError, match=r"job 2 sets 'fast' \(str\) but job 0 sets 1"):
        check_param_kinds(points)


axis_values = st.lists(st.integers(-1000, 1000), min_size=1, max_size=4, unique=True)


@given(st.dictionaries(st.from_regex(r"[a-z]{1,6}", fullmatch=True), axis_values, max_size=4))
def test_grid_size_is_the_product_of_axis_lengths_and_points_are_distinct(
    axes: dict[str, list[int]],
) -> None:
    points = expand(axes)
    assert len(points) == math.prod(len(v) for v in axes.values())
    ids = {job_id("p", point) for point in points}
    assert len(ids) == len(points)


def test_job_id_is_stable_across_processes_and_key_order() -> None:
    params = {"lr": 3e-4, "seed": 1, "name": "x", "dims": [1, 2]}
    here = job_id("proj", params)
    assert here == job_id("proj", dict(reversed(list(params.items()))))
    # Pinned: blake2b of canonical JSON, independent of PYTHONHASHSEED or the machine.
    assert here == job_id("proj", {"dims": [1, 2], "lr": 0.0003, "name": "x", "seed": 1})
    code = (
        "from oellm_autoexp.sweep.ids import job_id;"
        "print(job_id('proj', {'lr': 3e-4, 'seed': 1, 'name': 'x', 'dims': [1, 2]}))"
    )
    for seed in ("0", "12345"):
        out = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONHASHSEED": seed, "PATH": "/usr/bin:/bin"},
        )
        assert out.stdout.strip() == here
    assert job_id("other", params) != here
    assert job_id("proj", {**params, "seed": 2}) != here


def test_job_id_golden_value() -> None:
    # A changed id would orphan every running experiment's state: this value must never move.
    assert job_id("hello", {"lr": 0.0001, "steps": 100}) == job_id(
        "hello", {"steps": 100, "lr": 1e-4}
    )
    assert len(job_id("hello", {"lr": 0.0001})) == 12
    assert job_id("hello", {"lr": 0.0001}) == "00e4d2dc9c93"


@pytest.mark.parametrize("name", ["../etc", "a/b", "x y", "-rf", ".", "", "a;b", "$(id)", "é"])
def test_unsafe_job_names_are_rejected(name: str) -> None:
    with pytest.raises(ConfigError, match="not a safe name"):
        check_name(name, key="sweep.name_template", what="job name")


def test_name_template_renders_params_and_reports_unknown_fields() -> None:
    assert job_name("{project}_lr{lr}", {"project": "p", "lr": 0.1}, index=0) == "p_lr0.1"
    with pytest.raises(ConfigError) as info:
        job_name("{project}_{nope}", {"project": "p"}, index=3)
    assert info.value.key == "sweep.name_template"
    assert "job 3" in str(info.value)


def test_hex_digest_is_hashlibs_blake2b() -> None:
    import hashlib

    from oellm_autoexp.sweep.ids import hex_digest

    for data, size in (
        (b"", 6),
        (b'{"params":{"lr":0.0001},"project":"hello"}', 6),
        (b"x" * 999, 32),
    ):
        assert hex_digest(data, size) == hashlib.blake2b(data, digest_size=size).hexdigest()
