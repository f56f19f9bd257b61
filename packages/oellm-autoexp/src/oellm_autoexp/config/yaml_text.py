"""YAML reading without YAML 1.1's base-60 numbers.

PyYAML (and OmegaConf, which builds on it) read an unquoted ``time: 10:00:00`` as the integer
36000 and ``1:30`` as 90: a wall-clock limit silently becomes ``--time=36000`` (minutes). Our own
reads (plain config files, override values) use `SafeLoader` minus the base-60 resolvers, so
such values stay strings. Hydra composes files with OmegaConf's loader, so `base60_scalars` finds
the unquoted ones in a config tree to report them before they are misread.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import yaml

from oellm_autoexp.errors import ConfigError
from oellm_autoexp.limits import limit, limit_hint
from oellm_autoexp.safe_paths import read_regular_text
from toolkit_core.yaml_safe import ExpansionLimitError, check_expanded_size

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


class YamlLimitError(yaml.MarkedYAMLError):
    """A YAML document beyond a resource limit or holding a value no config can use."""


_SURROGATE = re.compile("[\ud800-\udfff]")


class NoBase60Loader(yaml.SafeLoader):
    """SafeLoader that reads scalars the way OmegaConf does, except that base-60 values stay
    strings; a key repeated in one mapping is an error (YAML would keep the last silently).

    Hostile documents are refused with a line and column instead of hanging or crashing the
    reader: nesting deeper than MAX_YAML_DEPTH, more than MAX_YAML_NODES nodes once aliases are
    expanded (a 1 KB "billion laughs" file expands to 10^9 nodes in OmegaConf), recursive
    aliases, integers Python will not parse (over 4,300 digits), finite numbers that overflow a
    float, and lone surrogates (no file, argv or log can carry them).
    """

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._depth += 1
        try:
            if self._depth > limit("MAX_YAML_DEPTH"):
                raise YamlLimitError(
                    None,
                    None,
                    f"nested too deeply ({limit_hint('MAX_YAML_DEPTH')})",
                    self.peek_event().start_mark,  # type: ignore[no-untyped-call]
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def get_single_node(self) -> Any:
        node = super().get_single_node()
        if node is not None:
            _check_expanded_size(node)
        return node

    def construct_scalar(self, node: Any) -> Any:
        value = super().construct_scalar(node)
        if isinstance(value, str) and _SURROGATE.search(value):
            raise YamlLimitError(
                None, None, "string holds a lone surrogate (not valid text)", node.start_mark
            )
        return value

    def construct_yaml_int(self, node: Any) -> Any:
        try:
            return super().construct_yaml_int(node)
        except ValueError:
            raise YamlLimitError(
                None,
                None,
                f"integer of {len(node.value):,} characters is too long",
                node.start_mark,
            ) from None

    def construct_yaml_float(self, node: Any) -> Any:
        value = super().construct_yaml_float(node)
        if math.isinf(value) and "inf" not in str(node.value).lower():
            raise YamlLimitError(
                None,
                None,
                f"number {_short(node.value)} overflows a float (write .inf if you mean it)",
                node.start_mark,
            )
        return value

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


NoBase60Loader.add_constructor(_INT_TAG, NoBase60Loader.construct_yaml_int)
NoBase60Loader.add_constructor(_FLOAT_TAG, NoBase60Loader.construct_yaml_float)


def _short(text: str, keep: int = 40) -> str:
    return text if len(text) <= keep else f"{text[:keep]}... ({len(text):,} characters)"


def _check_expanded_size(root: yaml.Node) -> None:
    """`toolkit_core.yaml_safe.check_expanded_size` with this package's limits and wording."""
    try:
        check_expanded_size(
            root, max_nodes=limit("MAX_YAML_NODES"), max_depth=limit("MAX_YAML_DEPTH")
        )
    except ExpansionLimitError as exc:
        problem = {
            "recursive": "recursive alias",
            "depth": "nested too deeply once aliases are expanded "
            f"({limit_hint('MAX_YAML_DEPTH')})",
            "nodes": "more YAML nodes once aliases are expanded than the "
            + limit_hint("MAX_YAML_NODES"),
        }[exc.what]
        raise YamlLimitError(None, None, problem, exc.node.start_mark) from None


NoBase60Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag not in (_INT_TAG, _FLOAT_TAG, _TIMESTAMP_TAG)]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
NoBase60Loader.add_implicit_resolver(_INT_TAG, _INT, list("-+0123456789"))
NoBase60Loader.add_implicit_resolver(_FLOAT_TAG, _FLOAT, list("-+0123456789."))


def load_text(text: str) -> Any:
    """Parse YAML text (safe, no base-60 numbers, bounded). Raises yaml.YAMLError."""
    try:
        return yaml.load(text, Loader=NoBase60Loader)  # a SafeLoader subclass: no object tags
    except RecursionError:  # flow-style nesting recurses in PyYAML's parser before our check
        raise YamlLimitError(
            None, None, f"nested too deeply ({limit_hint('MAX_YAML_DEPTH')})", None
        ) from None


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


def read_config_text(path: Path) -> str:
    """The text of one config file: a regular file (or a link to one), UTF-8, size-limited.

    A FIFO, a device such as /dev/zero or a directory is refused instead of hanging or filling
    memory (`safe_paths.read_regular_text`).
    """
    return read_regular_text(
        path, max_bytes=limit("MAX_CONFIG_BYTES"), limit_name="MAX_CONFIG_BYTES"
    )


def read_yaml(path: Path) -> Any:
    """Read one YAML file; a syntax error is one line naming file, line and column."""
    text = read_config_text(path)
    try:
        return load_text(text)
    except yaml.YAMLError as exc:
        raise yaml_error(exc, path) from None


def yaml_error(exc: yaml.YAMLError, path: Path | str) -> ConfigError:
    """One line naming file, line and column for a YAML error."""
    if not isinstance(exc, yaml.MarkedYAMLError):
        return ConfigError(f"malformed YAML: {exc}", file=path)
    mark = exc.problem_mark or exc.context_mark
    where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
    detail = exc.problem or exc.context or "syntax error"
    start = exc.context_mark
    if exc.problem and exc.context and start is not None and start is not mark:
        # e.g. an unclosed quote: the problem is found at the end, the cause is where it began
        detail += f" ({exc.context} started at line {start.line + 1})"
    prefix = "" if isinstance(exc, YamlLimitError) else "malformed YAML: "
    return ConfigError(f"{prefix}{detail}", file=where)
