"""A native record as the learner sees it: the values at each place a definition can
constrain, read through the protocol's profile (no per-protocol code here).

A place (`Slot`) is a segment of the address (`topic_name[3]`, `properties.subject[0]`),
a whole scalar field (`qos`, `key`), a named entry (`headers.action`,
`user_properties.eventType`) or a section member (`application-properties.state`).
Per-delivery coordinates (Kafka partition and offset, JetStream sequence, MQTT correlation
data, AMQP message-id) are the profile's identity parts: they identify one message, never
a kind of message, so they are not places.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import NamedTuple

from gateway.json.values import JSON, as_text
from gateway.protocols import FieldRef, FieldSpec, ProtocolProfile, find_profile
from gateway.record import NativeMessage

#: Longer values are cut: they are kept for counting, and a value this long is an id or
#: a payload, never a constant worth splitting on.
MAX_VALUE_LENGTH = 200
#: Field types whose values are delivery parameters, never what tells messages apart.
_NOT_SPLITTABLE = frozenset({"integer", "boolean", "timestamp", "binary"})


class Slot(NamedTuple):
    """A place; a tuple, so that hashing and ordering it (per message) stay cheap."""

    field: str
    member: str = ""  # entry or section member name; "" for the field itself
    segment: int = -1  # segment of the address; -1 for the whole value
    # (no None in a slot: slots are sorted, and None does not compare with text)

    @property
    def path(self) -> str:
        text = f"{self.field}.{self.member}" if self.member else self.field
        return f"{text}[{self.segment}]" if self.is_segment else text

    @property
    def is_segment(self) -> bool:
        return self.segment >= 0


@dataclass(frozen=True)
class Observation:
    """One record, read: its shape, the value at each place, its body."""

    protocol: str
    segments: int  # address segments; 0 when the record has no address
    values: dict[Slot, tuple[str, JSON]]  # place -> (text, value as received)
    body: JSON  # the JSON body, or None
    has_json_body: bool
    content_type: str | None


def address_ref(protocol: str) -> tuple[FieldRef | None, str]:
    """The protocol's address place and the separator of its segments."""
    prof = find_profile(protocol)
    if prof is None or prof.address is None:
        return None, "/"
    spec = prof.definition_field(prof.address.field)
    return prof.address, "/" if spec is None else spec.separator


@dataclass(frozen=True)
class _Plan:
    """How to read one protocol's records, worked out once per protocol."""

    address: tuple[str, str | None] | None  # (field, member)
    fields: tuple[tuple[str, str, FieldSpec], ...]  # (field, record kind, definition spec)
    skipped: frozenset[tuple[str, str | None]]


_PLANS: dict[str, _Plan] = {}


def _plan(protocol: str) -> _Plan | None:
    plan = _PLANS.get(protocol)
    if plan is None:
        prof = find_profile(protocol)
        if prof is None:
            return None
        fields = tuple((name, kind, spec) for name, kind in prof.record_fields.items()
                       if (spec := prof.definition_field(name)) is not None)
        address = None if prof.address is None else (prof.address.field, prof.address.name)
        skipped = frozenset((ref.field, ref.name) for ref in _identity_refs(prof))
        plan = _PLANS[protocol] = _Plan(address, fields, skipped)
    return plan


def observe(record: NativeMessage) -> Observation:
    values: dict[Slot, tuple[str, JSON]] = {}
    segments = 0
    plan = _plan(record.protocol)
    if plan is not None:
        address, skipped = plan.address, plan.skipped
        for name, spec, member, raw in _entries(plan, record):
            ref = (name, member)
            if skipped and ref in skipped:
                continue
            text = as_text(raw)[:MAX_VALUE_LENGTH]
            if ref == address:
                parts = text.split(spec.separator)
                segments = len(parts)
                for index, part in enumerate(parts):
                    values[Slot(name, member or "", index)] = (part, part)
                continue
            values[Slot(name, member or "")] = (text, raw)
    return Observation(record.protocol, segments, values,
                       record.data if record.has_json_data else None,
                       record.has_json_data, record.content_type)


def splittable(protocol: str, slot: Slot) -> bool:
    """Whether values at `slot` can tell kinds of messages apart: address segments and
    text places can; delivery parameters (integers, booleans, times) cannot."""
    prof = find_profile(protocol)
    spec = None if prof is None else prof.definition_field(slot.field)
    if spec is None or slot.is_segment:
        return True
    return _value_type(spec, slot.member or None) not in _NOT_SPLITTABLE


def _value_type(spec: FieldSpec, member: str | None) -> str:
    if spec.kind == "section" and member is not None:
        return spec.member_type(member) or "any"
    return spec.type


def _identity_refs(prof: ProtocolProfile) -> set[FieldRef]:
    if prof.identity is None:
        return set()
    return {part.ref for part in prof.identity.parts if part.ref != prof.address}


def _entries(plan: _Plan, record: NativeMessage
             ) -> list[tuple[str, FieldSpec, str | None, JSON]]:
    """(field, its definition spec, entry/member name or None, value) of every place the
    record fills; fields a definition cannot constrain are skipped."""
    out: list[tuple[str, FieldSpec, str | None, JSON]] = []
    present = record.fields
    for name, kind, spec in plan.fields:
        raw = present.get(name)
        if raw is None:
            continue
        if kind == "pairs" and isinstance(raw, list):
            seen: set[str] = set()
            for entry in raw:
                if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
                    continue
                key = str(entry["name"])
                if spec.case_insensitive_names:
                    key = key.lower()
                if key not in seen:  # the first entry of a name is the one matched
                    seen.add(key)
                    out.append((name, spec, key, entry.get("value")))
        elif kind in ("object", "strmap") and isinstance(raw, dict):
            out.extend((name, spec, member, value) for member, value in raw.items())
        elif kind not in ("pairs", "object", "strmap"):
            out.append((name, spec, None, raw))
    return out


def body_fields(body: JSON, cap: int = 256) -> dict[str, list[str]]:
    """Text of each scalar of a JSON object body (top level and one level down) -> the
    field paths that carry it: what a placeholder can be named after."""
    out: dict[str, list[str]] = {}
    if not isinstance(body, dict):
        return out
    count = 0
    for key, value in body.items():
        items = [(key, value)]
        if isinstance(value, dict):
            items = [(f"{key}.{inner}", v) for inner, v in value.items()]
        for path, scalar in items:
            if count >= cap:
                return out
            if isinstance(scalar, (str, int, float)) and not isinstance(scalar, bool):
                out.setdefault(as_text(scalar), []).append(path)
                count += 1
    return out


_WORD_SEPARATORS = re.compile(r"([^A-Za-z0-9]+)")
#: Pieces a composed value is tried in (`a-b-c-d`); longer values are not decomposed.
_MAX_PIECES = 8
#: Between the parts of a composition key (field paths and literals never contain it).
PART_SEPARATOR = "\x1f"


def composition(text: str, carried: dict[str, list[str]]) -> str | None:
    """How `text` is made of payload field values joined by literals (`north-east` with
    `"a": "north", "b": "east"` -> `Fa<US>L-<US>Fb`, parts F(ield)/L(iteral) joined by
    `PART_SEPARATOR`); None unless it takes two fields or more. A field value may itself
    contain separators (`dev-0012`): pieces of several words are tried too."""
    tokens = _WORD_SEPARATORS.split(text)
    words, separators = tokens[0::2], tokens[1::2]
    if not 2 <= len(words) <= _MAX_PIECES:
        return None
    found: dict[int, list[str]] = {0: []}
    for start in range(len(words)):
        if start not in found:
            continue
        for end in range(start + 1, len(words) + 1):
            if end in found:
                continue
            piece = "".join(w + (separators[k] if k < end - 1 else "")
                            for k, w in enumerate(words[start:end], start))
            fields = carried.get(piece)
            if fields:
                glue = ["L" + separators[start - 1]] if start else []
                found[end] = [*found[start], *glue, "F" + fields[0]]
    parts = found.get(len(words))
    if parts is None or sum(part[0] == "F" for part in parts) < 2:
        return None
    return PART_SEPARATOR.join(parts)
