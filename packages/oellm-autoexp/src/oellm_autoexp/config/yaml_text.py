"""YAML reading without YAML 1.1's base-60 numbers.

PyYAML (and OmegaConf, which builds on it) read an unquoted ``time: 10:00:00`` as the integer
36000 and ``1:30`` as 90: a wall-clock limit silently becomes ``--time=36000`` (minutes). Our own
reads (plain config files, override values) use `SafeLoader` minus the base-60 resolvers, so
such values stay strings. Hydra composes files with OmegaConf's loader, so `base60_scalars` finds
the unquoted ones in a config tree to report them before they are misread.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

# YAML 1.1 int/float without the base-60 alternatives (everything else as in PyYAML).
_INT = re.compile(
    r"""^(?:[-+]?0b[0-1_]+
    |[-+]?0[0-7_]+
    |[-+]?(?:0|[1-9][0-9_]*)
    |[-+]?0x[0-9a-fA-F_]+)$""",
    re.X,
)
# Floats as OmegaConf reads them (1e-4 is a float, unlike plain YAML 1.1), minus base 60.
_FLOAT = re.compile(
    r"""^(?:[-+]?[0-9]+(?:_[0-9]+)*\.[0-9_]*(?:[eE][-+]?[0-9]+)?
    |[-+]?[0-9]+(?:_[0-9]+)*(?:[eE][-+]?[0-9]+)
    |\.[0-9]+(?:_[0-9]+)*(?:[eE][-+][0-9]+)?
    |[-+]?\.(?:inf|Inf|INF)
    |\.(?:nan|NaN|NAN))$""",
    re.X,
)
_INT_TAG = "tag:yaml.org,2002:int"
_FLOAT_TAG = "tag:yaml.org,2002:float"
_TIMESTAMP_TAG = "tag:yaml.org,2002:timestamp"


class NoBase60Loader(yaml.SafeLoader):
    """SafeLoader that reads scalars the way OmegaConf does, except that base-60 values stay
    strings; a key repeated in one mapping is an error (YAML would keep the last silently)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[str] = set()
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode):
                if key_node.value in seen:
                    raise yaml.constructor.ConstructorError(
                        "while constructing a mapping",
                        node.start_mark,
                        f"found duplicate key {key_node.value!r}",
                        key_node.start_mark,
                    )
                seen.add(key_node.value)
        return super().construct_mapping(node, deep=deep)


NoBase60Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag not in (_INT_TAG, _FLOAT_TAG, _TIMESTAMP_TAG)]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
NoBase60Loader.add_implicit_resolver(_INT_TAG, _INT, list("-+0123456789"))
NoBase60Loader.add_implicit_resolver(_FLOAT_TAG, _FLOAT, list("-+0123456789."))


def load_text(text: str) -> Any:
    """Parse YAML text (safe, no base-60 numbers). Raises yaml.YAMLError."""
    return yaml.load(text, Loader=NoBase60Loader)  # a SafeLoader subclass: no object tags


def base60_scalars(text: str) -> list[tuple[int, str]]:
    """(line, value) of every unquoted scalar that YAML 1.1 reads as a base-60 number."""
    found = []
    for token in yaml.scan(text, Loader=yaml.SafeLoader):
        if isinstance(token, yaml.ScalarToken) and token.plain and ":" in token.value:
            tag = _YAML11.resolve(  # type: ignore[no-untyped-call]
                yaml.ScalarNode, token.value, (True, False)
            )
            if tag in (_INT_TAG, _FLOAT_TAG):
                found.append((token.start_mark.line + 1, token.value))
    return found


class _QuotingDumper(yaml.SafeDumper):
    """Quotes every string that either YAML 1.1 or `NoBase60Loader` would read as non-string."""


_QuotingDumper.yaml_implicit_resolvers = {
    first: [*yaml.SafeLoader.yaml_implicit_resolvers.get(first, []), *resolvers]
    for first, resolvers in NoBase60Loader.yaml_implicit_resolvers.items()
}
_YAML11 = yaml.resolver.Resolver()


def dump_text(data: Any) -> str:
    """YAML text that `load_text`, PyYAML and OmegaConf all read back to `data` (key order kept)."""
    return yaml.dump(data, Dumper=_QuotingDumper, sort_keys=False, allow_unicode=True)


def check_tree(directory: Path) -> tuple[Path, int, str] | None:
    """The first base-60 scalar in a config tree's YAML files, if any."""
    for path in sorted(directory.rglob("*.yaml")):
        try:
            hits = base60_scalars(path.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError):
            continue  # unreadable or malformed files are reported by the loader itself
        if hits:
            return path, *hits[0]
    return None
