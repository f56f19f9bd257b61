"""What Megatron's command line accepts, as plain data.

An `ArgSchema` describes every destination (`args.<dest>` inside Megatron) of an argparse parser:
how it is spelled on the command line, what kind of action sets it (a value, a list, a flag, a
`--x/--no-x` pair), its element type, choices and default. It is built by introspecting a real
parser (Megatron-LM's, or the pared-down test fixture) and can be written to / read from JSON, so a
schema dumped inside a container validates configs on a host that has no Megatron checkout.

Validation and serialisation work on this data only; neither needs the parser object.
"""

from __future__ import annotations

import argparse
import enum
import json
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from oellm_autoexp.errors import ConfigError

Kind = Literal["value", "list", "flag", "bool_optional", "unsupported"]
ValueType = Literal["int", "float", "str", "bool", "custom"]

SCHEMA_FORMAT = "oellm-autoexp/megatron-args/1"

# JSON can hold these defaults/choices as they are; anything else (enums, tuples, callables'
# results) is stored as its string form, which is what the command line would carry anyway.
_JSON_SCALARS = (str, int, float, bool, type(None))


@dataclass(frozen=True)
class ArgSpec:
    """One Megatron destination and how its command-line option behaves.

    - `kind="value"`: `--opt VALUE` (argparse `store`, `nargs=None`).
    - `kind="list"`: `--opt V1 V2 ...` (`nargs` is `"+"`, `"*"` or an int).
    - `kind="flag"`: `--opt` stores `const` (`store_true`, `store_false`, `store_const`);
      `negative_option` is a second flag of the same destination storing the opposite boolean.
    - `kind="bool_optional"`: `--opt` / `--no-opt` (`argparse.BooleanOptionalAction`).
    - `kind="unsupported"`: any other action (append, count, custom classes); setting it from a
      config is refused with a pointer to `extra_args`.
    """

    dest: str
    option: str
    kind: Kind
    value_type: ValueType = "str"
    nargs: str | int | None = None
    choices: tuple[Any, ...] | None = None
    default: Any = None
    const: Any = None
    negative_option: str | None = None
    required: bool = False
    group: str | None = None
    type_name: str | None = None

    def describe(self) -> str:
        """A short human description of the accepted value (for error messages)."""
        if self.kind in ("flag", "bool_optional"):
            return "a boolean"
        if self.choices is not None:
            base = "one of " + ", ".join(repr(c) for c in self.choices)
        elif self.value_type == "custom":
            base = f"a value accepted by {self.type_name or 'its type function'}"
        else:
            base = {
                "int": "an integer",
                "float": "a number",
                "str": "a string",
                "bool": "true or false",
            }[self.value_type]
        if self.kind == "list":
            count = f"exactly {self.nargs}" if isinstance(self.nargs, int) else "a list of"
            return f"{count} items, each {base}" if count != "a list of" else f"a list, each {base}"
        return base


@dataclass(frozen=True)
class ArgSchema:
    """All destinations of one parser, in the order the parser defines them."""

    specs: tuple[ArgSpec, ...]
    origin: str
    # Where the parser came from when the schema was dumped (Megatron version, commit, path).
    provenance: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_dest", {s.dest: s for s in self.specs})

    def get(self, dest: str) -> ArgSpec | None:
        """The spec for `dest`, or None when the parser has no such destination."""
        by_dest: dict[str, ArgSpec] = self._by_dest  # type: ignore[attr-defined]
        return by_dest.get(dest)

    def __contains__(self, dest: object) -> bool:
        return isinstance(dest, str) and self.get(dest) is not None

    def __iter__(self) -> Iterator[ArgSpec]:
        return iter(self.specs)

    def __len__(self) -> int:
        return len(self.specs)

    def dests(self) -> list[str]:
        """Every destination name, in parser order."""
        return [s.dest for s in self.specs]

    def to_json(self) -> str:
        """Serialise the schema (stable key order, strict JSON)."""
        payload = {
            "format": SCHEMA_FORMAT,
            "origin": self.origin,
            "provenance": dict(self.provenance),
            "args": [_spec_to_json(s) for s in self.specs],
        }
        return json.dumps(payload, indent=1, allow_nan=False) + "\n"

    @classmethod
    def from_json(cls, text: str, *, source: str) -> ArgSchema:
        """Read a schema written by `to_json`; bad input is a `ConfigError` naming `source`."""
        try:
            payload = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(
                f"not a JSON argument schema ({exc.msg}, line {exc.lineno})", file=source
            ) from None
        if not isinstance(payload, dict) or payload.get("format") != SCHEMA_FORMAT:
            raise ConfigError(
                f"not a Megatron argument schema (expected format {SCHEMA_FORMAT!r})", file=source
            )
        try:
            specs = tuple(_spec_from_json(item) for item in payload["args"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(
                f"malformed Megatron argument schema entry ({exc})", file=source
            ) from None
        provenance = payload.get("provenance") or {}
        if not isinstance(provenance, dict):
            raise ConfigError("malformed Megatron argument schema: 'provenance'", file=source)
        return cls(specs=specs, origin=str(payload.get("origin", source)), provenance=provenance)

    @classmethod
    def load(cls, path: Path) -> ArgSchema:
        """Read a schema file; a missing file is a `ConfigError`."""
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(
                f"cannot read Megatron argument schema: {exc.strerror or exc}", file=path
            ) from None
        return cls.from_json(text, source=str(path))


def schema_from_parser(parser: argparse.ArgumentParser, *, origin: str) -> ArgSchema:
    """Describe every destination of `parser`.

    When several options share one destination (Megatron has a few aliases), the first one
    defined wins, as it does for argparse's own default.
    """
    titles = {id(a): g.title for g in parser._action_groups for a in g._group_actions}
    seen: dict[str, int] = {}
    specs: list[ArgSpec] = []
    for action in parser._actions:
        if not action.option_strings or action.dest == argparse.SUPPRESS:
            continue
        if isinstance(action, argparse._HelpAction | argparse._VersionAction):
            continue
        if action.dest in seen:
            # `--x` (store_true) plus `--no-x` (store_false, same dest): the second spelling is
            # how `false` is written, e.g. Megatron's --no-yarn-correction-range-round-to-int.
            index = seen[action.dest]
            specs[index] = _with_negation(specs[index], action)
            continue
        seen[action.dest] = len(specs)
        specs.append(_spec_from_action(action, titles.get(id(action))))
    return ArgSchema(specs=tuple(specs), origin=origin)


def _with_negation(spec: ArgSpec, action: argparse.Action) -> ArgSpec:
    """`spec` (a flag) with the option of a later flag that stores the opposite boolean."""
    if (
        spec.kind == "flag"
        and spec.negative_option is None
        and isinstance(spec.const, bool)
        and isinstance(action, argparse._StoreConstAction)
        and action.const is (not spec.const)
    ):
        return replace(spec, negative_option=_long_option(action))
    return spec


def _long_option(action: argparse.Action) -> str:
    longs = [o for o in action.option_strings if o.startswith("--")]
    return (longs or list(action.option_strings))[0]


def _value_type(action: argparse.Action) -> tuple[ValueType, str | None]:
    kind = action.type
    if kind is None or kind is str:
        return "str", None
    if kind is int:
        return "int", None
    if kind is float:
        return "float", None
    if kind is bool:  # `type=bool`: argparse calls bool(text), so only "" reads as False
        return "bool", None
    return "custom", getattr(kind, "__name__", type(kind).__name__)


def _spec_from_action(action: argparse.Action, group: str | None) -> ArgSpec:
    option = _long_option(action)
    common: dict[str, Any] = {
        "dest": action.dest,
        "option": option,
        # An enum default is written as its member name, the token its option takes.
        "default": _choice_token(action.default, action.type),
        "required": bool(action.required),
        "group": group,
    }
    if isinstance(action, argparse.BooleanOptionalAction):
        negative = next((o for o in action.option_strings if o.startswith("--no-")), None)
        return ArgSpec(kind="bool_optional", negative_option=negative, **common)
    if isinstance(action, argparse._StoreConstAction):  # store_true / store_false are subclasses
        return ArgSpec(kind="flag", const=action.const, **common)
    if type(action) is not argparse._StoreAction:
        return ArgSpec(kind="unsupported", type_name=type(action).__name__, **common)
    value_type, type_name = _value_type(action)
    choices = (
        None
        if action.choices is None
        else tuple(_choice_token(c, action.type) for c in action.choices)
    )
    if action.nargs in ("+", "*") or isinstance(action.nargs, int):
        return ArgSpec(
            kind="list",
            value_type=value_type,
            nargs=action.nargs,
            choices=choices,
            type_name=type_name,
            **common,
        )
    if action.nargs not in (None, "?"):
        return ArgSpec(kind="unsupported", type_name=f"nargs={action.nargs!r}", **common)
    return ArgSpec(
        kind="value", value_type=value_type, choices=choices, type_name=type_name, **common
    )


def _choice_token(choice: Any, convert: Any = None) -> Any:
    """How a choice (or default) is written on the command line.

    Megatron declares some choices as enum members that its type function builds from their
    *name* (``--attention-backend flash``); an enum used directly as the type builds them from
    their *value*. The token is whichever of the two the option's type function maps back to
    the member (the name when it cannot tell).
    """
    if not isinstance(choice, enum.Enum):
        return choice
    if callable(convert):
        for token in (choice.name, str(choice.value)):
            try:
                if convert(token) == choice:
                    return token
            except Exception:  # the type function rejects this spelling: try the next
                continue
    return choice.name


def _jsonable(value: Any) -> Any:
    if isinstance(value, _JSON_SCALARS):
        return value
    if isinstance(value, list | tuple) and all(isinstance(v, _JSON_SCALARS) for v in value):
        return list(value)
    if isinstance(value, enum.Enum):
        return value.name
    return str(value)


def _spec_to_json(spec: ArgSpec) -> dict[str, Any]:
    data = asdict(spec)
    data["default"] = _jsonable(spec.default)
    data["const"] = _jsonable(spec.const)
    data["choices"] = None if spec.choices is None else [_jsonable(c) for c in spec.choices]
    return data


def _spec_from_json(item: Mapping[str, Any]) -> ArgSpec:
    if not isinstance(item, Mapping):
        raise TypeError("each entry must be an object")
    data = dict(item)
    if data.get("kind") not in ("value", "list", "flag", "bool_optional", "unsupported"):
        raise ValueError(f"unknown kind {data.get('kind')!r} for {data.get('dest')!r}")
    choices = data.get("choices")
    data["choices"] = None if choices is None else tuple(choices)
    if isinstance(data.get("default"), list):
        data["default"] = list(data["default"])
    return ArgSpec(**data)
