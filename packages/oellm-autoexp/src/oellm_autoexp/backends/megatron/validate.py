"""Check Megatron arguments from a config against an `ArgSchema` and normalise their types.

Config keys are Megatron's destination names (``num_layers``, ``lr``, ``overlap_grad_reduce``),
i.e. the attribute names `args.<dest>` inside Megatron. A key the parser does not know, a value of
the wrong type, a choice not offered, a boolean that the parser's flag cannot express: each is one
`ConfigError` naming the key path and, for an unknown key, the closest valid name.

The result maps each destination to the value Megatron would see after parsing the command line
that `cmdline.serialise` writes for it (ints as int, numbers for a float option as float, numbers
for a string option as their text). `None` means "leave Megatron's default" and is dropped.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

from oellm_autoexp.backends.megatron.argspec import ArgSchema, ArgSpec
from oellm_autoexp.backends.megatron.cmdline import same_as_default
from oellm_autoexp.errors import ConfigError, closest

# argparse reads a list element that starts with "-" as the next option unless it looks like a
# negative number to argparse (this pattern, `ArgumentParser._negative_number_matcher`).
_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")


def normalise_args(
    args: Mapping[str, Any],
    schema: ArgSchema,
    *,
    key_prefix: str,
    other_keys: Iterable[str] = (),
) -> dict[str, Any]:
    """Validate `args` (destination -> config value) and return them normalised.

    `key_prefix` is the config path of the mapping (e.g. ``backend.megatron``) used in messages.
    `other_keys` are names that are valid elsewhere and are offered as suggestions too.
    """
    out: dict[str, Any] = {}
    for dest, value in args.items():
        key = f"{key_prefix}.{dest}"
        spec = schema.get(dest)
        if spec is None:
            raise ConfigError(_unknown_message(dest, schema, other_keys), key=key)
        if value is None:
            continue
        out[dest] = normalise_value(spec, value, key=key)
    missing = [s for s in schema if s.required and s.dest not in out]
    if missing:
        spec = missing[0]
        raise ConfigError(
            f"Megatron requires {spec.option}; set it ({spec.describe()})",
            key=f"{key_prefix}.{spec.dest}",
        )
    return out


def _unknown_message(dest: str, schema: ArgSchema, other_keys: Iterable[str]) -> str:
    # A key written in option form (`num-layers`, `--num-layers`) is the most common slip.
    as_dest = dest.lstrip("-").replace("-", "_")
    spec = schema.get(as_dest) if as_dest != dest else None
    if spec is not None:
        return (
            f"unknown Megatron argument {dest!r}; write it as {as_dest!r} "
            f"(the destination name of {spec.option})"
        )
    others = list(other_keys)
    if dest in others:
        return (
            f"{dest!r} is not a Megatron argument but a setting of the enclosing section; "
            "move it one level up"
        )
    hint = closest(as_dest, [*schema.dests(), *others])
    suggestion = f"; did you mean {hint!r}?" if hint else ""
    return f"unknown Megatron argument {dest!r}{suggestion} (checked against {schema.origin})"


def normalise_value(spec: ArgSpec, value: Any, *, key: str) -> Any:
    """Check one value against its spec and return it as Megatron would parse it."""
    if spec.kind == "unsupported":
        raise ConfigError(
            f"{spec.option} uses argparse action {spec.type_name}, which cannot be written from a "
            "config value; put the exact tokens in the backend's extra_args",
            key=key,
        )
    if spec.kind in ("flag", "bool_optional"):
        return _normalise_bool(spec, value, key=key)
    if spec.kind == "list":
        return _normalise_list(spec, value, key=key)
    return _normalise_scalar(spec, value, key=key)


def _normalise_bool(spec: ArgSpec, value: Any, *, key: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"expected true or false for {spec.option}, got {value!r}", key=key)
    expressible: tuple[Any, ...] = (spec.default, spec.const)
    if spec.negative_option is not None:  # `--x` / `--no-x` as two flags of one destination
        expressible = (*expressible, not spec.const)
    if spec.kind == "flag" and value not in expressible:
        # e.g. a store_true option whose default is None and no --no- twin: `false` is neither
        # what the flag stores nor what Megatron gets without it, so it cannot be passed.
        raise ConfigError(
            f"{spec.option} can only be switched to {spec.const!r} "
            f"(its default is {spec.default!r}); {value!r} cannot be expressed on Megatron's "
            "command line",
            key=key,
        )
    return value


def _normalise_list(spec: ArgSpec, value: Any, *, key: str) -> Any:
    if same_as_default(value, spec.default):
        # Megatron's own default (`[]` for a `+` option, or the scalar default some list options
        # have, e.g. --moe-aux-loss-coeff 0.0): valid, and left off the command line.
        return list(value) if isinstance(value, tuple) else value
    if not isinstance(value, list | tuple) and not isinstance(spec.default, list | tuple | None):
        # A list option with a scalar default (Megatron reads either form): one item.
        value = [value]
    if not isinstance(value, list | tuple):
        raise ConfigError(
            f"expected a list for {spec.option} (nargs={spec.nargs!r}), got {value!r}", key=key
        )
    if spec.nargs == "+" and not value:
        raise ConfigError(f"{spec.option} needs at least one value", key=key)
    if isinstance(spec.nargs, int) and len(value) != spec.nargs:
        raise ConfigError(
            f"{spec.option} takes exactly {spec.nargs} values, got {len(value)}", key=key
        )
    items = [_normalise_scalar(spec, item, key=f"{key}[{i}]") for i, item in enumerate(value)]
    for i, item in enumerate(items):
        token = item if isinstance(item, str) else None
        if token is not None and token.startswith("-") and not _NEGATIVE_NUMBER.match(token):
            raise ConfigError(
                f"list value {token!r} starts with '-', so Megatron's parser would read it "
                "as an option",
                key=f"{key}[{i}]",
            )
        if isinstance(item, float) and item < 0 and not math.isfinite(item):
            raise ConfigError(
                f"{item!r} cannot be passed in a list (argparse reads it as an option)",
                key=f"{key}[{i}]",
            )
    return items


def _normalise_scalar(spec: ArgSpec, value: Any, *, key: str) -> Any:
    converted = _convert(spec, value, key=key)
    if spec.choices is not None and converted not in spec.choices:
        options = ", ".join(repr(c) for c in spec.choices)
        raise ConfigError(
            f"{value!r} is not a valid choice for {spec.option} (choose from {options})", key=key
        )
    return converted


def _convert(spec: ArgSpec, value: Any, *, key: str) -> Any:
    if spec.value_type == "bool":
        if not isinstance(value, bool):
            raise ConfigError(f"expected true or false for {spec.option}, got {value!r}", key=key)
        return value
    if isinstance(value, bool):
        # YAML turns `yes`/`on` into booleans; no value option of Megatron takes one.
        raise ConfigError(
            f"expected {spec.describe()} for {spec.option}, got the boolean {value!r}", key=key
        )
    if spec.value_type == "int":
        if isinstance(value, int):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)  # e.g. the result of a resolver such as oc.mul
        raise ConfigError(f"expected an integer for {spec.option}, got {value!r}", key=key)
    if spec.value_type == "float":
        if isinstance(value, int | float):
            return float(value)
        raise ConfigError(f"expected a number for {spec.option}, got {value!r}", key=key)
    if isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return _number_text(value)  # what the option's type function receives from the command line
    raise ConfigError(f"expected {spec.describe()} for {spec.option}, got {value!r}", key=key)


def _number_text(value: int | float) -> str:
    return str(value) if isinstance(value, int) else repr(value)
