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
from collections.abc import Callable

from gateway.json.values import JSON
from gateway.protocols import IdentityPart, find_profile
from gateway.record import NativeMessage

# Namespace of xrgw's name-based ids: uuid5(NAMESPACE_URL, "urn:xrgw:cloudevents:id").
ID_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "urn:xrgw:cloudevents:id")


def native_identity(record: NativeMessage) -> str | None:
    """`prefix:part/part/...` of the protocol's identity (`ProtocolProfile.identity`), or
    None when the protocol has none or the record lacks a part it needs."""
    return identity_reader(record.protocol)(record)


IdentityReader = Callable[[NativeMessage], "str | None"]


def _no_identity(record: NativeMessage) -> None:
    return None


def identity_reader(protocol: str) -> IdentityReader:
    """`native_identity` of a protocol's records as one function, built once per
    protocol: the profile is looked up here, not for every message."""
    reader = _IDENTITY_READERS.get(protocol)
    if reader is not None:
        return reader
    prof = find_profile(protocol)
    if prof is None or prof.identity is None:
        return _no_identity
    prefix = prof.identity.prefix + ":"
    parts = prof.identity.parts
    if all(p.ref.name is None for p in parts):
        reader = _scalar_identity_reader(prof.identity.prefix, parts)
    else:
        def read_parts(record: NativeMessage) -> str | None:
            values: list[JSON] = []
            for part in parts:
                value = _part_value(record, part)
                if (part.need == "present" and value is None) or (
                        part.need == "non-empty" and not value):
                    return None
                values.append(value)
            return prefix + "/".join(str(v) for v in values)

        reader = read_parts
    _IDENTITY_READERS[protocol] = reader
    return reader


_IDENTITY_READERS: dict[str, IdentityReader] = {}


def _scalar_identity_reader(prefix: str, parts: tuple[IdentityPart, ...]) -> IdentityReader:
    """Scalar fields only (Kafka topic/partition/offset, NATS stream/sequence, MQTT topic):
    one generated function with the parts unrolled, half the cost of a loop over them
    (this runs for every message). Same rules as `_part_value` and the need checks."""
    lines = ["def read(record):", "    fields = record.fields",
             *("    " + line for line in scalar_identity_code(prefix, parts)),
             "    return identity"]
    namespace: dict[str, IdentityReader] = {}
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
    value = f"{prefix + ':'!r} + f{text!r}"
    if not conditions:
        return [*lines, f"identity = {value}"]
    return [*lines, f"identity = {value} if {' and '.join(conditions)} else None"]


def is_scalar_identity(protocol: str) -> bool:
    """Whether the protocol's identity is read from scalar fields only."""
    prof = find_profile(protocol)
    return (prof is not None and prof.identity is not None
            and all(p.ref.name is None for p in prof.identity.parts))


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
_getrandbits = _random.getrandbits


def random_uuid() -> str:
    """A version-4 (random) UUID in its canonical text form."""
    h = ((_getrandbits(128) & _VERSION_MASK) | _VERSION_BITS).to_bytes(16).hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def event_id(record: NativeMessage) -> str:
    identity = identity_reader(record.protocol)(record)
    if identity is not None:
        return name_uuid(identity)
    return random_uuid()


# SHA-1 state after the namespace bytes: each name-based id hashes only its name on a copy.
_NAMESPACE_SHA1 = hashlib.sha1(ID_NAMESPACE.bytes, usedforsecurity=False)
# The RFC 4122 variant puts `10` in the two top bits of the clock-sequence nibble.
_VARIANT = {c: "89ab"[int(c, 16) & 3] for c in "0123456789abcdef"}


def name_uuid(identity: str) -> str:
    """`str(uuid.uuid5(ID_NAMESPACE, identity))`, formatted straight from the SHA-1 hex
    digest (no `uuid.UUID` object: this runs for every message with an identity).

    A lone surrogate (a hostile record's field, e.g. a JSON `\\ud800` escape) cannot be
    UTF-8 encoded, which made `uuid5` raise and the route nack the message forever; it
    is hashed as its own code unit instead (found by tests/fuzz). Valid text gets the
    `uuid5` id."""
    digest = _NAMESPACE_SHA1.copy()
    try:
        digest.update(identity.encode())
    except UnicodeEncodeError:
        digest.update(identity.encode("utf-8", "surrogatepass"))
    h = digest.hexdigest()
    return f"{h[:8]}-{h[8:12]}-5{h[13:16]}-{_VARIANT[h[16]]}{h[17:20]}-{h[20:32]}"
