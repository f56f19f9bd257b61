"""`compute_invariance(ttgir_text)`: the structural fingerprint of a TTGIR module.

Canonicalisation, applied to the parsed module (see `triton_invariance.mlir`):

* ``loc(...)`` and ``#loc`` aliases are gone (the parser drops them), and so is whitespace: lines
  are re-rendered from tokens.
* SSA values are renumbered ``%0, %1, ...`` by first appearance inside each function, block labels
  ``^b0, ^b1, ...`` likewise, so data flow is kept and names are not (Triton names values after
  Python variables, so a renamed variable would otherwise change the text).
* Functions defined in the module are renamed ``@f0, @f1, ...`` in order; the kernel's name is
  metadata (`InvarianceData.kernel_name`, the baseline's file name), not part of the fingerprint,
  because renaming a kernel does not change what it computes.
* Attribute and type aliases (``#blocked1``, ``#mma``, ``#shared``, ``!t``) are replaced by their
  definitions, recursively, so renumbered aliases do not matter but their content does.
* Every encoding carried by a type (``tensor<128xf16, #ttg.blocked<...>>``, memdesc encodings and
  memory spaces) is cut out of the op line into the layout component; the op line keeps shape and
  element type.
* Module attributes become the hardware config.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from triton_invariance.data import HwConfig, InvarianceData
from triton_invariance.generic import is_generic, to_custom_syntax
from triton_invariance.mlir import (
    BANG,
    BLOCK,
    DIMS,
    HASH,
    IDENT,
    MAX_NESTING,
    PUNCT,
    REGION,
    STRING,
    SYMBOL,
    VALUE,
    Block,
    InvalidTTGIRError,
    Operation,
    Token,
    parse,
)
from triton_invariance.options import knob_environment, numerics_options

__all__ = ["InvalidTTGIRError", "compute_invariance"]

# Type constructors whose `<...>` parameters may carry an encoding (besides any `!dialect.type`).
_SHAPED_TYPES: Final = frozenset({"tensor", "vector", "memref"})
# Module attributes that form the named hardware fields; both spellings Triton has used.
_HW_KEYS: Final = {
    "target": ("ttg.target", "triton_gpu.target"),
    "num_warps": ("ttg.num-warps", "triton_gpu.num-warps"),
    "num_ctas": ("ttg.num-ctas", "triton_gpu.num-ctas"),
    "threads_per_warp": ("ttg.threads-per-warp", "triton_gpu.threads-per-warp"),
}
# What Triton's TritonGPU dialect assumes when a module omits the attribute (its
# `getThreadsPerWarp` / `getNumCTAs` fall back to these), so an omitted attribute and the
# written default are the same kernel. num-warps and the target have no default.
_HW_DEFAULTS: Final = {"num_ctas": "1", "threads_per_warp": "32"}
_NO_SPACE_BEFORE: Final = frozenset({")", "]", ">", "}", ","})
_NO_SPACE_AFTER: Final = frozenset({"(", "[", "<", "{"})
_GLUE_BEFORE_OPEN: Final = frozenset({IDENT, HASH, BANG, SYMBOL, STRING, BLOCK})


def compute_invariance(
    ttgir_text: str,
    kernel_name: str | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> InvarianceData:
    """Fingerprint one TTGIR module (the text of ``CompiledKernel.asm["ttgir"]`` or ``str(mod)``).

    `kernel_name` selects the entry function when the module has several public ones; by default
    the module's single public function is the kernel. `metadata` (the compiled kernel's
    metadata mapping, `CompiledKernel.metadata._asdict()`) adds the compile-options component and
    the environment knobs in effect now; without it that component is not recorded. Raises
    `InvalidTTGIRError` (a `ValueError`) for text that is not MLIR or not a TTGIR module (no
    module attributes, no kernel). A module in MLIR's generic syntax is read through Triton's own
    parser (`triton_invariance.generic`) and fingerprints like its custom-syntax print.
    """
    if is_generic(ttgir_text):
        ttgir_text = to_custom_syntax(ttgir_text)
    module = parse(ttgir_text)
    if len(module.ops) != 1 or module.ops[0].name not in ("module", "builtin.module"):
        raise InvalidTTGIRError("expected exactly one top-level `module` op")
    top = module.ops[0]
    resolver = _AliasResolver(module.aliases)
    hw = _hw_config(resolver.resolve(top.body))
    if len(top.regions) != 1 or len(top.regions[0]) != 1:
        raise InvalidTTGIRError("the module must have one region with one block")
    functions = top.regions[0][0].ops
    entry = _entry_function(functions, kernel_name)
    defined = [sym for sym in (_defined_symbol(op) for op in functions) if sym is not None]
    symbols = {sym: f"@f{i}" for i, sym in enumerate(defined)}
    builder = _Builder(resolver, symbols)
    dtype_signature = ""
    for op in functions:
        builder.begin_function()
        if op is entry:
            dtype_signature = _dtype_signature(resolver.resolve(op.body))
        builder.add_op(op, depth=0)
    return InvarianceData(
        kernel_name=_symbol_name(_defined_symbol(entry) or "@"),
        dtype_signature=dtype_signature,
        hw_config=hw,
        ops=tuple(builder.ops),
        op_layouts=tuple(builder.op_layouts),
        layouts=tuple(builder.layouts),
        compile_options=None if metadata is None else numerics_options(metadata),
        compile_env=() if metadata is None else knob_environment(),
    )


class _AliasResolver:
    """Replaces alias references by their (recursively resolved) definitions.

    An attribute alias (``#blocked``) becomes one token whose text is the canonical rendering of
    its definition, computed once per alias: encodings are referenced by every tensor type, so
    re-rendering them per use would dominate the cost. A type alias (``!t``) is spliced in as
    tokens, so that encodings inside the aliased type are still seen as encodings.
    """

    def __init__(self, aliases: dict[str, list[Token]]) -> None:
        # `#loc = loc(...)` definitions are empty once locations are dropped: not attributes.
        self._defs = {name: body for name, body in aliases.items() if body}
        self._attrs: dict[str, Token] = {}
        self._types: dict[str, list[Token]] = {}

    def resolve(self, tokens: list[Token]) -> list[Token]:
        defs = self._defs
        out: list[Token] = []
        for t in tokens:
            if t.text in defs and t.kind in (HASH, BANG):
                if t.kind == HASH:
                    out.append(self._attr(t.text, ()))
                else:
                    out.extend(self._type(t.text, ()))
            else:
                out.append(t)
        return out

    def _expand(self, name: str, seen: tuple[str, ...]) -> list[Token]:
        if name in seen:
            raise InvalidTTGIRError(f"alias {name} is defined in terms of itself")
        if len(seen) >= MAX_NESTING:
            raise InvalidTTGIRError(f"alias {name}: aliases nested more than {MAX_NESTING} deep")
        out: list[Token] = []
        inner = (*seen, name)
        for t in self._defs[name]:
            if t.text in self._defs and t.kind == HASH:
                out.append(self._attr(t.text, inner))
            elif t.text in self._defs and t.kind == BANG:
                out.extend(self._type(t.text, inner))
            else:
                out.append(t)
        return out

    def _attr(self, name: str, seen: tuple[str, ...]) -> Token:
        token = self._attrs.get(name)
        if token is None:
            token = self._attrs[name] = Token(HASH, render(self._expand(name, seen)), -1)
        return token

    def _type(self, name: str, seen: tuple[str, ...]) -> list[Token]:
        tokens = self._types.get(name)
        if tokens is None:
            tokens = self._types[name] = self._expand(name, seen)
        return tokens


def render(tokens: list[Token] | Iterator[Token]) -> str:
    """Canonical text of a token sequence: spacing depends on the tokens only, never the input."""
    kinds: list[str] = []
    texts: list[str] = []
    for t in tokens:
        kinds.append(t.kind)
        texts.append(t.text)
    return _render(kinds, texts)


def _render(kinds: list[str], texts: list[str]) -> str:
    """`render` of tokens given as their kinds and texts (the canonicaliser builds op lines so,
    without a token object per rewritten value)."""
    if not texts:
        return ""
    parts = [texts[0]]
    for prev_kind, prev_text, text in zip(kinds, texts, texts[1:], strict=False):
        glued = (
            text in _NO_SPACE_BEFORE
            or prev_text in _NO_SPACE_AFTER
            or prev_kind == DIMS
            or (text in ("(", "<") and prev_kind in _GLUE_BEFORE_OPEN)
        )
        if not glued:
            parts.append(" ")
        parts.append(text)
    return "".join(parts)


@dataclass
class _Builder:
    """Accumulates op lines, per-op layout references and layout definitions for one module."""

    resolver: _AliasResolver
    symbols: dict[str, str]
    ops: list[str] = field(default_factory=list)
    op_layouts: list[str] = field(default_factory=list)
    layouts: list[str] = field(default_factory=list)
    _layout_ids: dict[str, int] = field(default_factory=dict)
    # Name scopes, innermost last. MLIR scopes value names and block labels by region: once a
    # region closes, its names may be printed again for unrelated values (the printer does reuse
    # `%argN` in sibling regions), so a flat name table would merge distinct values.
    _scopes: list[dict[str, str]] = field(default_factory=list)
    _label_scopes: list[dict[str, str]] = field(default_factory=list)  # one per region
    _counter: int = 0
    _block_counter: int = 0

    def begin_function(self) -> None:
        """Each function numbers its values and blocks afresh (names are function-scoped)."""
        self._scopes = [{}]
        self._label_scopes = [{}]
        self._counter = 0
        self._block_counter = 0

    def _define(self, text: str) -> str:
        """A new value named `text` in the innermost scope (shadowing any outer one)."""
        base, _, index = text.partition("#")
        canon = self._scopes[-1][f"{base}#{index or 0}"] = f"%{self._counter}"
        self._counter += 1
        return canon

    def _use(self, text: str) -> str:
        base, _, index = text.partition("#")
        key = f"{base}#{index or 0}"
        for scope in reversed(self._scopes):
            canon = scope.get(key)
            if canon is not None:
                return canon
        # Not defined yet: a function argument (declared in the function header) or a forward
        # reference; either way it belongs to the innermost scope from now on.
        return self._define(text)

    def _block_label(self, text: str) -> str:
        """Labels are local to their region; a branch may name a block printed further down."""
        scope = self._label_scopes[-1]
        canon = scope.get(text)
        if canon is not None:
            return canon
        canon = scope[text] = f"^b{self._block_counter}"
        self._block_counter += 1
        return canon

    def add_op(self, op: Operation, depth: int) -> None:
        indent = "  " * depth
        results = []
        for name, count in op.results:
            results.append(", ".join(self._define(f"{name}#{k}") for k in range(count)))
        head = f"{indent}{', '.join(results)} = {op.name}" if results else f"{indent}{op.name}"
        # Values the op's custom syntax declares for its regions (`scf.for %iv = ...`,
        # `iter_args(%acc = ...)`, function arguments) live in a scope that ends with the op.
        self._scopes.append({})
        line, refs = self._line(op.body, header=False)
        # `tt.reduce(%x)`: no blank between an op name and its operand parenthesis.
        self.ops.append(head + ("" if not line or line[0] == "(" else " ") + line)
        self.op_layouts.append(refs)
        for k, region in enumerate(op.regions):
            self.ops.append(f"{indent}  region {k}")
            self.op_layouts.append("")
            self._scopes.append({})
            self._label_scopes.append({})
            for block in region:
                self._add_block(block, depth + 1)
            self._label_scopes.pop()
            self._scopes.pop()
        self._scopes.pop()

    def _add_block(self, block: Block, depth: int) -> None:
        if block.header:
            line, refs = self._line(block.header, header=True)
            self.ops.append("  " * depth + line)
            self.op_layouts.append(refs)
        for op in block.ops:
            self.add_op(op, depth)

    def _line(self, body: list[Token], header: bool) -> tuple[str, str]:
        """Canonical line of an op body and the comma-joined ids of the layouts it references.

        In a block `header` every value is a (new) block argument; in an op body a value followed
        by ``=`` is declared there, any other is a use.
        """
        tokens = self.resolver.resolve(body)
        kinds: list[str] = []
        texts: list[str] = []
        refs: list[str] = []
        # Stack of open brackets; True marks the `<` of a type whose parameters may be encodings.
        stack: list[bool] = []
        i, n = 0, len(tokens)
        while i < n:
            kind, text, _ = tokens[i]
            if kind == HASH and stack and stack[-1]:
                j = _attribute_end(tokens, i)
                definition = text if j == i + 1 else render(tokens[i:j])
                refs.append(f"#{self._layout_id(definition)}")
                if texts and texts[-1] == ",":
                    kinds.pop()
                    texts.pop()
                i = j
                continue
            if kind == VALUE:
                declared = header or (i + 1 < n and tokens[i + 1].text == "=")
                text = (self._define if declared else self._use)(text)
            elif kind == BLOCK:
                text = self._block_label(text)
            elif kind == SYMBOL:
                text = self.symbols.get(text, text)
            elif kind == REGION:
                kind, text = PUNCT, "{region " + text + "}"
            elif kind == PUNCT:
                if text in ("(", "[", "{"):
                    stack.append(False)
                elif text == "<":
                    prev = tokens[i - 1] if i else None
                    stack.append(
                        prev is not None
                        and (
                            prev.kind == BANG or (prev.kind == IDENT and prev.text in _SHAPED_TYPES)
                        )
                    )
                elif text in (")", "]", "}", ">") and stack:
                    stack.pop()
            kinds.append(kind)
            texts.append(text)
            i += 1
        return _render(kinds, texts), ",".join(refs)

    def _layout_id(self, definition: str) -> int:
        index = self._layout_ids.get(definition)
        if index is None:
            index = self._layout_ids[definition] = len(self.layouts)
            self.layouts.append(definition)
        return index


def _attribute_end(tokens: list[Token], i: int) -> int:
    """Index just past the attribute starting at `tokens[i]` (a ``#name`` and its ``<...>``)."""
    j = i + 1
    if j < len(tokens) and tokens[j].text == "<":
        depth = 0
        while j < len(tokens):
            text = tokens[j].text
            if text == "<":
                depth += 1
            elif text == ">":
                depth -= 1
                if depth == 0:
                    return j + 1
            j += 1
        raise InvalidTTGIRError(f"unterminated attribute {tokens[i].text}<...")
    return j


def _split_top_level(tokens: list[Token], sep: str = ",") -> list[list[Token]]:
    """Split at `sep` tokens that are not nested in brackets."""
    parts: list[list[Token]] = [[]]
    depth = 0
    for t in tokens:
        if t.kind == PUNCT:
            if t.text in ("(", "[", "{", "<"):
                depth += 1
            elif t.text in (")", "]", "}", ">"):
                depth -= 1
            elif t.text == sep and depth == 0:
                parts.append([])
                continue
        parts[-1].append(t)
    return parts if parts != [[]] else []


def _hw_config(module_body: list[Token]) -> HwConfig:
    """Hardware config from ``module attributes {...}``."""
    # `module @name attributes {...}`: a module symbol name is not hardware configuration.
    module_body = [t for t in module_body if t.kind not in (REGION, SYMBOL)]
    if (
        len(module_body) < 3
        or module_body[0].text != "attributes"
        or module_body[1].text != "{"
        or module_body[-1].text != "}"
    ):
        raise InvalidTTGIRError(
            "the module has no `attributes {...}`: not TTGIR (TTIR has no num-warps / target)"
        )
    attrs: dict[str, str] = {}
    for entry in _split_top_level(module_body[2:-1]):
        key = entry[0].text.strip('"') if entry else ""
        value = render(entry[2:]) if len(entry) >= 3 and entry[1].text == "=" else "unit"
        attrs[key] = value
    found: dict[str, str] = {}
    for field_name, spellings in _HW_KEYS.items():
        present = [k for k in spellings if k in attrs]
        if present:
            found[field_name] = attrs.pop(present[0])
        elif field_name in _HW_DEFAULTS:
            found[field_name] = _HW_DEFAULTS[field_name]
        else:
            raise InvalidTTGIRError(
                f"module attribute {spellings[0]!r} is missing: not TTGIR (did you pass TTIR?)"
            )
    try:
        ints = {
            k: int(found[k].split(":")[0]) for k in ("num_warps", "num_ctas", "threads_per_warp")
        }
    except ValueError as exc:
        raise InvalidTTGIRError(
            f"module attributes: expected integer warp/CTA counts ({exc})"
        ) from exc
    return HwConfig(
        target=found["target"].strip('"'),
        num_warps=ints["num_warps"],
        num_ctas=ints["num_ctas"],
        threads_per_warp=ints["threads_per_warp"],
        extra=tuple(sorted(attrs.items())),
    )


def _defined_symbol(op: Operation) -> str | None:
    """The symbol token a function-like op defines (its first ``@name``), as written."""
    if not op.regions:
        return None
    for t in op.body:
        if t.kind == SYMBOL:
            return t.text
        if t.kind == PUNCT:
            return None
    return None


def _symbol_name(symbol: str) -> str:
    return symbol[1:].strip('"')


def _is_public(op: Operation) -> bool:
    for t in op.body:
        if t.kind == SYMBOL:
            return True
        if t.text in ("private", "nested"):
            return False
    return False


def _entry_function(functions: list[Operation], kernel_name: str | None) -> Operation:
    defined = [(op, _symbol_name(sym)) for op in functions if (sym := _defined_symbol(op))]
    if kernel_name is not None:
        for op, name in defined:
            if name == kernel_name:
                return op
        known = ", ".join(name for _, name in defined) or "none"
        raise InvalidTTGIRError(f"no function {kernel_name!r} in the module (functions: {known})")
    public = [(op, name) for op, name in defined if _is_public(op)]
    if len(public) != 1:
        listing = ", ".join(name for _, name in public) or "none"
        raise InvalidTTGIRError(
            f"expected one public kernel function, found {len(public)} ({listing}); "
            "pass kernel_name"
        )
    return public[0][0]


def _dtype_signature(func_body: list[Token]) -> str:
    """``input0:<type>,...->output0:<type>`` from a resolved function header."""
    start = next((i for i, t in enumerate(func_body) if t.kind == SYMBOL), None)
    if start is None or start + 1 >= len(func_body) or func_body[start + 1].text != "(":
        raise InvalidTTGIRError("kernel function header has no argument list")
    depth, end = 0, start + 1
    for end in range(start + 1, len(func_body)):
        text = func_body[end].text
        if text in ("(", "[", "{", "<"):
            depth += 1
        elif text in (")", "]", "}", ">"):
            depth -= 1
            if depth == 0:
                break
    inputs = []
    for k, arg in enumerate(_split_top_level(func_body[start + 2 : end])):
        # `%name : type {arg attrs}`: the type is what lies between ':' and the attribute dict.
        colon = next((i for i, t in enumerate(arg) if t.text == ":"), None)
        if colon is None:
            raise InvalidTTGIRError(f"kernel argument {k} has no type")
        type_tokens = arg[colon + 1 :]
        brace = next((i for i, t in enumerate(type_tokens) if t.text == "{"), len(type_tokens))
        inputs.append(f"input{k}:{render(type_tokens[:brace])}")
    outputs = []
    rest = func_body[end + 1 :]
    if rest and rest[0].text == "->":
        attrs = next((i for i, t in enumerate(rest) if t.text == "attributes"), len(rest))
        result_tokens = rest[1:attrs]
        if result_tokens and result_tokens[0].text == "(" and result_tokens[-1].text == ")":
            result_tokens = result_tokens[1:-1]
        for k, res in enumerate(_split_top_level(result_tokens)):
            brace = next((i for i, t in enumerate(res) if t.text == "{"), len(res))
            outputs.append(f"output{k}:{render(res[:brace])}")
    return ",".join(inputs) + "->" + ",".join(outputs)
