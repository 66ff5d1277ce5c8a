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

Otherwise a random UUID (v4).
"""

from __future__ import annotations

import hashlib
import os
import random
import uuid

from gateway.protocols import AMQP, HTTP, KAFKA, MQTT5, NATS
from gateway.record import NativeMessage

# Namespace of xrgw's name-based ids: uuid5(NAMESPACE_URL, "urn:xrgw:cloudevents:id").
ID_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "urn:xrgw:cloudevents:id")


def native_identity(record: NativeMessage) -> str | None:
    fields = record.fields
    protocol = record.protocol
    if protocol == KAFKA:
        topic, partition, offset = fields.get("topic"), fields.get("partition"), fields.get(
            "offset"
        )
        if topic is not None and partition is not None and offset is not None:
            return f"kafka:{topic}/{partition}/{offset}"
    elif protocol == AMQP:
        props = fields.get("properties")
        if isinstance(props, dict) and props.get("message-id") is not None:
            return f"amqp:{props['message-id']}"
    elif protocol == NATS:
        stream, sequence = fields.get("stream"), fields.get("sequence")
        if stream is not None and sequence is not None:
            return f"nats:{stream}/{sequence}"
    elif protocol == MQTT5:
        correlation = fields.get("correlation_data")
        if correlation:
            return f"mqtt:{fields.get('topic_name', '')}/{correlation}"
    elif protocol == HTTP:
        key = record.header("idempotency-key", case_insensitive=True)
        if key:
            return f"http:{key}"
    return None


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
