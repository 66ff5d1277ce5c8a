"""Where things sit in a record of a protocol, from its profile: how a definition field is
read (and written), and how metadata and the content type are added to record fields.

Reading metadata and the content type is `NativeMessage.metadata` / `.content_type`
(`gateway/record.py`); these functions work on plain field dicts, before a record exists.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from gateway.json.values import JSON
from gateway.protocols.profile import Metadata, ProtocolProfile
from gateway.protocols.table import find_profile

AccessKind = Literal["scalar", "section", "pairs"]


@dataclass(frozen=True)
class FieldAccess:
    """How one definition constraint sits in a record.

    scalar  - the field's value (`topic_name`, `path`);
    section - member `name` of an object field (AMQP sections, HTTP `query`);
    pairs   - the entries named `name` of a {name, value} list (headers, user
              properties; Kafka definitions spell headers as a map, the record as pairs).
    """

    kind: AccessKind
    field: str
    name: str | None = None
    case_insensitive: bool = False  # pairs: names compared ignoring case (HTTP headers)
    percent_encoded: bool = False  # the value arrives percent-encoded (HTTP path, query)


def field_access(protocol: str | None, field: str, name: str | None) -> FieldAccess:
    """How a constraint on `field` (entry `name`) of a `protocol` definition reads a
    record. A named entry of a field the protocol does not define is a section member."""
    prof = find_profile(protocol)
    encoded = prof is not None and field in prof.percent_encoded
    if name is None:
        return FieldAccess("scalar", field, percent_encoded=encoded)
    if prof is not None and prof.record_fields.get(field) == "pairs":
        spec = prof.definition_field(field)
        return FieldAccess("pairs", field, name,
                           case_insensitive=spec is not None and spec.case_insensitive_names)
    return FieldAccess("section", field, name, percent_encoded=encoded)


def percent_decoded(protocol: str | None, field: str) -> bool:
    """Whether a field's values are percent-encoded on the wire (HTTP path and query:
    `ProtocolProfile.percent_encoded`). Their templates match the raw text, split on `/`
    first, and each captured value is then decoded: the inverse of RFC 6570 expansion,
    which encodes `a/b` as `a%2Fb`."""
    prof = find_profile(protocol)
    return prof is not None and field in prof.percent_encoded


def token_separator(protocol: str | None, field: str) -> str:
    """What one placeholder of a template on this field never spans (`FieldSpec.separator`:
    `.` in a NATS subject, a token, as the `*` wildcard of the derived subscription),
    else `/`."""
    prof = find_profile(protocol)
    spec = None if prof is None else prof.definition_field(field)
    return "/" if spec is None else spec.separator


def add_metadata(fields: dict[str, JSON], place: Metadata, entries: Mapping[str, str],
                 *, ignore_case: bool = False) -> None:
    """Add `entries` to the metadata in `fields`; a name already there keeps its value
    (names compared ignoring case when `ignore_case`). The list or section is copied, so
    a record sharing it is left as it was."""
    current = fields.get(place.field)
    if place.shape == "section":
        section = dict(current) if isinstance(current, dict) else {}
        for name, value in entries.items():
            section.setdefault(name, value)
        fields[place.field] = section
        return
    pairs: list[JSON] = list(current) if isinstance(current, list) else []

    def key(name: object) -> object:
        return str(name).lower() if ignore_case else name

    present = {key(p.get("name", "")) for p in pairs if isinstance(p, dict)}
    pairs += [{"name": n, "value": v} for n, v in entries.items() if key(n) not in present]
    fields[place.field] = pairs


def set_content_type(fields: dict[str, JSON], prof: ProtocolProfile, content_type: str
                     ) -> None:
    """Put `content_type` where the protocol carries it, unless `fields` already has one
    (MQTT 3.1.1 has no place for it: nothing happens)."""
    ref = prof.content_type
    if ref is None:
        return
    if ref.name is None:
        fields.setdefault(ref.field, content_type)
    elif prof.metadata is not None and ref.field == prof.metadata.field:
        add_metadata(fields, prof.metadata, {ref.name: content_type},
                     ignore_case=prof.metadata.ignore_case)
    else:
        current = fields.get(ref.field)
        section = dict(current) if isinstance(current, dict) else {}
        section.setdefault(ref.name, content_type)
        fields[ref.field] = section
