"""The computation DAG hash: a hash of the data-flow graph, not of the op sequence.

Input: the canonical op lines of `InvarianceData.ops` (one line per op, ``  region k`` markers,
block headers, SSA values numbered ``%0, %1, ...`` per function, encodings already cut out into
the layout component). Output: one structural hash per line and the hash of the whole module.

Each op's hash is a Merkle hash of what decides its result: its name, its attributes and types
(the op text with values blanked), the hashes of its operands (the values' defining ops, which
are hashed the same way), and the hashes of its regions. Consequently

* the order in which independent ops are printed does not matter: a block hashes the *multiset*
  of its ops' hashes (every op counts, dead ones too);
* operands of ops that are commutative in IEEE (and two's-complement) arithmetic are sorted:
  ``a + b`` and ``b + a`` hash alike, ``a - b`` and ``b - a`` do not;
* the generic and the custom form of a simply-printed op reduce to one normal form, and an
  ``scf.for``'s iter_args are taken in a canonical order (`opform`).

Memory is the one ordering that data flow does not show: a load must see the stores before it.
Ops are classified by name as pure, reading or writing (`effects`; anything unknown writes, so
an unknown op keeps its place); each writer is chained to the previous writer of its block, and
each reader to the last writer before it. Two loads, or a load and arithmetic, may swap; a load
and a store, or two stores, may not.

Shared memory is finer-grained: `ttg.local_alloc` makes a fresh buffer and the `memdesc` views
only address one, so both are pure and hashed by what they hold and where they are used, not
where they are printed (the allocations Triton emits for each `tl.load` feeding a `tl.dot`
follow the loads' order). A write into a buffer (`ttg.local_store`, an async copy into it) is
chained to the previous write into the *same* buffer and to the last writer of the block (a
store, a barrier, an async wait, an unknown op), and a `ttg.local_load` to the last write into its
buffer; so two independent loads and their buffers may swap, while every store, atomic, barrier
and wait still orders everything around it.

The hash is a function of the lines alone, so `InvarianceData.from_dict` re-derives it from a
stored baseline, and it is total: a line that is not MLIR (a hand edit) is hashed as raw text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from triton_invariance.effects import (
    BUFFER_OPS,
    COMMUTATIVE,
    LOCAL_OPS,
    LOCAL_WRITE_OPS,
    OPERAND_SETS,
    PURE,
    WRITE,
    effect_of,
)
from triton_invariance.mlir import BLOCK, MAX_NESTING, NUMBER, VALUE
from triton_invariance.opform import (
    Loop,
    digest,
    loop_order,
    normal_form,
    permuted,
    split_op,
    tokens_of,
)

# The buffer key of an uninitialised allocation in the first pass (see `_Hasher`).
_UNORDERED: Final = "unordered"


@dataclass
class _Block:
    index: int  # line index of the header, -1 without one
    ops: list[_Op] = field(default_factory=list)


@dataclass
class _Op:
    index: int  # line index
    regions: list[list[_Block]] = field(default_factory=list)


def _depth(line: str) -> int:
    return min((len(line) - len(line.lstrip(" "))) // 2, MAX_NESTING + 2)


def _region_marker(line: str) -> bool:
    if "region" not in line:
        return False  # most lines: no need to split them into words
    parts = line.split()
    return len(parts) == 2 and parts[0] == "region" and parts[1].isdigit()


def _tree(lines: Sequence[str]) -> _Block:
    """Ops, regions and blocks from the indentation of canonical lines (total on any input)."""
    root = _Block(-1)
    # (depth of the ops in the block, the block, the region the block belongs to)
    stack: list[tuple[int, _Block, list[_Block] | None]] = [(0, root, None)]
    for i, line in enumerate(lines):
        d = _depth(line)
        if _region_marker(line):
            while len(stack) > 1 and stack[-1][0] > d - 1:
                stack.pop()
            owner = stack[-1][1].ops[-1] if stack[-1][1].ops else None
            if owner is not None and stack[-1][0] == d - 1:
                region: list[_Block] = [_Block(-1)]
                owner.regions.append(region)
                stack.append((d, region[0], region))
                continue
        elif line.strip().startswith("^"):
            while len(stack) > 1 and stack[-1][0] > d:
                stack.pop()
            depth, block, region_of = stack[-1]
            if region_of is not None and depth == d:
                if block.index == -1 and not block.ops:
                    block.index = i
                else:
                    new = _Block(i)
                    region_of.append(new)
                    stack[-1] = (depth, new, region_of)
                continue
        while len(stack) > 1 and stack[-1][0] > d:
            stack.pop()
        stack[-1][1].ops.append(_Op(i))
    return root


@dataclass
class _Memory:
    """The memory state a block's ops see: the last writer, and the last write per buffer."""

    barrier: str
    buffers: dict[str, str] = field(default_factory=dict)


class _Hasher:
    """One pass over the op tree. `identities` (line index of an uninitialised `local_alloc` ->
    what its users do) is None on the first pass, which collects what the second needs."""

    def __init__(self, lines: Sequence[str], identities: dict[int, str] | None = None) -> None:
        self.lines = lines
        self.hashes = [""] * len(lines)
        self.env: dict[str, str] = {}
        self.free = 0
        # value name -> the shared-memory buffer it addresses (the allocation's hash)
        self.buffer_of: dict[str, str] = {}
        self.identities = identities
        # First pass: uninitialised allocations, and the def-use edges to find their users.
        self.uninitialized: list[int] = []
        self.users: dict[str, list[int]] = {}  # "function:value" -> line indices using it
        self.results_of: dict[int, list[str]] = {}  # line index -> "function:value" it defines
        self.buffer_ops: set[int] = set()  # line indices of views, local loads / writes
        self.function = 0
        # (depth of a loop body, the canonical order of its iter_args) for its scf.yield
        self.yield_order: list[tuple[int, list[int]]] = []

    def buffer_identities(self) -> dict[int, str]:
        """After the first pass: each uninitialised allocation's identity, the multiset of the
        first-pass hashes of the buffer ops its value reaches in two hops. The first pass hashed
        the allocations alike and left their writes unordered, so these hashes do not depend on
        print order, while the data each buffer receives (what is copied in) tells them apart."""
        out = {}
        for index in self.uninitialized:
            seen: set[int] = set()
            frontier = list(self.results_of.get(index, []))
            # Two hops through views and local loads / writes: the slots of the buffer and what
            # is copied into or read from them. Other users (the loop that carries a slot, a
            # barrier) have first-pass hashes that depend on print order.
            for _ in range(2):
                users = {u for v in frontier for u in self.users.get(v, []) if u in self.buffer_ops}
                users -= seen
                seen |= users
                frontier = [r for u in users for r in self.results_of.get(u, [])]
            out[index] = digest("users", *sorted(self.hashes[i] for i in seen))
        return out

    def value(self, name: str) -> str:
        found = self.env.get(name)
        if found is None:
            # A function argument (first seen in the function header) or a forward reference.
            found = self.env[name] = digest("free", str(self.free))
            self.free += 1
        return found

    def block(self, block: _Block, depth: int, position: int) -> tuple[str, int]:
        header = ""
        if block.index >= 0:
            header = self._header(self.lines[block.index], depth, position)
        mem = _Memory(digest("entry"))
        effect = PURE
        op_hashes = []
        for op in block.ops:
            h, op_effect = self.op(op, depth, mem)
            op_hashes.append(h)
            effect = max(effect, op_effect)
        return digest("block", header, *sorted(op_hashes), mem.barrier), effect

    def _header(self, line: str, depth: int, position: int) -> str:
        template = []
        args = 0
        kinds, texts = tokens_of(line) or ([], [])
        for kind, text in zip(kinds, texts, strict=True):
            if kind == VALUE:
                self.env[text] = digest("arg", str(depth), str(position), str(args))
                args += 1
                template.append("%")
            elif kind != BLOCK:
                template.append(text)
        return digest("header", *template)

    def op(self, op: _Op, depth: int, mem: _Memory) -> tuple[str, int]:
        line = self.lines[op.index]
        if depth == 0:  # a new function: values are numbered afresh
            self.env, self.free, self.buffer_of = {}, 0, {}
            self.function += 1
        tokens = tokens_of(line)
        parsed = split_op(*tokens) if tokens is not None else None
        if tokens is None or parsed is None:
            h = mem.barrier = digest("raw", line.strip(), mem.barrier)
            self.hashes[op.index] = h
            return h, WRITE
        results, name, start = parsed
        kinds, texts = tokens[0][start:], tokens[1][start:]
        template, operands, operand_names = self._scan(kinds, texts, depth)
        loop, template, operands = self._canonical_order(
            name, kinds, texts, template, operands, depth
        )
        effect = effect_of(name)
        region_hashes = []
        if loop is not None:
            self.yield_order.append((depth + 1, loop.order))
        for region in op.regions:
            parts = []
            for position, block in enumerate(region):
                bh, block_effect = self.block(block, depth + 1, position)
                parts.append(bh)
                effect = max(effect, block_effect)
            region_hashes.append(digest("region", *parts))
        if loop is not None:
            self.yield_order.pop()
        if (name in COMMUTATIVE and len(operands) == 2) or name in OPERAND_SETS:
            operands.sort()
        key = normal_form(template, len(operands), len(results)) or digest("as-written", *template)
        buffer = next((b for o in operand_names if (b := self.buffer_of.get(o)) is not None), None)
        local = buffer if not op.regions and name in LOCAL_OPS else None
        if local is not None:
            # First pass, an empty buffer: no memory order at all (see `buffer_identities`).
            dep = (
                ""
                if local == _UNORDERED
                else digest("local", mem.barrier, mem.buffers.get(local, ""))
            )
        else:
            dep = mem.barrier if effect != PURE else ""
        identity = self.identities.get(op.index) if self.identities else None
        h = digest(
            "op",
            name,
            key,
            str(len(results)),
            *operands,
            *region_hashes,
            dep,
            *([identity] if identity else []),
        )
        if self.identities is None:
            self._record_edges(op.index, name, operand_names, results)
        for k, result in enumerate(results):
            slot = loop.keys[k] if loop is not None and k < len(loop.keys) else str(k)
            self.env[result] = digest("result", h, slot)
        empty = name == "ttg.local_alloc" and not operand_names
        self._track_memory(name, h, results, buffer, local, effect, mem, empty)
        self.hashes[op.index] = h
        return h, effect

    def _scan(
        self, kinds: list[str], texts: list[str], depth: int
    ) -> tuple[list[str], list[str], list[str]]:
        """(template with values elided, operand hashes, operand names) of an op body."""
        template: list[str] = []
        operands: list[str] = []
        operand_names: list[str] = []
        declared = 0
        i, n = 0, len(texts)
        while i < n:
            kind, text = kinds[i], texts[i]
            if kind == VALUE:
                if i + 1 < n and texts[i + 1] == "=":
                    self.env[text] = digest("bound", str(depth), str(declared))
                    declared += 1
                    template.append("%=")
                else:
                    operands.append(self.value(text))
                    operand_names.append(text)
                    template.append("%")
            elif (
                text == "{"
                and i + 3 < n
                and texts[i + 1] == "region"
                and kinds[i + 2] == NUMBER
                and texts[i + 3] == "}"
            ):
                template.append("{region}")
                i += 3
            else:
                template.append(text)
            i += 1
        return template, operands, operand_names

    def _canonical_order(
        self,
        name: str,
        kinds: list[str],
        texts: list[str],
        template: list[str],
        operands: list[str],
        depth: int,
    ) -> tuple[Loop | None, list[str], list[str]]:
        """An scf.for with its iter_args in canonical order (each region argument named by its
        key, initial value and type, not its position), and its scf.yield to match."""
        if name == "scf.yield" and self.yield_order and self.yield_order[-1][0] == depth:
            return None, *permuted(template, operands, self.yield_order[-1][1], ":")
        loop = loop_order(template, operands) if name == "scf.for" else None
        if loop is None:
            return None, template, operands
        bound = [
            text for i, text in enumerate(texts[:-1]) if kinds[i] == VALUE and texts[i + 1] == "="
        ]
        for value, key in zip(bound[1:], loop.keys, strict=False):
            self.env[value] = digest("iter", str(depth), key)
        return loop, *permuted(template, operands, loop.order, "->", first_operand=3)

    def _record_edges(
        self, index: int, name: str, operand_names: list[str], results: list[str]
    ) -> None:
        fn = f"{self.function}:"
        for operand in operand_names:
            self.users.setdefault(fn + operand, []).append(index)
        self.results_of[index] = [fn + r for r in results]
        if name in BUFFER_OPS or name in LOCAL_OPS:
            self.buffer_ops.add(index)
        if name == "ttg.local_alloc" and not operand_names:
            self.uninitialized.append(index)

    def _track_memory(
        self,
        name: str,
        h: str,
        results: list[str],
        buffer: str | None,
        local: str | None,
        effect: int,
        mem: _Memory,
        empty: bool,
    ) -> None:
        """Record which buffer a new memdesc addresses, and what later ops must come after."""
        if results and name == "ttg.local_alloc":
            # First pass: an uninitialised buffer's writes are left unordered (_UNORDERED), so
            # that its users' hashes do not depend on where it was printed.
            fresh = self.identities is None and empty
            self.buffer_of[results[0]] = _UNORDERED if fresh else h
        elif results and name in BUFFER_OPS and buffer is not None:
            self.buffer_of[results[0]] = buffer
        if local is not None:
            if name in LOCAL_WRITE_OPS and local != _UNORDERED:
                mem.buffers[local] = h
        elif effect == WRITE:
            mem.barrier = h


def line_hashes(lines: Sequence[str]) -> tuple[str, list[str]]:
    """(hash of the module's data-flow graph, one structural hash per line).

    Region markers and block headers get ``""``; an op's hash covers everything that flows into
    it (operands, regions and, for memory ops, the memory state it sees).
    """
    tree = _tree(lines)
    hasher = _Hasher(lines)
    root, _ = hasher.block(tree, 0, 0)
    if hasher.uninitialized:
        # Shared-memory buffers allocated empty (software pipelining's ring buffers) are told
        # apart by what uses them, not by where they are printed: a second pass with those.
        hasher = _Hasher(lines, hasher.buffer_identities())
        root, _ = hasher.block(tree, 0, 0)
    return root, hasher.hashes
