"""The size of a YAML document once its aliases are expanded, checked before it is constructed.

Aliases share nodes, so a 1 KB file can stand for 10^9 values ("billion laughs") or nest a node
inside itself many levels deep; whatever walks the constructed data (validation, OmegaConf,
repr) pays for the expansion. Both YAML loaders of the tools (aorta's recipes, oellm-autoexp's
configs) run this check on the composed node graph: memoised per node, so it is linear in the
file however large the expansion, and it follows aliases (the document's own indentation is
not the nesting that later code recurses through). Each loader words the refusal itself.
"""

from __future__ import annotations

from typing import Literal

import yaml

__all__ = ["ExpansionLimitError", "check_expanded_size"]

Exceeded = Literal["recursive", "depth", "nodes"]


class ExpansionLimitError(Exception):
    """The document is beyond a limit: `what` says which, `node` where (its `start_mark`)."""

    def __init__(self, what: Exceeded, node: yaml.Node) -> None:
        self.what = what
        self.node = node
        super().__init__(what)


def check_expanded_size(root: yaml.Node, *, max_nodes: int, max_depth: int) -> None:
    """Refuse `root` if, with every alias copied out, it has more than `max_nodes` nodes or more
    than `max_depth` levels (the root is level 1), or an alias that contains itself."""
    known: dict[int, tuple[int, int]] = {}  # id -> (expanded size, expanded height)
    in_progress: set[int] = set()

    def walk(node: yaml.Node, level: int) -> tuple[int, int]:
        if id(node) in in_progress:
            raise ExpansionLimitError("recursive", node)
        size, height = known.get(id(node)) or measure(node, level)
        if level + height > max_depth:
            raise ExpansionLimitError("depth", node)
        return size, height

    def measure(node: yaml.Node, level: int) -> tuple[int, int]:
        in_progress.add(id(node))
        children: list[yaml.Node] = []
        if isinstance(node, yaml.MappingNode):
            children = [part for pair in node.value for part in pair]
        elif isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        size, height = 1, 0
        for child in children:
            if level + 1 > max_depth:  # before recursing: Python's own stack has a limit too
                raise ExpansionLimitError("depth", child)
            child_size, child_height = walk(child, level + 1)
            size += child_size
            height = max(height, child_height + 1)
            if size > max_nodes:
                raise ExpansionLimitError("nodes", node)
        in_progress.discard(id(node))
        known[id(node)] = (size, height)
        return size, height

    walk(root, 1)
