"""The DAG hash is a data-flow hash (issue 15, section 2), checked on real compiled TTGIR.

Hypothesis rewrites real kernels the ways that cannot change numerics -- any topological
reordering of a kernel's top-level ops, operand swaps of IEEE-commutative ops, the generic form
of simple ops -- and the fingerprint must stay; the rewrites that do change numerics (operand
swaps of `-` / `/`, a moved store) must still change it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from compile_helpers import reparse_with_triton
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from triton_invariance.data import InvarianceData
from triton_invariance.effects import COMMUTATIVE, READ, WRITE, effect_of
from triton_invariance.fingerprint import compute_invariance

TTGIR = Callable[..., str]
_SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
CASES = [
    ("softmax", "cuda:80"),
    ("matmul_bf16", "hip:gfx942"),
    ("sum", "cuda:90"),
    ("control_flow", "cuda:80"),
    ("atomic_add", "hip:gfx942"),
]
_DEF = re.compile(r"^\s*((?:%[\w.$-]+(?::\d+)?(?:, )?)+) = ")
_NAME = re.compile(r"%[\w.$-]+")
_OP = re.compile(r'(?:= |^\s*)"?([a-z_]+\.[\w.]+)"?')
_BINARY = re.compile(r"= (arith\.\w+) (%[\w.$-]+), (%[\w.$-]+) : (.+?)( loc\(.*\))?$")


def _body(text: str) -> tuple[list[str], list[list[str]], list[str]]:
    """(lines before the kernel body, its top-level statements, lines after)."""
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.lstrip().startswith("tt.func")) + 1
    end = max(i for i, ln in enumerate(lines) if ln.startswith("  }"))
    statements: list[list[str]] = []
    for line in lines[start:end]:
        top = line.startswith("    ") and not line.startswith("     ") and line[4] not in "}^"
        if top:
            statements.append([line])
        else:
            statements[-1].append(line)
    return lines[:start], statements, lines[end:]


def _effect(statement: list[str]) -> int:
    names = [m.group(1) for ln in statement if (m := _OP.search(ln))]
    return max((effect_of(n) for n in names), default=0)


def _random_topological_order(statements: list[list[str]], data: st.DataObject) -> list[int]:
    """A random order of all but the terminator that keeps every def-use and memory edge."""
    defined: dict[str, int] = {}
    deps: list[set[int]] = []
    last_write, reads_since = -1, []
    for i, st_lines in enumerate(statements[:-1]):
        text = "\n".join(st_lines)
        m = _DEF.match(st_lines[0])
        own = set(_NAME.findall(m.group(1))) if m else set()
        uses = {defined[n] for n in _NAME.findall(text) if n in defined and n not in own}
        effect = _effect(st_lines)
        if effect >= READ and last_write >= 0:
            uses.add(last_write)
        if effect == WRITE:
            uses.update(reads_since)
            last_write, reads_since = i, []
        elif effect == READ:
            reads_since.append(i)
        deps.append(uses)
        for name in own:
            defined[name.split(":")[0]] = i
    order: list[int] = []
    remaining = set(range(len(deps)))
    while remaining:
        ready = sorted(i for i in remaining if deps[i] <= set(order))
        pick = ready[data.draw(st.integers(0, len(ready) - 1))]
        order.append(pick)
        remaining.discard(pick)
    return order


@pytest.mark.parametrize(("kernel", "target"), CASES)
@_SETTINGS
@given(data=st.data())
def test_any_topological_reordering_keeps_the_fingerprint(
    ttgir: TTGIR, kernel: str, target: str, data: st.DataObject
) -> None:
    text = ttgir(kernel, target)
    head, statements, tail = _body(text)
    order = _random_topological_order(statements, data)
    body = [ln for i in order for ln in statements[i]] + statements[-1]
    reordered = "\n".join(head + body + tail) + "\n"
    before, after = compute_invariance(text), compute_invariance(reordered)
    assert after.fingerprint == before.fingerprint
    assert before.changed_components(after) == []


def _swap_operands(line: str, m: re.Match[str]) -> str:
    return line.replace(f"{m.group(2)}, {m.group(3)}", f"{m.group(3)}, {m.group(2)}")


@pytest.mark.parametrize(("kernel", "target"), CASES)
@_SETTINGS
@given(data=st.data())
def test_commutative_operand_swaps_keep_it_and_others_change_it(
    ttgir: TTGIR, kernel: str, target: str, data: st.DataObject
) -> None:
    text = ttgir(kernel, target)
    lines = text.splitlines()
    binary = [(i, m) for i, ln in enumerate(lines) if (m := _BINARY.search(ln))]
    swappable = [(i, m) for i, m in binary if m.group(2) != m.group(3)]
    commutative = [(i, m) for i, m in swappable if m.group(1) in COMMUTATIVE]
    chosen = data.draw(st.lists(st.sampled_from(commutative), unique_by=lambda x: x[0]))
    swapped = list(lines)
    for i, m in chosen:
        swapped[i] = _swap_operands(lines[i], m)
    before = compute_invariance(text)
    assert compute_invariance("\n".join(swapped)).fingerprint == before.fingerprint
    others = [(i, m) for i, m in swappable if m.group(1) not in COMMUTATIVE]
    if others:
        i, m = data.draw(st.sampled_from(others))
        changed = list(lines)
        changed[i] = _swap_operands(lines[i], m)
        after = compute_invariance("\n".join(changed))
        assert before.changed_components(after) == ["computation_dag_hash"]
        assert m.group(1) in before.diff_report(after)


_DEFAULTS = {"f": "<{fastmath = #arith.fastmath<none>}> ", "i": ""}
_OVERFLOW = {"arith.addi", "arith.subi", "arith.muli"}


def _generic(line: str) -> str:
    """The generic MLIR form of a simple binary arith op line, with the default attributes the
    custom printer leaves out."""
    m = _BINARY.search(line)
    assert m is not None
    op, a, b, ty = m.group(1), m.group(2), m.group(3), m.group(4)
    props = _DEFAULTS["f" if op.endswith("f") else "i"]
    if op in _OVERFLOW:
        props = "<{overflowFlags = #arith.overflow<none>}> "
    prefix = line[: m.start()]
    return f'{prefix}= "{op}"({a}, {b}) {props}: ({ty}, {ty}) -> {ty}'


@pytest.mark.parametrize(("kernel", "target"), CASES)
@_SETTINGS
@given(data=st.data())
def test_generic_syntax_of_simple_ops_keeps_the_fingerprint(
    ttgir: TTGIR, kernel: str, target: str, data: st.DataObject
) -> None:
    text = ttgir(kernel, target)
    lines = text.splitlines()
    simple = [
        i
        for i, ln in enumerate(lines)
        if (m := _BINARY.search(ln)) and not m.group(1).startswith("arith.cmp")
    ]
    chosen = data.draw(st.lists(st.sampled_from(simple), unique=True, min_size=1))
    generic = list(lines)
    for i in chosen:
        generic[i] = _generic(lines[i])
    before = compute_invariance(text)
    assert compute_invariance("\n".join(generic)).fingerprint == before.fingerprint


def test_generic_forms_are_the_ops_triton_prints(ttgir: TTGIR, tmp_path: Path) -> None:
    # Oracle: Triton parses our generic lines and prints them back in custom syntax.
    text = ttgir("softmax", "cuda:80")
    lines = text.splitlines()
    generic = "\n".join(_generic(ln) if _BINARY.search(ln) else ln for ln in lines) + "\n"
    assert generic != text
    module, _context = reparse_with_triton(generic, "cuda:80", tmp_path)
    reprinted = str(module)
    assert '"arith.' not in reprinted
    assert compute_invariance(reprinted).fingerprint == compute_invariance(text).fingerprint
    assert compute_invariance(generic).fingerprint == compute_invariance(text).fingerprint


def test_moving_a_store_across_a_load_changes_the_dag() -> None:
    head = (
        'module attributes {"ttg.num-warps" = 4 : i32, ttg.target = "cuda:80"} {\n'
        "  tt.func public @k(%p: !tt.ptr<f32>, %q: !tt.ptr<f32>) {\n"
        "    %c = arith.constant 1.0 : f32\n"
    )
    load = "    %x = tt.load %p : !tt.ptr<f32>\n"
    store = "    tt.store %p, %c : !tt.ptr<f32>\n"
    tail = "    tt.store %q, %x : !tt.ptr<f32>\n    tt.return\n  }\n}\n"
    before = compute_invariance(head + load + store + tail)
    after = compute_invariance(head + store + load + tail)
    assert before.changed_components(after) == ["computation_dag_hash"]
    # Two loads, on the other hand, may swap.
    load2 = "    %y = tt.load %q : !tt.ptr<f32>\n"
    both = compute_invariance(head + load + load2 + tail)
    assert both.fingerprint == compute_invariance(head + load2 + load + tail).fingerprint


def test_scheduling_hints_order_no_loads_but_a_barrier_does() -> None:
    """Triton 3.6's AMD pipeliner prints `rocdl.s.setprio` / `rocdl.sched.barrier` between the
    loads of a K loop: they touch no memory, so two loads may swap around them (a real
    `rocdl.s.barrier` still orders them), and the hints themselves are still hashed."""
    head = (
        'module attributes {"ttg.num-warps" = 4 : i32, ttg.target = "hip:gfx942"} {\n'
        "  tt.func public @k(%p: !tt.ptr<f32>, %q: !tt.ptr<f32>) {\n"
    )
    a, b = "    %x = tt.load %p : !tt.ptr<f32>\n", "    %y = tt.load %q : !tt.ptr<f32>\n"
    tail = (
        "    %s = arith.subf %x, %y : f32\n"
        "    tt.store %p, %s : !tt.ptr<f32>\n"
        "    tt.return\n  }\n}\n"
    )

    def kernel(first: str, second: str, between: str) -> InvarianceData:
        return compute_invariance(head + first + between + second + tail)

    hints = "    rocdl.s.setprio 1\n    rocdl.sched.barrier 0\n"
    assert kernel(a, b, hints).fingerprint == kernel(b, a, hints).fingerprint
    assert kernel(a, b, hints).changed_components(
        kernel(a, b, hints.replace("setprio 1", "setprio 2"))
    ) == ["computation_dag_hash"]
    barrier = "    rocdl.s.barrier\n"
    assert kernel(a, b, barrier).changed_components(kernel(b, a, barrier)) == [
        "computation_dag_hash"
    ]


def test_an_op_without_layout_is_a_dag_change_not_a_layout_change(ttgir: TTGIR) -> None:
    text = ttgir("add", "cuda:80")
    lines = text.splitlines()
    at = next(i for i, ln in enumerate(lines) if "tt.get_program_id" in ln)
    pid = _DEF.match(lines[at])
    assert pid is not None
    extra = f"    %extra = arith.addi {pid.group(1)}, {pid.group(1)} : i32"
    changed = "\n".join([*lines[: at + 1], extra, *lines[at + 1 :]])
    before, after = compute_invariance(text), compute_invariance(changed)
    assert before.changed_components(after) == ["computation_dag_hash"]
    assert "arith.addi" in before.diff_report(after)


def test_report_names_the_changed_op_after_a_reordering(ttgir: TTGIR) -> None:
    text = ttgir("add", "cuda:80")
    head, statements, tail = _body(text)
    first_load = next(i for i, s in enumerate(statements) if "tt.load" in s[0])
    moved = statements.pop(first_load)  # to just before the add: still a valid order
    statements.insert(next(i for i, s in enumerate(statements) if "arith.addf" in s[0]), moved)
    body = [ln for s in statements for ln in s]
    reordered = "\n".join(head + body + tail).replace("arith.addf", "arith.mulf")
    before, after = compute_invariance(text), compute_invariance(reordered)
    assert before.changed_components(after) == ["computation_dag_hash"]
    report = before.diff_report(after)
    line = next(ln for ln in report.splitlines() if "computation_dag_hash:" in ln)
    assert "before `" in line and "arith.addf" in line and "arith.mulf" in line
