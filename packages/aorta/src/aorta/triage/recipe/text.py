"""Reading recipe-like text safely: regular files only, bounded size, and a YAML/JSON parser
that refuses duplicate keys, alias bombs, deep nesting and base-60 numbers.

A leaf of the recipe package: recipes, SLURM configs and every file of a run directory are
read through here (a run directory received from someone else is as untrusted as a recipe).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from aorta.triage.errors import RecipeSchemaError
from aorta.triage.recipe.limits import MAX_EXPANDED_NODES, MAX_NESTING, MAX_RECIPE_BYTES
from toolkit_core.errors import FileTooLargeError, PathError
from toolkit_core.paths import read_regular_bytes
from toolkit_core.yaml_safe import ExpansionLimitError, check_expanded_size

__all__ = ["parse_recipe_text", "read_regular_file"]


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate keys, alias bombs and base-60 numbers."""

    def compose_document(self) -> Any:
        node = super().compose_document()
        _check_expanded_size(node)
        return node


def _check_expanded_size(root: yaml.Node | None) -> None:
    # `toolkit_core.yaml_safe`: the size and nesting with every alias expanded, linear in the
    # file. The root is level 1 there and depth 0 here, hence MAX_NESTING + 1 levels.
    if root is None:
        return
    try:
        check_expanded_size(root, max_nodes=MAX_EXPANDED_NODES, max_depth=MAX_NESTING + 1)
    except ExpansionLimitError as exc:
        problem = {
            "recursive": "an alias that contains itself",
            "depth": f"nested deeper than {MAX_NESTING} levels",
            "nodes": f"more than {MAX_EXPANDED_NODES} values once aliases are expanded",
        }[exc.what]
        raise yaml.constructor.ConstructorError(None, None, problem, exc.node.start_mark) from None


def _construct_unique_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    loader.flatten_mapping(node)
    seen: set[object] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node)
        mark = key_node.start_mark
        try:
            duplicate = key in seen
        except TypeError:
            raise yaml.constructor.ConstructorError(
                None, None, "a key must be a plain value, not a list or mapping", mark
            ) from None
        if duplicate:
            raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", mark)
        seen.add(key)
    return loader.construct_mapping(node)


def _refuse_base_60(tag: str) -> Any:
    base = yaml.SafeLoader.yaml_constructors[tag]

    def construct(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> object:
        if ":" in str(node.value):
            raise yaml.constructor.ConstructorError(
                None,
                None,
                f"{node.value!r} is a YAML 1.1 base-60 number; quote it if a string is meant",
                node.start_mark,
            )
        return base(loader, node)

    return construct


_UniqueKeyLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_unique_mapping
)
for _tag in ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float"):
    _UniqueKeyLoader.add_constructor(_tag, _refuse_base_60(_tag))


def _unique_json_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for key, value in pairs:
        if key in data:
            raise ValueError(f"duplicate key {key!r}")
        data[key] = value
    return data


def _walk(data: object, path: str = "") -> Iterator[tuple[str, object]]:
    # Iterative (no recursion limit) and bounded: the loaders already refused deep nesting.
    stack: list[tuple[str, object, int]] = [(path, data, 0)]
    while stack:
        here, value, depth = stack.pop()
        if depth > MAX_NESTING:
            raise _TooDeepError(here)
        yield here, value
        if isinstance(value, dict):
            for key, child in value.items():
                yield f"{here}.{key}" if here else str(key), key
                stack.append((f"{here}.{key}" if here else str(key), child, depth + 1))
        elif isinstance(value, list):
            stack.extend((f"{here}[{i}]", child, depth + 1) for i, child in enumerate(value))


class _TooDeepError(Exception):
    """Raised by `_walk` with the path where nesting passed `MAX_NESTING`."""


def _check_values(label: str, data: object) -> None:
    try:
        _check_each_value(label, data)
    except _TooDeepError as exc:
        raise RecipeSchemaError(
            f"{label}: {_key_path(str(exc))}: nested deeper than {MAX_NESTING} levels"
        ) from None


def _key_path(path: str) -> str:
    """A key path fit for a one-line message: the keys are the file's own text, and a key
    holding a newline or a lone surrogate would break the line (or the terminal) otherwise."""
    return ascii(path[:200])[1:-1]


def _check_each_value(label: str, data: object) -> None:
    for path, value in _walk(data):
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise RecipeSchemaError(
                    f"{label}: {_key_path(path) or '<top>'}: string holds a lone surrogate"
                    " (invalid Unicode)"
                ) from None


def parse_recipe_text(label: str, text: str, *, json_format: bool) -> object:
    """Parse recipe text (YAML, or JSON when `json_format`) into plain data, or fail in one line.

    Also used for run-directory files, which are as untrusted as a recipe.
    """
    try:
        if json_format:
            data = json.loads(text, object_pairs_hook=_unique_json_object)
        else:
            # A SafeLoader subclass: plain data only, never arbitrary Python objects.
            data = yaml.load(text, Loader=_UniqueKeyLoader)
    except json.JSONDecodeError as exc:
        raise RecipeSchemaError(
            f"{label}: line {exc.lineno}, column {exc.colno}: invalid JSON: {exc.msg}"
        ) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        problem = " ".join(str(problem).split())  # one line, whatever yaml put in it
        raise RecipeSchemaError(f"{label}: {where}invalid YAML: {problem[:300]}") from None
    except RecursionError:
        raise RecipeSchemaError(f"{label}: nested deeper than the parser allows") from None
    except ValueError as exc:
        # Integers beyond Python's digit limit, duplicate JSON keys.
        reason = " ".join(str(exc).split())[:300]
        raise RecipeSchemaError(f"{label}: invalid value: {reason}") from None
    _check_values(label, data)
    return data


def read_regular_file(
    label: str, path: Path, what: str = "recipe", limit: int = MAX_RECIPE_BYTES
) -> bytes:
    """The bytes of `path` if it is a regular file of at most `limit` bytes, else one-line error.

    The checks are `toolkit_core.paths.read_regular_bytes` (a FIFO or a device is refused
    instead of read); here they become a `RecipeSchemaError` labelled with the file.
    """
    try:
        return read_regular_bytes(path, max_bytes=limit)
    except FileTooLargeError:
        raise RecipeSchemaError(f"{label}: larger than {limit} bytes") from None
    except PathError as exc:
        problem = exc.problem.replace("cannot read:", f"cannot read {what}:")
        raise RecipeSchemaError(f"{label}: {problem}") from None
