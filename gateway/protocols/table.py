"""The profiles of every protocol the gateway knows, and the lookups over them.

Adding a protocol: a module with its profile next to this one, and one entry in
`PROFILES` (see docs/architecture.md, "Adding a protocol").
"""

from __future__ import annotations

from collections.abc import Sequence

from gateway.protocols.amqp import AMQP_PROFILE
from gateway.protocols.http import HTTP_PROFILE
from gateway.protocols.kafka import KAFKA_PROFILE
from gateway.protocols.mqtt import MQTT5_PROFILE, MQTT311_PROFILE
from gateway.protocols.nats import NATS_PROFILE
from gateway.protocols.profile import FieldRef, FieldSpec, ProtocolProfile, RecordFieldType

# In the order documents and messages list them.
PROFILES: tuple[ProtocolProfile, ...] = (
    MQTT5_PROFILE, MQTT311_PROFILE, AMQP_PROFILE, KAFKA_PROFILE, NATS_PROFILE, HTTP_PROFILE,
)
_BY_NAME = {p.name: p for p in PROFILES}

PROTOCOLS: tuple[str, ...] = tuple(_BY_NAME)

# Fields a *message definition's* protocoloptions may constrain, per protocol.
DEFINITION_FIELDS: dict[str, tuple[FieldSpec, ...]] = {
    p.name: p.definitions.fields for p in PROFILES}
# Fields of the *native message record* per protocol (JSON form).
RECORD_FIELDS: dict[str, dict[str, RecordFieldType]] = {
    p.name: dict(p.record_fields) for p in PROFILES}


def find_profile(protocol: str | None) -> ProtocolProfile | None:
    """The profile of a canonical protocol name; None for an unknown one."""
    return _BY_NAME.get(protocol or "")


def profile(protocol: str) -> ProtocolProfile:
    """The profile of a canonical protocol name; ValueError for an unknown one."""
    found = _BY_NAME.get(protocol)
    if found is None:
        raise ValueError(f"unknown protocol {protocol!r} (known: {', '.join(PROTOCOLS)})")
    return found


def is_known_protocol(name: str | None) -> bool:
    return name in _BY_NAME


def normalize_protocol(name: str | None) -> str | None:
    """Map any accepted spelling to the canonical protocol name, or None when absent.

    Case-insensitive; `MQTT` is read as 5.0 (rc-format definitions refuse the bare
    name, see `versionless_reading`), `AMQP` means 1.0, `HTTP/x` is `HTTP`, `KAFKA/x` and
    `NATS/x` ignore the version, `None` (a pre-rc1 default seen in real catalogs) is absent.
    Unknown names are returned upper-cased so the validator can report them; a known
    family with an unknown version as `FAMILY/VERSION` (`MQTT/7`).
    """
    if name is None:
        return None
    if name in _BY_NAME:  # a canonical name, as every writer of records writes it
        return name
    upper = name.strip().upper()
    if upper in ("", "NONE"):
        return None
    family, _, version = upper.partition("/")
    known_family = False
    for candidate in PROFILES:
        spelling = candidate.spelling
        if family in spelling.families:
            known_family = True
            if spelling.versions is None or version in spelling.versions:
                return candidate.name
    return f"{family}/{version}" if known_family else upper


def versionless_reading(name: str | None) -> str | None:
    """The protocol a version-less spelling is read as when its family has members whose
    options differ (`MQTT` -> `MQTT/5.0`: 3.1.1 and 5.0 are incompatible), else None
    (`AMQP`, `HTTP`, `KAFKA`, `NATS` name one protocol). rc2 requires the version there."""
    if name is None or "/" in name:
        return None
    protocol = normalize_protocol(name)
    found = _BY_NAME.get(protocol or "")
    if found is None or len([p for p in PROFILES if p.family == found.family]) < 2:
        return None
    return found.name


def definition_field(protocol: str, name: str) -> FieldSpec | None:
    found = _BY_NAME.get(protocol)
    return None if found is None else found.definition_field(name)


def family(protocol: str | None) -> str | None:
    """Protocol family for matching: MQTT 3.1.1 and 5.0 records and definitions mix.

    A 5.0 PUBLISH carries every 3.1.1 field, so a 3.1.1 definition applies to 5.0 records;
    a 5.0 definition constraining 5.0-only fields simply fails on a 3.1.1 record. An
    unknown protocol is its own family.
    """
    found = _BY_NAME.get(protocol or "")
    return protocol if found is None else found.family


def family_members(name: str) -> tuple[ProtocolProfile, ...]:
    """The profiles of one family, in `PROFILES` order."""
    return tuple(p for p in PROFILES if p.family == name)


def address_fields() -> dict[str, FieldRef]:
    """Family -> the field that addresses its messages (one per family: members agree)."""
    out: dict[str, FieldRef] = {}
    for p in PROFILES:
        if p.address is not None:
            out.setdefault(p.family, p.address)
    return out


def widest_protocol(protocols: Sequence[str]) -> str:
    """Of members of one family, the one whose records carry every field the others
    define (MQTT 5.0 over 3.1.1); the first when they all carry the same."""
    def names(protocol: str) -> set[str]:
        return {spec.name for spec in DEFINITION_FIELDS.get(protocol, ())}

    every = [names(p) for p in protocols]
    for candidate, own in zip(protocols, every, strict=True):
        if all(other <= own for other in every):
            return candidate
    return protocols[0]
