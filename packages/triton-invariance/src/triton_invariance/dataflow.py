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
* the generic form (``"arith.addf"(%a, %b) <{fastmath = #arith.fastmath<none>}> : (f32, f32) ->
  f32``) and the custom form (``arith.addf %a, %b : f32``) of an op whose custom form is
  ``operands [attr-dict] : type`` (or ``: type -> type`` / ``: type to type``) reduce to one
  normal form (operands, operand types, result types, attributes without the defaults the custom
  printer elides); other custom forms are hashed as written.

Memory is the one ordering that data flow does not show: a load must see the stores before it.
Ops are classified by name as pure, reading or writing (anything unknown writes, so an unknown op
keeps its place); each writer is chained to the previous writer of its block, and each reader to
the last writer before it. Two loads, or a load and arithmetic, may swap; a load and a store, or
two stores, may not.

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

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from triton_invariance.mlir import (
    BLOCK,
    IDENT,
    MAX_NESTING,
    NUMBER,
    STRING,
    VALUE,
    InvalidTTGIRError,
    Token,
    tokenize,
)

PURE, READ, WRITE = 0, 1, 2

# Binary ops whose two operands may be exchanged without changing any result bit (IEEE add,
# mul, min/max with one NaN policy are commutative; sub, div, pow, remainders are not).
COMMUTATIVE: Final = frozenset(
    {
        "arith.addf",
        "arith.mulf",
        "arith.maxnumf",
        "arith.minnumf",
        "arith.maximumf",
        "arith.minimumf",
        "arith.addi",
        "arith.muli",
        "arith.andi",
        "arith.ori",
        "arith.xori",
        "arith.maxsi",
        "arith.minsi",
        "arith.maxui",
        "arith.minui",
        "tt.mulhiui",
    }
)
_PURE_PREFIXES: Final = ("arith.", "math.", "ub.")
_PURE_OPS: Final = frozenset(
    {
        "tt.splat",
        "tt.unsplat",
        "tt.broadcast",
        "tt.make_range",
        "tt.addptr",
        "tt.expand_dims",
        "tt.reshape",
        "tt.trans",
        "tt.dot",
        "tt.dot_scaled",
        "tt.get_program_id",
        "tt.get_num_programs",
        "tt.fp_to_fp",
        "tt.bitcast",
        "tt.int_to_ptr",
        "tt.ptr_to_int",
        "tt.join",
        "tt.split",
        "tt.cat",
        "tt.clampf",
        "tt.precise_sqrt",
        "tt.precise_divf",
        "tt.mulhiui",
        "tt.histogram",
        "tt.gather",
        "tt.make_tensor_ptr",
        "tt.advance",
        "tt.reduce.return",
        "tt.scan.return",
        "ttg.convert_layout",
        # Groups the async copies whose tokens it takes (data flow); writes nothing itself.
        "ttg.async_commit_group",
        # Moves elements between a thread's registers (AMD): no memory.
        "amdg.in_thread_transpose",
        "scf.yield",
        "scf.condition",
        "tt.return",
    }
)
_READ_OPS: Final = frozenset(
    {"tt.load", "tt.descriptor_load", "tt.descriptor_gather", "ttg.local_load", "amdg.buffer_load"}
)
# A fresh shared-memory buffer, and views that only address part of one: no memory effect.
_BUFFER_OPS: Final = frozenset(
    {
        "ttg.local_alloc",
        "ttg.memdesc_index",
        "ttg.memdesc_subslice",
        "ttg.memdesc_subview",
        "ttg.memdesc_trans",
        "ttg.memdesc_reshape",
        "ttg.memdesc_reinterpret",
    }
)
# Ops that write into the shared-memory buffer one of their operands addresses, and nothing else
# a later op of the block could observe except through that buffer.
_LOCAL_WRITE_OPS: Final = frozenset(
    {
        "ttg.local_store",
        "ttg.async_copy_global_to_local",
        "amdg.buffer_load_to_local",
        "ttng.async_tma_copy_global_to_local",
        # Frees the buffer: after every read of it, and nothing else.
        "ttg.local_dealloc",
    }
)
_LOCAL_OPS: Final = _LOCAL_WRITE_OPS | {"ttg.local_load"}
# Ops whose operands are a set: waiting for copies a and b is waiting for b and a.
_OPERAND_SETS: Final = frozenset({"ttg.async_wait"})
# The buffer key of an uninitialised allocation in the first pass (see `_Hasher`).
_UNORDERED: Final = "unordered"
# Region-holding ops whose own effect is nothing: they are as pure as the ops inside them.
_STRUCTURAL: Final = frozenset({"scf.for", "scf.if", "scf.while", "tt.reduce", "tt.scan"})
# Attributes the custom printer leaves out because they have their default value.
_DEFAULT_ATTRS: Final = frozenset(
    {"fastmath=#arith.fastmath<none>", "overflowFlags=#arith.overflow<none>"}
)
_DIGEST = 16


def _h(*parts: str) -> str:
    h = hashlib.blake2b(digest_size=_DIGEST)
    for part in parts:
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\x1f")
    return h.hexdigest()


def effect_of(name: str) -> int:
    """PURE, READ or WRITE for an op name (unknown ops write: they keep their place)."""
    if name in _PURE_OPS or name in _BUFFER_OPS or name.startswith(_PURE_PREFIXES):
        return PURE
    if name in _READ_OPS:
        return READ
    if name in _STRUCTURAL:
        return PURE
    return WRITE


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
            out[index] = _h("users", *sorted(self.hashes[i] for i in seen))
        return out

    def value(self, name: str) -> str:
        found = self.env.get(name)
        if found is None:
            # A function argument (first seen in the function header) or a forward reference.
            found = self.env[name] = _h("free", str(self.free))
            self.free += 1
        return found

    def block(self, block: _Block, depth: int, position: int) -> tuple[str, int]:
        header = ""
        if block.index >= 0:
            header = self._header(self.lines[block.index], depth, position)
        mem = _Memory(_h("entry"))
        effect = PURE
        op_hashes = []
        for op in block.ops:
            h, op_effect = self.op(op, depth, mem)
            op_hashes.append(h)
            effect = max(effect, op_effect)
        return _h("block", header, *sorted(op_hashes), mem.barrier), effect

    def _header(self, line: str, depth: int, position: int) -> str:
        template = []
        args = 0
        for t in _tokens(line) or []:
            if t.kind == VALUE:
                self.env[t.text] = _h("arg", str(depth), str(position), str(args))
                args += 1
                template.append("%")
            elif t.kind != BLOCK:
                template.append(t.text)
        return _h("header", *template)

    def op(self, op: _Op, depth: int, mem: _Memory) -> tuple[str, int]:
        line = self.lines[op.index]
        if depth == 0:  # a new function: values are numbered afresh
            self.env, self.free, self.buffer_of = {}, 0, {}
            self.function += 1
        tokens = _tokens(line)
        parsed = _split_op(tokens) if tokens is not None else None
        if parsed is None:
            h = mem.barrier = _h("raw", line.strip(), mem.barrier)
            self.hashes[op.index] = h
            return h, WRITE
        results, name, body = parsed
        template, operands, operand_names = self._scan(body, depth)
        loop, template, operands = self._canonical_order(name, body, template, operands, depth)
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
            region_hashes.append(_h("region", *parts))
        if loop is not None:
            self.yield_order.pop()
        if (name in COMMUTATIVE and len(operands) == 2) or name in _OPERAND_SETS:
            operands.sort()
        key = _normal_form(template, len(operands), len(results)) or _h("as-written", *template)
        buffer = next((b for o in operand_names if (b := self.buffer_of.get(o)) is not None), None)
        local = buffer if not op.regions and name in _LOCAL_OPS else None
        if local is not None:
            # First pass, an empty buffer: no memory order at all (see `buffer_identities`).
            dep = (
                "" if local == _UNORDERED else _h("local", mem.barrier, mem.buffers.get(local, ""))
            )
        else:
            dep = mem.barrier if effect != PURE else ""
        identity = self.identities.get(op.index) if self.identities else None
        h = _h(
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
            self.env[result] = _h("result", h, slot)
        empty = name == "ttg.local_alloc" and not operand_names
        self._track_memory(name, h, results, buffer, local, effect, mem, empty)
        self.hashes[op.index] = h
        return h, effect

    def _scan(self, body: list[Token], depth: int) -> tuple[list[str], list[str], list[str]]:
        """(template with values elided, operand hashes, operand names) of an op body."""
        template: list[str] = []
        operands: list[str] = []
        operand_names: list[str] = []
        declared = 0
        i, n = 0, len(body)
        while i < n:
            t = body[i]
            if t.kind == VALUE:
                if i + 1 < n and body[i + 1].text == "=":
                    self.env[t.text] = _h("bound", str(depth), str(declared))
                    declared += 1
                    template.append("%=")
                else:
                    operands.append(self.value(t.text))
                    operand_names.append(t.text)
                    template.append("%")
            elif (
                t.text == "{"
                and i + 3 < n
                and body[i + 1].text == "region"
                and body[i + 2].kind == NUMBER
                and body[i + 3].text == "}"
            ):
                template.append("{region}")
                i += 3
            else:
                template.append(t.text)
            i += 1
        return template, operands, operand_names

    def _canonical_order(
        self, name: str, body: list[Token], template: list[str], operands: list[str], depth: int
    ) -> tuple[_Loop | None, list[str], list[str]]:
        """An scf.for with its iter_args in canonical order (each region argument named by its
        key, initial value and type, not its position), and its scf.yield to match."""
        if name == "scf.yield" and self.yield_order and self.yield_order[-1][0] == depth:
            return None, *_permuted(template, operands, self.yield_order[-1][1], ":")
        loop = _loop_order(template, operands) if name == "scf.for" else None
        if loop is None:
            return None, template, operands
        bound = [
            t.text for i, t in enumerate(body[:-1]) if t.kind == VALUE and body[i + 1].text == "="
        ]
        for value, key in zip(bound[1:], loop.keys, strict=False):
            self.env[value] = _h("iter", str(depth), key)
        return loop, *_permuted(template, operands, loop.order, "->", first_operand=3)

    def _record_edges(
        self, index: int, name: str, operand_names: list[str], results: list[str]
    ) -> None:
        fn = f"{self.function}:"
        for operand in operand_names:
            self.users.setdefault(fn + operand, []).append(index)
        self.results_of[index] = [fn + r for r in results]
        if name in _BUFFER_OPS or name in _LOCAL_OPS:
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
        elif results and name in _BUFFER_OPS and buffer is not None:
            self.buffer_of[results[0]] = buffer
        if local is not None:
            if name in _LOCAL_WRITE_OPS and local != _UNORDERED:
                mem.buffers[local] = h
        elif effect == WRITE:
            mem.barrier = h


@dataclass
class _Loop:
    """The iter_args of an scf.for: a key per position (initial value and type; equal keys
    numbered in print order, so two are never merged) and the positions sorted by key. The
    pipeliner orders loop-carried values by the order of the loads they came from; permuting
    them (with the yield and the results alike) computes the same thing."""

    keys: list[str]
    order: list[int]


def _loop_order(template: list[str], operands: list[str]) -> _Loop | None:
    n = template.count("%=") - 1  # the induction variable, then the iter_args
    types = _type_list(template, "->")
    if n <= 0 or types is None or len(types) != n or len(operands) < 3 + n:
        return None
    plain = [_h(init, " ".join(ty)) for init, ty in zip(operands[3 : 3 + n], types, strict=True)]
    keys = [
        k if plain.count(k) == 1 else _h(k, str(plain[:i].count(k))) for i, k in enumerate(plain)
    ]
    return _Loop(keys, sorted(range(n), key=keys.__getitem__))


def _type_list(template: list[str], marker: str) -> list[list[str]] | None:
    """The top-level type entries after `marker` (`-> (T, U)` or `: T, U`), or None."""
    if marker not in template:
        return None
    rest = template[template.index(marker) + 1 :]
    if marker == "->":
        if rest[:1] != ["("]:
            return None
        depth = 0
        for i, text in enumerate(rest):
            depth += text in ("(", "[", "{", "<")
            depth -= text in (")", "]", "}", ">")
            if depth == 0:
                rest = rest[1:i]
                break
        else:
            return None
    return [e for e in _top_level(rest, ",") if e]


def _permuted(
    template: list[str], operands: list[str], order: list[int], marker: str, first_operand: int = 0
) -> tuple[list[str], list[str]]:
    """`template` with its type list after `marker` and `operands[first_operand:]` in `order`."""
    n = len(order)
    moving = operands[first_operand:]
    types = _type_list(template, marker)
    if len(moving) < n or types is None or len(types) != n:
        return template, operands
    reordered = operands[:first_operand] + [moving[i] for i in order] + moving[n:]
    start = template.index(marker) + 1 + (1 if marker == "->" else 0)
    flat: list[str] = []
    for i in order:
        flat.extend(([","] if flat else []) + types[i])
    width = sum(len(t) for t in types) + n - 1
    return template[:start] + flat + template[start + width :], reordered


def _tokens(line: str) -> list[Token] | None:
    try:
        return tokenize(line)
    except InvalidTTGIRError:
        return None


def _split_op(tokens: list[Token]) -> tuple[list[str], str, list[Token]] | None:
    """``%a, %b = name body...`` -> (result names, op name, body tokens); None if not an op."""
    results: list[str] = []
    i = 0
    if tokens and tokens[0].kind == VALUE:
        while i < len(tokens) and tokens[i].kind == VALUE:
            results.append(tokens[i].text)
            i += 1
            if i < len(tokens) and tokens[i].text == ",":
                i += 1
        if i >= len(tokens) or tokens[i].text != "=":
            return None
        i += 1
    if i >= len(tokens) or tokens[i].kind not in (IDENT, STRING):
        return None
    return results, tokens[i].text.strip('"'), tokens[i + 1 :]


def _top_level(template: list[str], sep: str) -> list[list[str]]:
    parts: list[list[str]] = [[]]
    depth = 0
    for text in template:
        if text in ("(", "[", "{", "<"):
            depth += 1
        elif text in (")", "]", "}", ">"):
            depth -= 1
        elif text == sep and depth == 0:
            parts.append([])
            continue
        parts[-1].append(text)
    return parts


def _attrs(template: list[str]) -> list[str] | None:
    """Entries of a ``{k = v, ...}`` or ``<{...}>`` dict, defaults dropped; None if not one."""
    if template[:2] == ["<", "{"] and template[-2:] == ["}", ">"]:
        template = template[1:-1]
    if len(template) < 2 or template[0] != "{" or template[-1] != "}":
        return None
    entries = ["".join(e) for e in _top_level(template[1:-1], ",") if e]
    return sorted(e for e in entries if e not in _DEFAULT_ATTRS)


def _normal_form(template: list[str], n_operands: int, n_results: int) -> str | None:
    """One key for the custom and the generic form of a simply-printed op; None otherwise."""
    operand_part = ["%"] + [",", "%"] * (n_operands - 1) if n_operands else []
    if template[:1] == ["("]:
        return _generic_form(template, operand_part)
    if template[: len(operand_part)] == operand_part and n_operands:
        return _custom_form(template[len(operand_part) :], n_operands, n_results)
    return None


def _generic_form(template: list[str], operand_part: list[str]) -> str | None:
    """``(%, %) <{props}> {attrs} : (types) -> types``."""
    close = len(operand_part) + 1
    if template[1:close] != operand_part or template[close : close + 1] != [")"]:
        return None
    colon = _top_level(template[close + 1 :], ":")
    if len(colon) != 2:
        return None
    attr_part, type_part = colon
    attrs: list[str] = []
    for group in _dict_groups(attr_part):
        found = _attrs(group)
        if found is None:
            return None
        attrs.extend(found)
    arrow = _top_level(type_part, "->")
    if len(arrow) != 2 or arrow[0][:1] != ["("] or arrow[0][-1:] != [")"]:
        return None
    outs = arrow[1]
    if outs[:1] == ["("] and outs[-1:] == [")"]:
        outs = outs[1:-1]
    return _h("normal", *_types(arrow[0][1:-1]), "->", *_types(outs), "attrs", *sorted(attrs))


def _custom_form(rest: list[str], n_operands: int, n_results: int) -> str | None:
    """What follows the operands: ``[{attrs}] : T`` | ``: T -> T`` | ``: T to T``."""
    colon = _top_level(rest, ":")
    if len(colon) != 2 or len(_top_level(colon[1], ",")) != 1:
        return None
    left, right = colon
    attrs = _attrs(left) if left else []
    if attrs is None:
        return None
    for sep in ("->", "to"):
        split = _top_level(right, sep)
        if len(split) == 2:
            if n_operands != 1 or n_results != 1:
                return None
            return _h("normal", " ".join(split[0]), "->", " ".join(split[1]), "attrs", *attrs)
    ty = " ".join(right)
    return _h("normal", *([ty] * n_operands), "->", *([ty] * n_results), "attrs", *attrs)


def _types(tokens: list[str]) -> list[str]:
    return [" ".join(t) for t in _top_level(tokens, ",") if t]


def _dict_groups(tokens: list[str]) -> list[list[str]]:
    """Split ``<{...}> {...}`` into its bracketed groups (empty list when `tokens` is empty)."""
    groups: list[list[str]] = []
    depth = 0
    for text in tokens:
        if depth == 0:
            groups.append([])
        groups[-1].append(text)
        if text in ("(", "[", "{", "<"):
            depth += 1
        elif text in (")", "]", "}", ">"):
            depth -= 1
    return groups


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
