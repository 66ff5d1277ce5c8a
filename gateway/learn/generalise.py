"""From the tallies of one address shape to proposed definitions: which places are
constants, which split the messages into several definitions, which become
placeholders and which are left out.

At each node (a set of value combinations) every place is judged:
- one value in every message: a constant;
- `--merge PATH`: a placeholder; `--split-on PATH`: a split;
- the same value as a payload field in (nearly) every message: a placeholder named after
  that field (`/store/12/...` with `"storeid": "12"` -> `{storeid}`);
- a delivery parameter (qos, retain, priority ...) that varies: left out, never a split;
- saturated, more than `max_constant_values` values, or only id-like values (digits,
  UUIDs, hex): a placeholder - this is what keeps one device from becoming one definition;
- otherwise (a few word-like values, such as `turnedon`/`turnedoff`, an `action` header):
  a split candidate. The node splits on the candidate with the fewest values and each
  part is judged again, so a place that only varies inside one kind of message is judged
  among the messages of that kind.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from gateway.json.values import JSON
from gateway.learn.model import LearnOptions, PlaceholderInfo, Proposal
from gateway.learn.slots import Slot
from gateway.learn.tally import MANY, ShapeTally, SlotTally, VectorTally

#: Share of a place's messages whose body must carry its value for the placeholder to be
#: named after that field.
NAMING_SHARE = 0.9
_ID_LIKE = re.compile(
    r"^(?:[0-9][0-9._:-]*|[0-9a-fA-F]{8,}|[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}"
    r"|.*[0-9].*)$")

Row = tuple[dict[Slot, str | None], VectorTally]


@dataclass
class Judgement:
    kind: str  # constant | split | placeholder | leave-out | absent
    named_after: str | None = None
    composed: str | None = None  # payload fields joined by literals (`slots.composition`)


def is_id_like(value: str) -> bool:
    """Values that name one thing rather than a kind of thing: anything with a digit (ids,
    serial numbers, dates), long hex runs, UUIDs."""
    return bool(_ID_LIKE.match(value))


def propose(shape: ShapeTally, options: LearnOptions) -> list[Proposal]:
    rows = shape.normalised_vectors()
    out: list[Proposal] = []
    _split(shape, rows, options, out)
    return out


def _split(shape: ShapeTally, rows: list[Row], options: LearnOptions,
           out: list[Proposal]) -> None:
    judgements: dict[Slot, Judgement] = {}
    candidates: list[tuple[int, Slot]] = []
    for slot in sorted(shape.slots):
        values: Counter[str | None] = Counter()
        for values_of, tally in rows:
            values[values_of.get(slot)] += tally.count
        judgement = _judge(slot, shape.slots[slot], values, options)
        judgements[slot] = judgement
        if judgement.kind == "split":
            candidates.append((len(values), slot))
    if candidates:
        _, slot = min(candidates, key=lambda c: (c[0], not c[1].is_segment, c[1]))
        parts: dict[str | None, list[Row]] = {}
        for row in rows:
            parts.setdefault(row[0].get(slot), []).append(row)
        for _, part in sorted(parts.items(), key=lambda p: (p[0] is None, p[0] or "")):
            _split(shape, part, options, out)
        return
    out.append(_proposal(shape, rows, judgements, options))


def _judge(slot: Slot, tally: SlotTally, values: Counter[str | None],
           options: LearnOptions) -> Judgement:
    present = sum(n for v, n in values.items() if v is not None)
    texts = [v for v in values if v is not None]
    if not texts:
        return Judgement("absent")
    named = _named_after(tally)
    if len(values) == 1 and MANY not in values:
        return Judgement("constant", named)
    if slot.path in options.merge:
        return Judgement("placeholder", named)
    if slot.path in options.split_on and MANY not in values:
        return Judgement("split")
    if not tally.splittable:
        return Judgement("leave-out")
    if named is not None and present == sum(values.values()):
        return Judgement("placeholder", named)
    composed = _share_leader(tally.composed, tally.present)
    if composed is not None and present == sum(values.values()):
        return Judgement("placeholder", composed=composed)
    if (MANY in values or len(texts) > options.max_constant_values
            or all(is_id_like(t) for t in texts)):
        return Judgement("placeholder", named)
    return Judgement("split")


def _named_after(tally: SlotTally) -> str | None:
    return _share_leader(tally.same_as, tally.present)


def _share_leader(counts: Counter[str], present: int) -> str | None:
    """The most frequent key when it covers `NAMING_SHARE` of the place's messages."""
    if not counts:
        return None
    key, hits = counts.most_common(1)[0]
    return key if hits >= NAMING_SHARE * present else None


def _proposal(shape: ShapeTally, rows: list[Row], judgements: dict[Slot, Judgement],
              options: LearnOptions) -> Proposal:
    constants: dict[Slot, JSON] = {}
    placeholders: dict[Slot, PlaceholderInfo] = {}
    left_out: list[Slot] = []
    # address segments first, in order: the summary and the names follow the address
    for slot, judgement in sorted(judgements.items(), key=lambda j: (not j[0].is_segment, j[0])):
        seen = [v for values, _ in rows if (v := values.get(slot)) is not None]
        if judgement.kind == "constant" and len(seen) == len(rows):
            # (a constant must hold in every message of the definition)
            constants[slot] = shape.slots[slot].values.get(seen[0], (0, seen[0]))[1]
        elif judgement.kind in ("placeholder", "constant") and seen:
            distinct = set(seen)
            saturated = MANY in distinct or shape.slots[slot].saturated
            # past the cap only a lower bound is known: the cap
            cardinality = options.value_cap if saturated else len(distinct)
            if judgement.kind == "constant" and not slot.is_segment:
                left_out.append(slot)  # absent from some messages: no constraint
            else:
                placeholders[slot] = PlaceholderInfo(slot.path, judgement.named_after,
                                                     cardinality, saturated,
                                                     composed=judgement.composed)
        elif judgement.kind == "leave-out":
            left_out.append(slot)
    content_types: Counter[str] = Counter()
    for _, tally in rows:
        content_types.update(tally.content_types)
    return Proposal(
        protocol=shape.protocol, count=sum(t.count for _, t in rows), constants=constants,
        placeholders=placeholders, left_out=left_out,
        bodies=[b for _, t in rows for b in t.bodies], content_types=dict(content_types),
        non_json=sum(t.non_json for _, t in rows))
