"""Property tests on real TTGIR: random renamings and spacing never matter, constants always do."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from triton_invariance.fingerprint import compute_invariance

_VALUE = re.compile(r"%([A-Za-z0-9_.$\-]+)")
_SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
CASES = [("softmax", "cuda:80"), ("matmul_bf16", "hip:gfx942"), ("sum", "cuda:90")]


@pytest.mark.parametrize(("kernel", "target"), CASES)
@_SETTINGS
@given(data=st.data())
def test_random_ssa_renaming_and_spacing_keep_the_fingerprint(
    ttgir: Callable[..., str], kernel: str, target: str, data: st.DataObject
) -> None:
    text = ttgir(kernel, target)
    names = sorted(set(_VALUE.findall(text)))
    # A random injective renaming: a permutation of fresh names (same-name reuse across sibling
    # regions stays reuse, as it must).
    order = data.draw(st.permutations(range(len(names))))
    mapping = {name: f"v{order[i]}_{name[:1].isdigit()}" for i, name in enumerate(names)}
    renamed = _VALUE.sub(lambda m: "%" + mapping[m.group(1)], text)
    pad = data.draw(st.integers(min_value=1, max_value=4))
    spaced = renamed.replace(", ", "," + " " * pad).replace(" : ", " " * pad + ":  ")
    assert compute_invariance(spaced) == compute_invariance(text)


def _shifted(literal: str, delta: int) -> str:
    """`literal` (integer, float or hex bit pattern as MLIR prints them) moved by `delta`."""
    if literal.startswith("0x"):
        return f"0x{(int(literal, 16) + delta) % 2**32:08X}"
    if "." in literal or "e" in literal:
        return repr(float(literal) + delta)
    return str(int(literal) + delta)


@pytest.mark.parametrize(("kernel", "target"), CASES)
@_SETTINGS
@given(data=st.data())
def test_any_changed_constant_changes_the_dag(
    ttgir: Callable[..., str], kernel: str, target: str, data: st.DataObject
) -> None:
    text = ttgir(kernel, target)
    literal = r"(0x[0-9A-F]+|-?\d+\.\d+e[+-]\d+|-?\d+)"
    constants = list(re.finditer(rf"arith\.constant (?:dense<)?{literal}", text))
    assert constants
    m = data.draw(st.sampled_from(constants))
    delta = data.draw(st.integers(min_value=1, max_value=1000))
    start, end = m.span(1)
    changed = text[:start] + _shifted(m.group(1), delta) + text[end:]
    before, after = compute_invariance(text), compute_invariance(changed)
    assert before.changed_components(after) == ["computation_dag_hash"]
