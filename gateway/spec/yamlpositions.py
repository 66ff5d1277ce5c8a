"""Where each JSON path of a composed YAML document is: line and column.

One walk for the config (`gateway/config/_yaml.py`) and the definitions documents
(`gateway/definitions/positions.py`). A mapping member is placed at its key (an unknown or
misspelt key is what is wrong; a nested block starts only on the next line), a list item
at the item. A repeated key keeps the position of its first occurrence, and is reported
to `repeated` at the repeat.
"""

from __future__ import annotations

from collections.abc import Callable

import yaml

from gateway.spec.problems import Position, json_path

Parts = tuple[str | int, ...]
#: Called for a key that appears twice in one mapping: the mapping's path, the key and
#: where the repeat is.
Repeated = Callable[[Parts, str, yaml.Mark], None]


class TooManyNodes(Exception):
    """The tree has more nodes than the limit (aliases can expand a few lines into
    billions of values); `positions` holds those found before the walk stopped."""

    def __init__(self, positions: dict[str, Position]) -> None:
        super().__init__(f"more than {len(positions)} nodes")
        self.positions = positions


def node_positions(node: yaml.Node, limit: int,
                   repeated: Repeated | None = None) -> dict[str, Position]:
    """The position of every path under `node`; raises TooManyNodes past `limit` nodes."""
    positions: dict[str, Position] = {}
    # Depth first in document order: children are pushed last-first.
    pending: list[tuple[yaml.Node, Parts, yaml.Mark]] = [(node, (), node.start_mark)]
    visited = 0
    while pending:
        current, parts, mark = pending.pop()
        visited += 1
        if visited > limit:
            raise TooManyNodes(positions)
        positions.setdefault(json_path(*parts), (mark.line + 1, mark.column + 1))
        if isinstance(current, yaml.MappingNode):
            members: list[tuple[yaml.Node, Parts, yaml.Mark]] = []
            seen: set[str] = set()
            for key_node, value_node in current.value:
                if not isinstance(key_node, yaml.ScalarNode):
                    continue
                key = str(key_node.value)
                if key in seen and repeated is not None:
                    repeated(parts, key, key_node.start_mark)
                seen.add(key)
                members.append((value_node, (*parts, key), key_node.start_mark))
            pending.extend(reversed(members))
        elif isinstance(current, yaml.SequenceNode):
            pending.extend(reversed([(item, (*parts, i), item.start_mark)
                                     for i, item in enumerate(current.value)]))
    return positions
