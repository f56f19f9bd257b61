"""`check_expanded_size`: alias bombs, alias-deep nesting and recursion refused before use."""

from __future__ import annotations

import pytest
import yaml

from toolkit_core.yaml_safe import ExpansionLimitError, check_expanded_size


def _node(text: str) -> yaml.Node:
    node = yaml.compose(text, Loader=yaml.SafeLoader)
    assert node is not None
    return node


def test_a_billion_laughs_is_refused_in_linear_time() -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    with pytest.raises(ExpansionLimitError) as caught:  # 10^9 values once expanded
        check_expanded_size(_node("\n".join(lines)), max_nodes=100_000, max_depth=50)
    assert caught.value.what == "nodes"


def test_nesting_counts_the_levels_aliases_add() -> None:
    lines = ["l0: &l0 [x]"] + [f"l{i}: &l{i} [*l{i - 1}]" for i in range(1, 12)]
    text = "\n".join(lines)  # 2 levels deep as written, 14 once l11 is expanded
    check_expanded_size(_node(text), max_nodes=1000, max_depth=14)
    with pytest.raises(ExpansionLimitError) as caught:
        check_expanded_size(_node(text), max_nodes=1000, max_depth=13)
    assert caught.value.what == "depth"
    assert caught.value.node.start_mark.line >= 0  # a place to name in the message


def test_a_document_within_the_limits_passes() -> None:
    check_expanded_size(_node("a: [1, 2]\nb: {c: d}"), max_nodes=9, max_depth=3)
    with pytest.raises(ExpansionLimitError):
        check_expanded_size(_node("a: [1, 2]\nb: {c: d}"), max_nodes=8, max_depth=3)
