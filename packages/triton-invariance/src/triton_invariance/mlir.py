"""A small structural parser for MLIR assembly as Triton prints it (TTIR / TTGIR).

It does not know any dialect's custom syntax. It knows what every MLIR file shares: the token
classes (SSA values ``%x``/``%x#1``, block labels ``^bb0``, symbols ``@f``, attribute and type
aliases ``#a``/``!t``, strings, numbers, shape prefixes ``128x64x``), balanced brackets, result
lists (``%a, %b:2 =``), op names (custom ``tt.load`` or generic ``"tt.load"``), regions with blocks
and block arguments, alias definitions, and ``loc(...)`` debug locations, which it drops.

Statement boundaries follow MLIR's printer: one op per line at bracket depth 0, and a region opens
with ``{`` at the end of a line. That is the printer's contract (generic and custom forms alike),
so the parser needs no per-dialect grammar and never splits an attribute dictionary from its op.

Why not Triton's own bindings: ``triton._C.libtriton.ir.parse_mlir_module`` parses TTGIR, but its
operation objects expose names, operands and a handful of typed attribute getters, not an
enumeration of attributes or types, so they cannot hash everything the fingerprint must cover. A
parser of our own also makes the fingerprint identical with and without Triton installed (the CLI
compares baselines without importing Triton). The tests use the bindings as an independent oracle.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from itertools import compress, count, repeat
from operator import itemgetter, not_
from typing import Final, NamedTuple, cast

# Token kinds.
VALUE: Final = "value"  # %name or %name#3
BLOCK: Final = "block"  # ^bb0
SYMBOL: Final = "symbol"  # @name or @"quoted"
HASH: Final = "hash"  # #alias or #dialect.attr
BANG: Final = "bang"  # !alias or !dialect.type
STRING: Final = "string"
NUMBER: Final = "number"
DIMS: Final = "dims"  # the `128x64x` prefix of a shaped type
IDENT: Final = "ident"
PUNCT: Final = "punct"
NEWLINE: Final = "newline"
REGION: Final = "region"  # placeholder left in an op's tokens where one of its regions was

_SUFFIX = r"[A-Za-z0-9_.$\-]+"
_STRING = r'"(?:[^"\\\n]|\\.)*"'
# `loc(...)` with up to three levels of nested parentheses (`loc(callsite("f"(#loc1) at #loc2))`)
# is dropped by the regex itself; a deeper one falls through as an identifier `loc` and the
# parser skips it (`_Parser._skip_loc`).
_LOC_ARG = rf'(?:[^()"]|{_STRING})*'
_LOC = rf"loc\({_LOC_ARG}(?:\({_LOC_ARG}(?:\({_LOC_ARG}\){_LOC_ARG})*\){_LOC_ARG})*\)"
# One capturing group holds the token; blanks, comments and locations match outside it (empty
# capture), so `findall` does all the scanning in C. The token's kind follows from its first
# character (see `_KIND_BY_FIRST_CHAR`), which is how MLIR's own lexer dispatches too.
# Alternatives are tried in order, so the most frequent come first (identifiers, punctuation,
# values: a fifth less scanning than in lexer order); where two can match at one place the
# order decides, and there the earlier must stay first: hex and floats before a shape prefix
# (`0xFF` is not `0x` + `FF`), a shape prefix before `?` (`?x4x`), `::` before `:`.
_TOKEN_PATTERN: Final = rf"""[ \t\r]*(?:{_LOC}|//[^\n]*|\Z|(
    [A-Za-z_][A-Za-z0-9_.$]*
  | [(){{}}\[\]<>,=*+|]
  | %{_SUFFIX}(?:\#\d+)?
  | ::|:
  | \n
  | \#{_SUFFIX}
  | !{_SUFFIX}
  | {_STRING}
  | \^{_SUFFIX}
  | @(?:{_STRING}|{_SUFFIX})
  | -?0x[0-9A-Fa-f]+(?![\w.])
  | -?\d+\.\d*(?:[eE][+-]?\d+)?
  | -?\d+[eE][+-]?\d+
  | (?:\d+|\?)(?:x(?:\d+|\?))*x(?=[A-Za-z!?])
  | -?\d+
  | ->|\?
  | .
    ))"""
# The kind of a token whose first character decides it. Absent: `-`, digits and `?`, whose
# kind the last character decides (`_KIND_BY_LAST_CHAR`), and characters that start no token.
_KIND_BY_FIRST_CHAR: Final = {
    "%": VALUE,
    "^": BLOCK,
    "@": SYMBOL,
    "#": HASH,
    "!": BANG,
    '"': STRING,
    "\n": NEWLINE,
    **dict.fromkeys("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_", IDENT),
    **dict.fromkeys("(){}[]<>,:=*+|", PUNCT),
}
# For a token starting with `-`, a digit or `?`: a shape prefix ends with `x` (`128x`, `?x4x`: no
# number does), `->` with `>` and a lone `?` with `?`; anything else is a number (`-1.5`, `0x1F`).
_KIND_BY_LAST_CHAR: Final = {"x": DIMS, ">": PUNCT, "?": PUNCT}
# First characters of the tokens whose kind the last character decides. A character that is
# neither here nor in `_KIND_BY_FIRST_CHAR` starts no token: the pattern's last alternative
# (`.`) matched it on its own, and it is an error.
_LAST_CHAR_DECIDES: Final = frozenset("-0123456789?")
_OPEN_TO_CLOSE: Final = {"(": ")", "[": "]", "{": "}", "<": ">"}
_CLOSERS: Final = frozenset(_OPEN_TO_CLOSE.values())


MAX_NESTING: Final = 100
"""Deepest region nesting (and alias chain) accepted. Triton kernels nest a handful of levels;
the parser and the canonicaliser recurse per level, so a limit of our own turns a hostile file
into an `InvalidTTGIRError` long before Python's recursion limit would."""


class InvalidTTGIRError(ValueError):
    """The text is not a TTGIR module this package can fingerprint."""


class MlirSyntaxError(InvalidTTGIRError):
    """The text is not well-formed MLIR assembly (the message names the line)."""


class Token(NamedTuple):
    """One lexical token; `pos` (its index in the token list) only serves error messages."""

    kind: str
    text: str
    pos: int


@dataclass(slots=True)
class Block:
    """A block: its header tokens (``^bb0(%a: f32)``, empty for an unlabeled entry block)."""

    header: list[Token] = field(default_factory=list)
    ops: list[Operation] = field(default_factory=list)


@dataclass(slots=True)
class Operation:
    """An op statement.

    `results` are ``(name, count)`` pairs (``%0:2`` defines two values ``%0#0``/``%0#1``).
    `body` is every token after the op name, ``loc(...)`` removed, with a `REGION` placeholder token
    where each region was; `regions[i]` is the i-th region (a list of blocks).
    """

    name: str
    results: list[tuple[str, int]]
    body: list[Token]
    regions: list[list[Block]]
    pos: int


@dataclass(slots=True)
class Module:
    """A parsed file: alias definitions (``#a = ...`` / ``!t = ...``) and top-level ops."""

    aliases: dict[str, list[Token]]
    ops: list[Operation]


@functools.cache
def _token_re() -> re.Pattern[str]:
    # Compiled on first use, not at import: commands that only read baselines never tokenize.
    return re.compile(_TOKEN_PATTERN, re.VERBOSE)


def lex(text: str) -> tuple[list[str], list[str]]:
    """The kinds and the texts of `tokenize(text)`'s tokens, as two lists.

    For readers that need no token objects: the data-flow hash reads every canonical op line
    so, without a `Token` per token.
    """
    # Every step over all tokens is a C loop (findall, filter, map, compress): the fingerprint
    # lexes the module and then each canonical line again, so a per-token Python loop here was
    # its largest cost. Only the tokens whose first character does not decide their kind (a
    # number or shape prefix, `->`, `?`; or an error) get a Python step.
    pieces = list(filter(None, _token_re().findall(text)))
    kinds = list(map(_KIND_BY_FIRST_CHAR.get, map(itemgetter(0), pieces)))
    for i in compress(count(), map(not_, kinds)):  # the indices of the None kinds
        piece = pieces[i]
        if piece[0] not in _LAST_CHAR_DECIDES:
            line = 1 + pieces[:i].count("\n")
            raise MlirSyntaxError(f"line {line}: unexpected character {piece!r}")
        kinds[i] = _KIND_BY_LAST_CHAR.get(piece[-1], NUMBER)
    return cast("list[str]", kinds), pieces  # every None was replaced above


def tokenize(text: str) -> list[Token]:
    """Split MLIR assembly into tokens (whitespace, comments, ``loc(...)`` dropped; newlines kept).

    `Token.pos` is the token's index in the returned list.
    """
    kinds, texts = lex(text)
    return list(map(tuple.__new__, repeat(Token), zip(kinds, texts, count())))


class _Parser:
    def __init__(self, tokens: list[Token]) -> None:
        self.toks = tokens
        self.i = 0
        self.n = len(tokens)
        self.depth = 0

    # -- helpers --------------------------------------------------------------------------------
    def _error(self, message: str, tok: Token | None = None) -> MlirSyntaxError:
        if tok is None:
            tok = self.toks[self.i] if self.i < self.n else (self.toks[-1] if self.toks else None)
        if tok is None:
            return MlirSyntaxError(message)
        line = 1 + sum(1 for t in self.toks[: tok.pos] if t.kind == NEWLINE)
        return MlirSyntaxError(f"line {line}: {message}")

    def _skip_newlines(self) -> None:
        while self.i < self.n and self.toks[self.i].kind == NEWLINE:
            self.i += 1

    def _skip_loc(self) -> None:
        """Skip ``loc`` and its balanced parenthesised group; `self.i` is at ``loc``."""
        start = self.toks[self.i]
        self.i += 1  # 'loc'
        depth = 0
        while self.i < self.n:
            t = self.toks[self.i]
            self.i += 1
            if t.kind == PUNCT and t.text == "(":
                depth += 1
            elif t.kind == PUNCT and t.text == ")":
                depth -= 1
                if depth == 0:
                    return
        raise self._error("unterminated loc(...)", start)

    # -- grammar --------------------------------------------------------------------------------
    def parse_module(self) -> Module:
        aliases: dict[str, list[Token]] = {}
        ops: list[Operation] = []
        while True:
            self._skip_newlines()
            if self.i >= self.n:
                return Module(aliases, ops)
            t = self.toks[self.i]
            nxt = self.toks[self.i + 1] if self.i + 1 < self.n else None
            if t.kind in (HASH, BANG) and nxt is not None and nxt.text == "=":
                self.i += 2
                body, regions = self._statement()
                if regions:
                    raise self._error(f"alias {t.text} defined with a region", t)
                if t.text in aliases:
                    raise self._error(f"alias {t.text} defined twice", t)
                aliases[t.text] = body  # a `#loc = loc(...)` alias ends up empty
            else:
                ops.append(self._operation())

    def _operation(self) -> Operation:
        first = self.toks[self.i]
        results: list[tuple[str, int]] = []
        if first.kind == VALUE:
            while True:
                t = self.toks[self.i]
                if t.kind != VALUE:
                    raise self._error(f"expected an SSA value in a result list, got {t.text!r}")
                self.i += 1
                count = 1
                if self.i < self.n and self.toks[self.i].text == ":":
                    num = self.toks[self.i + 1] if self.i + 1 < self.n else None
                    if num is None or num.kind != NUMBER:
                        raise self._error("expected a result count after ':'")
                    count = int(num.text)
                    self.i += 2
                results.append((t.text, count))
                sep = self.toks[self.i] if self.i < self.n else None
                if sep is not None and sep.text == ",":
                    self.i += 1
                    continue
                if sep is not None and sep.text == "=":
                    self.i += 1
                    break
                raise self._error("expected ',' or '=' after a result")
        if self.i >= self.n:
            raise self._error("expected an operation name")
        name_tok = self.toks[self.i]
        if name_tok.kind == STRING:
            name = name_tok.text[1:-1]
        elif name_tok.kind == IDENT:
            name = name_tok.text
        else:
            raise self._error(f"expected an operation name, got {name_tok.text!r}")
        self.i += 1
        body, regions = self._statement()
        return Operation(name, results, body, regions, first.pos)

    def _statement(self) -> tuple[list[Token], list[list[Block]]]:
        """Tokens up to the end of the statement, regions parsed recursively."""
        body: list[Token] = []
        regions: list[list[Block]] = []
        stack: list[Token] = []
        toks, n = self.toks, self.n
        i = self.i  # a local index, written back before any call that reads `self.i`
        while i < n:
            t = toks[i]
            kind, text = t.kind, t.text
            if kind == NEWLINE:
                i += 1
                if not stack:
                    break
                continue
            if kind == PUNCT:
                if text == "{" and (i + 1 >= n or toks[i + 1].kind == NEWLINE):
                    # A `{` that ends its line opens a region (the printer's convention).
                    self.i = i + 1
                    regions.append(self._region())
                    i = self.i
                    body.append(Token(REGION, str(len(regions) - 1), t.pos))
                    continue
                if text in _OPEN_TO_CLOSE:
                    stack.append(t)
                elif text in _CLOSERS:
                    if not stack or _OPEN_TO_CLOSE[stack[-1].text] != text:
                        raise self._error(f"unbalanced {text!r}", t)
                    stack.pop()
            elif kind == IDENT and text == "loc" and i + 1 < n and toks[i + 1].text == "(":
                self.i = i
                self._skip_loc()
                i = self.i
                continue
            body.append(t)
            i += 1
        self.i = i
        if stack:
            raise self._error(f"{stack[-1].text!r} is never closed", stack[-1])
        return body, regions

    def _region(self) -> list[Block]:
        """Blocks up to the ``}`` that closes the region (`self.i` is just after its ``{``)."""
        blocks = [Block()]
        open_tok = self.toks[self.i - 1]
        if self.depth >= MAX_NESTING:
            raise self._error(f"regions nested more than {MAX_NESTING} deep", open_tok)
        self.depth += 1
        try:
            return self._blocks(blocks, open_tok)
        finally:
            self.depth -= 1

    def _blocks(self, blocks: list[Block], open_tok: Token) -> list[Block]:
        while True:
            self._skip_newlines()
            if self.i >= self.n:
                raise self._error("region is never closed", open_tok)
            t = self.toks[self.i]
            if t.kind == PUNCT and t.text == "}":
                self.i += 1
                return blocks
            if t.kind == BLOCK:
                header, regions = self._statement()
                if regions:
                    raise self._error("block header with a region", t)
                if blocks[-1].header or blocks[-1].ops:
                    blocks.append(Block(header=header))
                else:
                    blocks[-1].header = header
            else:
                blocks[-1].ops.append(self._operation())


def parse(text: str) -> Module:
    """Parse MLIR assembly into a `Module`; raises `MlirSyntaxError` naming the line."""
    return _Parser(tokenize(text)).parse_module()
