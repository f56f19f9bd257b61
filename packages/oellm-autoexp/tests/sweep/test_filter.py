"""`sweep.filter`: the safe expression language and what it keeps."""

from __future__ import annotations

from typing import Any

import pytest

from oellm_autoexp.errors import ConfigError
from oellm_autoexp.sweep.expand import expand
from oellm_autoexp.sweep.filter import compile_filter, filter_points

GRID = expand({"lr": [0.1, 0.2, 0.3], "batch": [1, 2, 4]})


def _kept(expression: str | list[str], points: list[dict[str, Any]] = GRID) -> list[Any]:
    return [tuple(p.values()) for p in filter_points(expression, points)]


def test_the_issue_example_keeps_exactly_the_combinations_under_the_budget() -> None:
    kept = filter_points("lr * batch <= 0.5", GRID)
    assert [(p["lr"], p["batch"]) for p in kept] == [
        (0.1, 1),
        (0.1, 2),
        (0.1, 4),
        (0.2, 1),
        (0.2, 2),
        (0.3, 1),
    ]


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("batch in [1, 4] and not lr == 0.2", [(0.1, 1), (0.1, 4), (0.3, 1), (0.3, 4)]),
        ("1 < batch < 4", [(0.1, 2), (0.2, 2), (0.3, 2)]),
        ("lr >= 0.3 or batch // 2 == 2", [(0.1, 4), (0.2, 4), (0.3, 1), (0.3, 2), (0.3, 4)]),
        ("(batch if lr > 0.2 else 0) > 1", [(0.3, 2), (0.3, 4)]),
        ("batch ** 2 % 3 == 1 and -lr < -0.25", [(0.3, 1), (0.3, 2), (0.3, 4)]),
        (["batch > 1", "lr < 0.2"], [(0.1, 2), (0.1, 4)]),  # a list: all must hold
    ],
)
def test_operators_and_lists_of_expressions(
    expression: str | list[str], expected: list[tuple[float, int]]
) -> None:
    assert _kept(expression) == expected


def test_dotted_params_strings_and_yaml_constants() -> None:
    points = expand(
        {"opt": ["adam", "sgd"], "model": {"hidden": [256, 512]}, "compile": [True, False]}
    )
    kept = filter_points('opt != "sgd" and model.hidden >= 512 and compile == true', points)
    assert kept == [{"opt": "adam", "model.hidden": 512, "compile": True}]


def test_no_filter_keeps_everything() -> None:
    assert filter_points(None, GRID) == GRID
    assert filter_points([], GRID) == GRID


@pytest.mark.parametrize(
    ("expression", "fragment"),
    [
        ("__import__('os').system('true')", "is not allowed"),
        ("().__class__.__bases__", "is not allowed"),
        ("'x'.upper() == 'X'", "is not allowed"),
        ("[b for b in (1, 2)] == [1]", "is not allowed"),
        ("(lambda: 1)() == 1", "is not allowed"),
        ("(x := 1) == 1", "is not allowed"),
        ("lr[0] == 1", "is not allowed"),
        ("batch > 1 if", "not a valid expression"),
        ("btach > 1", "'btach', which is not a sweep param (params: batch, lr)"),
        ("  ", "empty expression"),
    ],
)
def test_anything_outside_the_whitelist_is_a_one_line_config_error(
    expression: str, fragment: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        filter_points(expression, GRID)
    message = str(caught.value)
    assert message.startswith("sweep.filter: ")
    assert fragment in message
    assert "\n" not in message


@pytest.mark.parametrize(
    ("expression", "fragment"),
    [
        ("lr * batch", "gives 0.1 for combination 0, expected true or false"),
        ("lr / (batch - 1) < 1", "division by zero in combination 0 (lr=0.1 batch=1)"),
        ("batch ** 100000 > 1", "is too large"),
        ("10.0 ** 400 > lr", "cannot apply it to 10.0, 400"),
        ("'a' * batch == 'aa'", "arithmetic needs numbers, got 'a'"),
        ("lr < 'x'", "cannot apply it to 0.1, 'x'"),
        ("lr > 1", "keeps none of the 9 combinations"),
    ],
)
def test_evaluation_failures_name_the_key_and_the_combination(
    expression: str, fragment: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        filter_points(expression, GRID)
    assert str(caught.value).startswith("sweep.filter: ")
    assert fragment in str(caught.value)


def test_a_param_missing_from_one_branch_of_a_union_is_reported() -> None:
    points = expand({"model": [{"hidden": [256]}, {"layers": [4]}]})
    with pytest.raises(ConfigError, match=r"param 'hidden' is not set in combination 1"):
        filter_points("hidden > 1", points)


def test_each_entry_of_a_filter_list_is_named_by_its_index() -> None:
    with pytest.raises(ConfigError, match=r"^sweep\.filter\[1\]: .*'open\(\)' is not allowed"):
        filter_points(["batch > 1", "open() == 1"], GRID)
    with pytest.raises(ConfigError, match=r"^sweep\.filter\[0\]: expected an expression string"):
        filter_points([3], GRID)  # type: ignore[list-item]
    with pytest.raises(ConfigError, match=r"^sweep\.filter: expected an expression string or"):
        filter_points(3, GRID)  # type: ignore[arg-type]


def test_a_compiled_filter_records_the_names_it_reads() -> None:
    compiled = compile_filter("model.hidden * 2 > lr and true", {"model.hidden", "lr"})
    assert compiled.names == frozenset({"model.hidden", "lr"})  # `true` is a constant
