"""Bounded counts of what was seen, one `ShapeTally` per address shape (protocol and
number of address segments).

Memory stays bounded whatever the input, including a million distinct topics:
- at most `shape_cap` shapes; messages of further shapes are counted, not learned;
- at most `slot_cap` places per shape; further places are ignored (counted);
- per place, at most `value_cap` distinct values are kept; past that the place is
  *saturated* (it will be a placeholder) and only its message count grows;
- per shape, at most `vector_cap` distinct value combinations (one per message kind
  and placeholder values); past that, the place with the most distinct values is folded
  into "*" in every combination (it will be a placeholder), which merges combinations,
  until the count is back under the cap;
- per combination, `samples_per_vector` bodies for the schema.
So one shape costs O(slot_cap x value_cap + vector_cap x samples_per_vector).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from gateway.json.values import JSON
from gateway.learn.model import LearnOptions
from gateway.learn.slots import Observation, Slot, body_fields, composition, splittable

#: The folded value of a saturated place in a combination.
MANY = "\x00*"
#: Payload fields tracked per place as candidates for naming its placeholder.
_FIELD_CANDIDATES = 32

Vector = tuple[tuple[Slot, str | None], ...]


@dataclass
class SlotTally:
    present: int = 0
    values: dict[str, tuple[int, JSON]] = field(default_factory=dict)  # text -> count, raw
    saturated: bool = False
    splittable: bool = True
    # payload field path -> messages whose body carried the same value there
    same_as: Counter[str] = field(default_factory=Counter)
    # composition of payload field values (`slots.composition`) -> messages
    composed: Counter[str] = field(default_factory=Counter)


@dataclass
class VectorTally:
    count: int = 0
    bodies: list[JSON] = field(default_factory=list)
    content_types: Counter[str] = field(default_factory=Counter)
    non_json: int = 0


@dataclass
class ShapeTally:
    protocol: str
    segments: int
    count: int = 0
    slots: dict[Slot, SlotTally] = field(default_factory=dict)
    vectors: dict[Vector, VectorTally] = field(default_factory=dict)
    folded: set[Slot] = field(default_factory=set)
    order: list[Slot] = field(default_factory=list)  # the places, sorted
    overflow_slots: int = 0
    compactions: int = 0

    def add(self, seen: Observation, options: LearnOptions) -> None:
        self.count += 1
        carried = body_fields(seen.body) if seen.has_json_body else {}
        for slot, (text, raw) in seen.values.items():
            tally = self.slots.get(slot)
            if tally is None:
                if len(self.slots) >= options.slot_cap:
                    self.overflow_slots += 1
                    continue
                tally = self.slots[slot] = SlotTally(splittable=splittable(self.protocol, slot))
                self.order = sorted(self.slots)
            tally.present += 1
            if not tally.saturated:
                known = tally.values.get(text)
                tally.values[text] = (1, raw) if known is None else (known[0] + 1, known[1])
                if len(tally.values) > options.value_cap:
                    tally.saturated = True
                    tally.values.clear()
            if not carried:
                continue
            paths = carried.get(text)
            if paths is None:
                made = composition(text, carried)
                if made is not None and (made in tally.composed
                                         or len(tally.composed) < _FIELD_CANDIDATES):
                    tally.composed[made] += 1
                continue
            for path in paths:
                if path in tally.same_as or len(tally.same_as) < _FIELD_CANDIDATES:
                    tally.same_as[path] += 1
        key = self._vector(seen)
        vector = self.vectors.get(key)
        if vector is None:
            vector = self.vectors[key] = VectorTally()
        vector.count += 1
        if seen.has_json_body:
            if len(vector.bodies) < options.samples_per_vector:
                vector.bodies.append(seen.body)
        elif seen.values or seen.content_type is not None:
            vector.non_json += 1
        if seen.content_type is not None:
            vector.content_types[seen.content_type[:100]] += 1
        if len(self.vectors) > options.vector_cap:
            self._compact(options)

    def _vector(self, seen: Observation) -> Vector:
        items: list[tuple[Slot, str | None]] = []
        values, slots, folded = seen.values, self.slots, self.folded
        for slot in self.order:
            value = values.get(slot)
            if value is None:
                items.append((slot, None))
            elif slots[slot].saturated or slot in folded:
                items.append((slot, MANY))
            else:
                items.append((slot, value[0]))
        return tuple(items)

    def _compact(self, options: LearnOptions) -> None:
        """Fold the place with the most distinct values until the combinations fit."""
        while len(self.vectors) > options.vector_cap // 2:
            open_slots = [s for s in self.slots if s not in self.folded]
            if not open_slots:
                break
            widest = max(open_slots, key=lambda s: (self.slots[s].saturated,
                                                     len(self.slots[s].values)))
            self.folded.add(widest)
            self.compactions += 1
            merged: dict[Vector, VectorTally] = {}
            for key, tally in self.vectors.items():
                new_key = tuple((s, MANY if s == widest and t is not None else t)
                                for s, t in key)
                into = merged.get(new_key)
                if into is None:
                    merged[new_key] = tally
                    continue
                into.count += tally.count
                into.non_json += tally.non_json
                into.content_types.update(tally.content_types)
                room = options.samples_per_vector - len(into.bodies)
                into.bodies.extend(tally.bodies[:max(room, 0)])
            self.vectors = merged

    def normalised_vectors(self) -> list[tuple[dict[Slot, str | None], VectorTally]]:
        """The combinations with every place of the shape (absent ones None); places
        first seen after a combination was recorded are absent in it."""
        out: list[tuple[dict[Slot, str | None], VectorTally]] = []
        for key, tally in self.vectors.items():
            values: dict[Slot, str | None] = dict.fromkeys(self.slots)
            for slot, text in key:
                if slot in self.slots:
                    saturated = self.slots[slot].saturated or slot in self.folded
                    values[slot] = MANY if saturated and text is not None else text
            out.append((values, tally))
        return out


@dataclass
class Tallies:
    options: LearnOptions
    shapes: dict[tuple[str, int], ShapeTally] = field(default_factory=dict)
    overflow_messages: int = 0

    def add(self, seen: Observation) -> None:
        key = (seen.protocol, seen.segments)
        shape = self.shapes.get(key)
        if shape is None:
            if len(self.shapes) >= self.options.shape_cap:
                self.overflow_messages += 1
                return
            shape = self.shapes[key] = ShapeTally(seen.protocol, seen.segments)
        shape.add(seen, self.options)
