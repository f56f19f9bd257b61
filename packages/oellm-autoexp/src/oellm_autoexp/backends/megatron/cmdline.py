"""Write normalised Megatron arguments as the command line Megatron's parser reads back.

The contract (property-tested against a Megatron-style parser): for arguments normalised by
`validate.normalise_args`, ``parser.parse_args(serialise(args, schema))`` yields every given value
and Megatron's default for every other destination.

- a value equal to the parser's default is left out (the command line says what differs);
- single values are written ``--opt=VALUE``, which argparse never mistakes for an option even
  when VALUE starts with ``-`` (and which can carry the empty text that a ``type=bool`` option
  needs for False, since argparse calls ``bool(text)``);
- lists are written ``--opt V1 V2 ...`` (an empty list for ``nargs="*"`` is the bare option);
- ``store_true`` / ``store_false`` / ``store_const`` write their option when the value is the
  stored constant; ``BooleanOptionalAction`` writes ``--opt`` or ``--no-opt``;
- `None` never reaches here (it means "Megatron's default").
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
from collections.abc import Hashable, Mapping, Sequence
from decimal import Decimal
from typing import Any

from oellm_autoexp.backends.megatron.argspec import ArgSchema, ArgSpec
from oellm_autoexp.errors import ConfigError


def serialise(args: Mapping[str, Any], schema: ArgSchema) -> list[str]:
    """The argv tokens for `args` (normalised), in the order given."""
    return [token for _, tokens in serialise_tokens(args, schema) for token in tokens]


def serialise_tokens(args: Mapping[str, Any], schema: ArgSchema) -> list[tuple[ArgSpec, list[str]]]:
    """Each destination's spec with its argv tokens (empty when the value is the default)."""
    out: list[tuple[ArgSpec, list[str]]] = []
    for dest, value in args.items():
        spec = schema.get(dest)
        if spec is None:  # normalise_args rejects these first; keep the invariant explicit
            raise KeyError(dest)
        out.append((spec, serialise_one(spec, value)))
    return out


def serialise_one(spec: ArgSpec, value: Any) -> list[str]:
    """The argv tokens for one destination."""
    if value is None or same_as_default(value, spec.default):
        return []
    if spec.kind in ("flag", "bool_optional"):
        return [_flag_token(spec, value)]
    if spec.kind == "list":
        return [spec.option, *(_token(v, in_list=True) for v in value)]
    return [f"{spec.option}={_token(value, in_list=False)}"]


def _flag_token(spec: ArgSpec, value: Any) -> str:
    """``--x`` or its negative twin (``--no-x``) for a boolean option."""
    positive = bool(value) if spec.kind == "bool_optional" else value == spec.const
    if positive or (spec.kind == "flag" and spec.negative_option is None):
        return spec.option
    if spec.negative_option is None:
        raise ValueError(f"{spec.option} has no --no- form")
    return spec.negative_option


def same_as_default(value: Any, default: Any) -> bool:
    """Whether a config value equals an option's default (so the option can be left out)."""
    # 1 == True in Python, so a type mismatch must not count as "equal to the default".
    if isinstance(value, bool) != isinstance(default, bool):
        return False
    if isinstance(value, list) and isinstance(default, tuple):
        default = list(default)
    try:
        return bool(value == default)
    except Exception:  # an exotic default (enum, custom object) never equals a config value
        return False


def _token(value: Any, *, in_list: bool) -> str:
    if isinstance(value, bool):
        # a `type=bool` option runs bool(text): any non-empty text is True, only "" is False
        return "True" if value else ""
    if isinstance(value, float):
        text = repr(value)
        if in_list and value < 0 and "e" in text:
            # argparse only accepts "-123" / "-1.5" shapes as negative numbers inside a list;
            # the exact decimal expansion of the shortest repr parses back to the same float.
            text = format(Decimal(text), "f")
        return text
    return str(value)


_ERROR_LINE = re.compile(r"error: (?:argument ([^:]+): )?(.*)$")


def check_with_parser(
    parser: argparse.ArgumentParser,
    argv: Sequence[str],
    schema: ArgSchema,
    *,
    key_prefix: str,
    extra_key: str,
) -> argparse.Namespace:
    """Parse `argv` with the real parser; its complaint becomes a one-line `ConfigError`.

    This catches what a schema cannot (custom type functions such as Megatron's `tuple_type`,
    options spelled in `extra_args`). The offending option is mapped back to its config key.
    """
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr):
            return parser.parse_args(list(argv))
    except SystemExit:
        lines = [ln for ln in stderr.getvalue().splitlines() if "error:" in ln]
        text = lines[-1] if lines else stderr.getvalue().strip() or "rejected by Megatron's parser"
        match = _ERROR_LINE.search(text)
        key = extra_key
        detail = text
        if match:
            detail = match.group(2)
            options = (match.group(1) or "").split("/")
            dest = _dest_for_option(options, schema)
            if dest is not None:
                key = f"{key_prefix}.{dest}"
                detail = f"{match.group(1)}: {detail}"
        raise ConfigError(f"Megatron's parser rejected the arguments: {detail}", key=key) from None


def _dest_for_option(options: Sequence[str], schema: ArgSchema) -> str | None:
    wanted = {o.strip() for o in options if o.strip()}
    for spec in schema:
        if spec.option in wanted or (spec.negative_option and spec.negative_option in wanted):
            return spec.dest
    return None


def parse_outcome_key(
    tokens: Sequence[tuple[ArgSpec, Sequence[str]]], extra: Sequence[str]
) -> Hashable:
    """What decides whether Megatron's parser accepts an argv, beyond what the schema checked.

    `tokens` is `serialise_tokens(...)` of normalised arguments. Values the schema checks
    completely (int, float, str, choices, list lengths) parse by construction (the round-trip
    property), so only *which* options appear matters for them (mutually exclusive or required
    options). Values the schema cannot check (custom type functions), the exact flag spelled
    (``--x`` or ``--no-x``) and the verbatim `extra` tokens are part of the key. Two argvs with
    the same key parse alike.
    """
    shape: list[tuple[str, tuple[str, ...]]] = []
    for spec, spec_tokens in tokens:
        if not spec_tokens:
            continue
        exact = spec.value_type == "custom" or spec.kind in ("flag", "bool_optional")
        shape.append((spec.dest, tuple(spec_tokens) if exact else ()))
    return (tuple(shape), tuple(extra))
