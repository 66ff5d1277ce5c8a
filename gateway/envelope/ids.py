"""CloudEvents `id` for native messages.

Rule (documented in docs and README): when the native message has an identity of its
own, the id is a name-based UUID (v5) over that identity, so a redelivered message gets
the same id and downstream de-duplication works:

| protocol | identity (name hashed, in this order)                        |
|----------|--------------------------------------------------------------|
| KAFKA    | `kafka:` topic `/` partition `/` offset                      |
| AMQP/1.0 | `amqp:` properties.message-id                                |
| NATS     | `nats:` stream `/` sequence (JetStream deliveries)           |
| MQTT/5.0 | `mqtt:` topic_name `/` correlation_data                      |
| HTTP     | `http:` the `Idempotency-Key` header                         |

Otherwise a random UUID (v4). The table is each protocol's `ProtocolProfile.identity`.
"""

from __future__ import annotations

import hashlib
import os
import random
import uuid

from gateway.jsontypes import JSON
from gateway.protocols import IdentityPart, find_profile
from gateway.record import NativeMessage

# Namespace of xrgw's name-based ids: uuid5(NAMESPACE_URL, "urn:xrgw:cloudevents:id").
ID_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "urn:xrgw:cloudevents:id")


def native_identity(record: NativeMessage) -> str | None:
    """`prefix:part/part/...` of the protocol's identity (`ProtocolProfile.identity`), or
    None when the protocol has none or the record lacks a part it needs."""
    prof = find_profile(record.protocol)
    if prof is None or prof.identity is None:
        return None
    values: list[JSON] = []
    for part in prof.identity.parts:
        value = _part_value(record, part)
        if (part.need == "present" and value is None) or (
                part.need == "non-empty" and not value):
            return None
        values.append(value)
    return f"{prof.identity.prefix}:{'/'.join(str(v) for v in values)}"


def _part_value(record: NativeMessage, part: IdentityPart) -> JSON:
    ref = part.ref
    if ref.name is None:
        return record.fields.get(ref.field, "" if part.need == "optional" else None)
    prof = find_profile(record.protocol)
    if prof is not None and prof.metadata is not None and ref.field == prof.metadata.field:
        return record.metadata(ref.name)
    section = record.fields.get(ref.field)
    return section.get(ref.name) if isinstance(section, dict) else None


# Random ids only need to be unique, not secret: a generator seeded from the OS entropy
# pool gives 122 random bits per id at a quarter of `uuid.uuid4()`'s cost (hot path).
_random = random.Random(uuid.uuid4().int)
# A forked worker must not repeat its parent's sequence.
os.register_at_fork(after_in_child=lambda: _random.seed(uuid.uuid4().int))
_VERSION_MASK = ~(0xF000 << 64) & ~(0xC000 << 48)
_VERSION_BITS = (0x4000 << 64) | (0x8000 << 48)


def random_uuid() -> str:
    """A version-4 (random) UUID in its canonical text form."""
    n = (_random.getrandbits(128) & _VERSION_MASK) | _VERSION_BITS
    h = f"{n:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def event_id(record: NativeMessage) -> str:
    identity = native_identity(record)
    if identity is not None:
        return str(_name_uuid(identity))
    return random_uuid()


def _name_uuid(identity: str) -> uuid.UUID:
    """`uuid5(ID_NAMESPACE, identity)`. A lone surrogate (a hostile record's field, e.g. a
    JSON `\\ud800` escape) cannot be UTF-8 encoded, which made `uuid5` raise and the route
    nack the message forever; it is hashed as its own code unit instead (found by
    tests/fuzz). Valid text takes the first branch and gets the same id as before."""
    try:
        return uuid.uuid5(ID_NAMESPACE, identity)
    except UnicodeEncodeError:
        name = identity.encode("utf-8", "surrogatepass")
        digest = hashlib.sha1(ID_NAMESPACE.bytes + name, usedforsecurity=False).digest()
        return uuid.UUID(bytes=digest[:16], version=5)
