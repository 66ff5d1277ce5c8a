"""One compiled accessor set per protocol: the readers of a record's fields that run for
every message, built once from the protocol's profile.

A profile says *where* a fact lives (`ProtocolProfile.address`, `.metadata`,
`.content_type`, `.identity`); looking the profile up and re-reading its places for every
message costs more than the read itself. `ACCESSORS[protocol]` is the set built from one
profile on first use and kept: plain functions of a record's `fields` (the native record's
`metadata`/`content_type`, the matcher's address, the CloudEvent id's identity). One
table for every reader, so a new protocol's profile is read in one place.

A name that is no protocol gets `NONE` (every reader answers None) and is not kept: a
record's protocol is the sender's text in `xrgw match`, and the table must not grow with it.

Readers of scalar identities (Kafka, NATS, MQTT 5) are generated with the parts unrolled
(`scalar_identity_code`, shared with the generated envelope renderers); the looped reader
of named parts is the reference they are tested against (`tests/unit/core`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from gateway.json.values import JSON, as_text
from gateway.protocols.profile import IdentityPart, Metadata, ProtocolProfile
from gateway.protocols.table import find_profile

__all__ = ["ACCESSORS", "NONE", "Accessors", "FieldReader", "MetadataReader",
           "compile_accessors", "scalar_identity_code"]

#: (record fields, metadata name) -> the value as text, or None.
MetadataReader = Callable[[Mapping[str, JSON], str], "str | None"]
#: record fields -> a text the profile places there, or None.
FieldReader = Callable[[Mapping[str, JSON]], "str | None"]


@dataclass(frozen=True, slots=True)
class Accessors:
    """What the hot path reads of one protocol's records."""

    #: The value of the address field (`ProtocolProfile.address`): topic, subject, path.
    address: FieldReader
    #: A metadata entry by name (header, user property, application property).
    metadata: MetadataReader
    #: The content type the record carries (`ProtocolProfile.content_type`).
    content_type: FieldReader
    #: `prefix:part/part` of `ProtocolProfile.identity`, or None.
    identity: FieldReader
    #: Whether the identity is read from scalar fields only (a generated renderer inlines
    #: `scalar_identity_code` then, instead of calling `identity`).
    scalar_identity: bool


def _none(fields: Mapping[str, JSON], name: str = "") -> None:
    return None


NONE = Accessors(address=_none, metadata=_none, content_type=_none, identity=_none,
                 scalar_identity=False)


class _Table(dict[str, Accessors]):
    """Built on first use per protocol name; names of no protocol are answered, not kept."""

    def __missing__(self, protocol: str) -> Accessors:
        prof = find_profile(protocol)
        if prof is None:
            return NONE
        built = self[protocol] = compile_accessors(prof)
        return built


#: protocol name -> its accessors (`ACCESSORS[record.protocol].metadata(fields, name)`).
ACCESSORS: Mapping[str, Accessors] = _Table()


def compile_accessors(prof: ProtocolProfile) -> Accessors:
    """The accessor set of one profile."""
    metadata = _metadata_reader(prof.metadata)
    identity = prof.identity
    scalar = identity is not None and all(p.ref.name is None for p in identity.parts)
    return Accessors(
        address=_address_reader(prof),
        metadata=metadata,
        content_type=_content_type_reader(prof, metadata),
        identity=(_none if identity is None
                  else _scalar_identity_reader(identity.prefix, identity.parts) if scalar
                  else _parts_identity_reader(prof, metadata)),
        scalar_identity=scalar,
    )


def _address_reader(prof: ProtocolProfile) -> FieldReader:
    if prof.address is None:
        return _none
    field, name = prof.address.field, prof.address.name

    def scalar(fields: Mapping[str, JSON]) -> str | None:
        value = fields.get(field)  # HTTP: raw, split before decoding
        return value if isinstance(value, str) else None

    def member(fields: Mapping[str, JSON]) -> str | None:
        section = fields.get(field)
        value = section.get(name or "") if isinstance(section, dict) else None
        return value if isinstance(value, str) else None

    return scalar if name is None else member


def _metadata_reader(place: Metadata | None) -> MetadataReader:
    if place is None:
        return _none
    field_name, ignore_case, text_values = place.field, place.ignore_case, place.text_values

    def read_section(fields: Mapping[str, JSON], name: str) -> str | None:
        raw = fields.get(field_name)
        if not isinstance(raw, dict) or name not in raw:
            return None
        found = raw[name]
        if text_values:
            return as_text(found)
        return found if isinstance(found, str) else None

    def read_pairs(fields: Mapping[str, JSON], name: str) -> str | None:
        entries = fields.get(field_name)
        if not isinstance(entries, list):
            return None
        wanted = name.lower() if ignore_case else name
        size = len(wanted)
        for entry in entries:  # inline, not a helper call: this runs for every message
            if not isinstance(entry, dict):
                continue
            key = entry.get("name")
            # Lengths first: most names differ in length, so few are lower-cased.
            if (isinstance(key, str) and len(key) == size
                    and (key.lower() if ignore_case else key) == wanted):
                found = entry.get("value")
                if text_values:
                    return as_text(found)
                return found if isinstance(found, str) else None
        return None

    return read_section if place.shape == "section" else read_pairs


def _content_type_reader(prof: ProtocolProfile, metadata: MetadataReader) -> FieldReader:
    ref = prof.content_type
    if ref is None:
        return _none
    field_name, member = ref.field, ref.name
    if member is None:
        def read_scalar(fields: Mapping[str, JSON]) -> str | None:
            value = fields.get(field_name)
            return value if isinstance(value, str) else None

        return read_scalar
    name = member
    if prof.metadata is not None and field_name == prof.metadata.field:
        def read_metadata(fields: Mapping[str, JSON]) -> str | None:
            return metadata(fields, name)

        return read_metadata

    def read_member(fields: Mapping[str, JSON]) -> str | None:
        section = fields.get(field_name)
        value = section.get(name) if isinstance(section, dict) else None
        return value if isinstance(value, str) else None

    return read_member


def _parts_identity_reader(prof: ProtocolProfile, metadata: MetadataReader) -> FieldReader:
    """The reference reader: any mix of scalar fields and named entries, in profile order."""
    assert prof.identity is not None
    prefix, parts = prof.identity.prefix + ":", prof.identity.parts
    metadata_field = None if prof.metadata is None else prof.metadata.field

    def part_value(fields: Mapping[str, JSON], part: IdentityPart) -> JSON:
        ref = part.ref
        if ref.name is None:
            return fields.get(ref.field, "" if part.need == "optional" else None)
        if ref.field == metadata_field:
            return metadata(fields, ref.name)
        section = fields.get(ref.field)
        return section.get(ref.name) if isinstance(section, dict) else None

    def read_parts(fields: Mapping[str, JSON]) -> str | None:
        values: list[JSON] = []
        for part in parts:
            value = part_value(fields, part)
            if (part.need == "present" and value is None) or (
                    part.need == "non-empty" and not value):
                return None
            values.append(value)
        return prefix + "/".join(str(v) for v in values)

    return read_parts


def _scalar_identity_reader(prefix: str, parts: tuple[IdentityPart, ...]) -> FieldReader:
    """Scalar fields only (Kafka topic/partition/offset, NATS stream/sequence, MQTT topic):
    one generated function with the parts unrolled, half the cost of a loop over them
    (this runs for every message). Same rules as the parts reader and its need checks."""
    lines = ["def read(fields):",
             *("    " + line for line in scalar_identity_code(prefix, parts)),
             "    return identity"]
    namespace: dict[str, FieldReader] = {}
    exec("\n".join(lines), namespace)  # built from the profile table only, never from input
    return namespace["read"]


def scalar_identity_code(prefix: str, parts: tuple[IdentityPart, ...]) -> list[str]:
    """Python lines that set `identity` to the native identity (or None) of the record
    whose fields are `fields`, for an identity of scalar fields only: shared by the
    identity reader and the generated envelope renderers (`envelope.fastrender`)."""
    lines: list[str] = []
    conditions: list[str] = []
    for n, part in enumerate(parts):
        name = repr(part.ref.field)
        if part.need == "optional":
            lines.append(f"id_v{n} = fields.get({name}, '')")
            continue
        lines.append(f"id_v{n} = fields.get({name})")
        conditions.append(f"id_v{n} is not None" if part.need == "present" else f"id_v{n}")
    text = "/".join(f"{{id_v{n}!s}}" for n in range(len(parts)))
    # One f-string, the prefix in it (braces doubled): `prefix + f"..."` made two strings.
    escaped = (prefix + ":").replace("{", "{{").replace("}", "}}")
    value = f"f{escaped + text!r}"
    if not conditions:
        return [*lines, f"identity = {value}"]
    return [*lines, f"identity = {value} if {' and '.join(conditions)} else None"]
