"""One op line's parts and normal form: what the data-flow hash of an op is built from.

An op line is split into its result names, its op name and the body after the name. The
generic form (``"arith.addf"(%a, %b) <{fastmath = #arith.fastmath<none>}> : (f32, f32) ->
f32``) and the custom form (``arith.addf %a, %b : f32``) of an op whose custom form is
``operands [attr-dict] : type`` (or ``: type -> type`` / ``: type to type``) reduce to one
normal form (operands, operand types, result types, attributes without the defaults the custom
printer elides); other custom forms are hashed as written (`normal_form` returns None). The
iter_args of an ``scf.for`` get a canonical order, so the pipeliner's order of loop-carried
values does not enter the hash. Pure functions over tokens; no Triton import.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Final

from triton_invariance.mlir import IDENT, STRING, VALUE, InvalidTTGIRError, lex

# Attributes the custom printer leaves out because they have their default value.
_DEFAULT_ATTRS: Final = frozenset(
    {"fastmath=#arith.fastmath<none>", "overflowFlags=#arith.overflow<none>"}
)
_DIGEST = 16


def digest(*parts: str) -> str:
    """A short blake2b hex digest of `parts`, each ended by a separator (so ("ab", "c") and
    ("a", "bc") differ)."""
    # One encode and one update of the joined text: the same bytes as updating part by part
    # (the separator is one byte in UTF-8), at a fraction of the calls.
    data = ("\x1f".join(parts) + "\x1f").encode("utf-8", "surrogatepass")
    return hashlib.blake2b(data, digest_size=_DIGEST).hexdigest()


@dataclass
class Loop:
    """The iter_args of an scf.for: a key per position (initial value and type; equal keys
    numbered in print order, so two are never merged) and the positions sorted by key. The
    pipeliner orders loop-carried values by the order of the loads they came from; permuting
    them (with the yield and the results alike) computes the same thing."""

    keys: list[str]
    order: list[int]


def loop_order(template: list[str], operands: list[str]) -> Loop | None:
    """The canonical order of an scf.for's iter_args from its template and operand hashes; None
    when the loop carries none or its type list cannot be read."""
    n = template.count("%=") - 1  # the induction variable, then the iter_args
    types = _type_list(template, "->")
    if n <= 0 or types is None or len(types) != n or len(operands) < 3 + n:
        return None
    plain = [
        digest(init, " ".join(ty)) for init, ty in zip(operands[3 : 3 + n], types, strict=True)
    ]
    keys = [
        k if plain.count(k) == 1 else digest(k, str(plain[:i].count(k)))
        for i, k in enumerate(plain)
    ]
    return Loop(keys, sorted(range(n), key=keys.__getitem__))


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


def permuted(
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


def tokens_of(line: str) -> tuple[list[str], list[str]] | None:
    """The token kinds and texts of `line` (`mlir.lex`), or None when it is not MLIR (a hand
    edit, hashed as raw text)."""
    try:
        return lex(line)
    except InvalidTTGIRError:
        return None


def split_op(kinds: list[str], texts: list[str]) -> tuple[list[str], str, int] | None:
    """``%a, %b = name body...`` -> (result names, op name, index of the body's first token);
    None if not an op."""
    results: list[str] = []
    i, n = 0, len(texts)
    if n and kinds[0] == VALUE:
        while i < n and kinds[i] == VALUE:
            results.append(texts[i])
            i += 1
            if i < n and texts[i] == ",":
                i += 1
        if i >= n or texts[i] != "=":
            return None
        i += 1
    if i >= n or kinds[i] not in (IDENT, STRING):
        return None
    return results, texts[i].strip('"'), i + 1


def _top_level(template: list[str], sep: str) -> list[list[str]]:
    if sep not in template:
        return [list(template)]  # the common case, found by a C scan: nothing to split
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


def normal_form(template: list[str], n_operands: int, n_results: int) -> str | None:
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
    return digest("normal", *_types(arrow[0][1:-1]), "->", *_types(outs), "attrs", *sorted(attrs))


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
            return digest("normal", " ".join(split[0]), "->", " ".join(split[1]), "attrs", *attrs)
    ty = " ".join(right)
    return digest("normal", *([ty] * n_operands), "->", *([ty] * n_results), "attrs", *attrs)


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
