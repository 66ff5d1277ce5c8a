"""Candidate lookup whose cost does not grow with the number of definitions.

Definitions are bucketed by protocol family, then by their address template (MQTT topic,
Kafka topic, NATS subject, HTTP path, AMQP subject): constant addresses in a dict,
`/`-segmented templates by their *shape* (segment count and which segments are literal)
and then by the tuple of literal segments, other templates by their literal prefix. A
lookup costs one dict probe per distinct shape, whatever the number of definitions.
CloudEvents-only definitions are keyed by a constant `type`. Only the few
candidates found this way run their regexes.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from operator import itemgetter

from gateway.matching.compiled import Check, CompiledDefinition
from gateway.matching.narrow import Narrowed, narrowed
from gateway.record import NativeMessage
from gateway.templates.template import Template

WILD = "\0"  # trie key for a segment holding a placeholder
_NONE: list[CompiledDefinition] = []  # what a lookup finds when nothing fits (never changed)


def _narrow(bucket: list[CompiledDefinition], record: NativeMessage | None
            ) -> list[CompiledDefinition]:
    if record is not None and isinstance(bucket, Narrowed):
        return bucket.narrow(record)
    return bucket


@dataclass
class _Shape:
    """Segmented templates with the same segment count and the same literal positions."""

    literal_positions: tuple[int, ...]
    key_of: Callable[[list[str]], object]
    buckets: dict[object, list[CompiledDefinition]] = field(default_factory=dict)


def _shape_key(positions: tuple[int, ...]) -> Callable[[list[str]], object]:
    if not positions:
        return lambda segments: ()
    getter = itemgetter(*positions)
    return getter


@dataclass
class KeyIndex:
    """Index of definitions on one string key (an address or a CloudEvents type)."""

    exact: dict[str, list[CompiledDefinition]] = field(default_factory=dict)
    # segment count -> shapes of that length
    shapes: dict[int, list[_Shape]] = field(default_factory=dict)
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
        # Interned: thousands of keys share their literal segments ("plant", ""), so a
        # lookup compares against a few hot strings instead of one copy per definition.
        segments = [sys.intern(segment) for segment in marker.split("/")]
        positions = tuple(i for i, seg in enumerate(segments) if WILD not in seg)
        shapes = self.shapes.setdefault(len(segments), [])
        shape = next((s for s in shapes if s.literal_positions == positions), None)
        if shape is None:
            shape = _Shape(positions, _shape_key(positions))
            shapes.append(shape)
        key = shape.key_of(segments)
        shape.buckets.setdefault(key, []).append(compiled)

    def narrow_large_buckets(self) -> None:
        """Split every large bucket once more (`matching.narrow`); call when all the
        definitions are added."""
        self.exact = {key: narrowed(bucket) for key, bucket in self.exact.items()}
        for shapes in self.shapes.values():
            for shape in shapes:
                shape.buckets = {key: narrowed(b) for key, b in shape.buckets.items()}
        self.prefixes = {length: {prefix: narrowed(b) for prefix, b in by_prefix.items()}
                         for length, by_prefix in self.prefixes.items()}
        self.rest = narrowed(self.rest)

    def lookup(self, key: str | None, record: NativeMessage | None = None
               ) -> list[CompiledDefinition]:
        """The candidates for `key`; with the record, large buckets narrowed by it."""
        if key is None:
            return _narrow(self.rest, record)
        return self.lookup_split(key, key.split("/") if self.shapes else None, record)

    def lookup_split(self, key: str, segments: list[str] | None,
                     record: NativeMessage | None = None) -> list[CompiledDefinition]:
        """`lookup(key, record)` with the key already split on `/` (None when no
        segmented template is indexed: then nothing needs the segments). The list may be
        one of the index's own: read it, do not change it."""
        # (`bucket.__class__ is Narrowed`: the test of `_narrow`, inline on this path.)
        found = self.exact.get(key) or _NONE
        if found.__class__ is Narrowed and record is not None:
            found = found.narrow(record)
        if segments is not None:
            shapes = self.shapes.get(len(segments))
            if shapes:
                for shape in shapes:
                    bucket = shape.buckets.get(shape.key_of(segments))
                    if bucket:
                        if bucket.__class__ is Narrowed and record is not None:
                            bucket = bucket.narrow(record)
                        found = found + bucket if found else bucket
        if self.prefixes:
            for length, by_prefix in self.prefixes.items():
                bucket = by_prefix.get(key[:length])
                if bucket:
                    bucket = _narrow(bucket, record)
                    found = found + bucket if found else bucket
        if self.rest:
            rest = _narrow(self.rest, record)
            found = found + rest if found else rest
        return found

    def all(self) -> Iterable[CompiledDefinition]:
        for defs in self.exact.values():
            yield from defs
        for shapes in self.shapes.values():
            for shape in shapes:
                for defs in shape.buckets.values():
                    yield from defs
        for bucket in self.prefixes.values():
            for defs in bucket.values():
                yield from defs
        yield from self.rest
