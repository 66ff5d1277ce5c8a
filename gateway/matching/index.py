"""Candidate lookup whose cost does not grow with the number of definitions.

Definitions are bucketed by protocol family, then by their address template (MQTT topic,
Kafka topic, NATS subject, HTTP path, AMQP subject): constant addresses in a dict,
`/`-segmented templates in a trie keyed by literal segments, other templates by their
literal prefix. CloudEvents-only definitions are keyed by a constant `type`. Only the few
candidates found this way run their regexes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from gateway.matching.compiled import Check, CompiledDefinition
from gateway.templates import Template

WILD = "\0"  # trie key for a segment holding a placeholder


@dataclass
class _Node:
    children: dict[str, _Node] = field(default_factory=dict)
    defs: list[CompiledDefinition] = field(default_factory=list)


@dataclass
class KeyIndex:
    """Index of definitions on one string key (an address or a CloudEvents type)."""

    exact: dict[str, list[CompiledDefinition]] = field(default_factory=dict)
    trie: _Node = field(default_factory=_Node)
    has_trie: bool = False
    # literal prefix length -> prefix -> definitions
    prefixes: dict[int, dict[str, list[CompiledDefinition]]] = field(default_factory=dict)
    rest: list[CompiledDefinition] = field(default_factory=list)

    def add(self, compiled: CompiledDefinition, key_check: Check | None) -> None:
        if key_check is None or (key_check.template is None and not key_check.has_constant):
            self.rest.append(compiled)
        elif key_check.template is None:
            text = key_check.constant if isinstance(key_check.constant, str) else None
            if text is None:
                self.rest.append(compiled)
            else:
                self.exact.setdefault(text, []).append(compiled)
        elif key_check.template.segmented:
            self._add_trie(key_check.template, compiled)
        else:
            prefix = key_check.template.literal_prefix
            if not prefix:
                self.rest.append(compiled)
            else:
                bucket = self.prefixes.setdefault(len(prefix), {})
                bucket.setdefault(prefix, []).append(compiled)

    def _add_trie(self, template: Template, compiled: CompiledDefinition) -> None:
        # A placeholder never spans '/', so the segment count of a match is fixed.
        marker = template.expand({n: WILD for n in template.names})
        node = self.trie
        for segment in marker.split("/"):
            key = WILD if WILD in segment else segment
            node = node.children.setdefault(key, _Node())
        node.defs.append(compiled)
        self.has_trie = True

    def lookup(self, key: str | None) -> list[CompiledDefinition]:
        if key is None:
            return self.rest
        out: list[CompiledDefinition] = []
        hit = self.exact.get(key)
        if hit:
            out.extend(hit)
        if self.has_trie:
            _walk(self.trie, key.split("/"), 0, out)
        for length, bucket in self.prefixes.items():
            found = bucket.get(key[:length])
            if found:
                out.extend(found)
        if self.rest:
            out.extend(self.rest)
        return out

    def all(self) -> Iterable[CompiledDefinition]:
        for defs in self.exact.values():
            yield from defs
        yield from _all_trie(self.trie)
        for bucket in self.prefixes.values():
            for defs in bucket.values():
                yield from defs
        yield from self.rest


def _walk(node: _Node, segments: list[str], depth: int, out: list[CompiledDefinition]) -> None:
    if depth == len(segments):
        out.extend(node.defs)
        return
    segment = segments[depth]
    child = node.children.get(segment)
    if child is not None:
        _walk(child, segments, depth + 1, out)
    if segment:
        wild = node.children.get(WILD)
        if wild is not None:
            _walk(wild, segments, depth + 1, out)


def _all_trie(node: _Node) -> Iterable[CompiledDefinition]:
    yield from node.defs
    for child in node.children.values():
        yield from _all_trie(child)
