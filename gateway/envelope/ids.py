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

Otherwise a random UUID (v4). The table is each protocol's `ProtocolProfile.identity`,
read by its compiled accessors (`gateway.protocols.accessors`).
"""

from __future__ import annotations

import hashlib
import os
import random
import uuid
from operator import itemgetter

from gateway.protocols.accessors import ACCESSORS
from gateway.record import NativeMessage

# Namespace of xrgw's name-based ids: uuid5(NAMESPACE_URL, "urn:xrgw:cloudevents:id").
ID_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "urn:xrgw:cloudevents:id")


def native_identity(record: NativeMessage) -> str | None:
    """`prefix:part/part/...` of the protocol's identity (`ProtocolProfile.identity`), or
    None when the protocol has none or the record lacks a part it needs."""
    return ACCESSORS[record.protocol].identity(record.fields)


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
    identity = ACCESSORS[record.protocol].identity(record.fields)
    if identity is not None:
        return name_uuid(identity)
    return random_uuid()


# SHA-1 state after the namespace bytes: each name-based id hashes only its name on a copy.
_NAMESPACE_SHA1 = hashlib.sha1(ID_NAMESPACE.bytes, usedforsecurity=False)
# The parts of the digest's hex text the UUID's text is made of, cut in one call (five
# slices and an index each on their own were a third of the id's cost).
_PIECES = itemgetter(slice(0, 8), slice(8, 12), slice(13, 16), 16, slice(17, 20), slice(20, 32))
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
    a, b, c, variant, e, f = _PIECES(digest.hexdigest())
    return f"{a}-{b}-5{c}-{_VARIANT[variant]}{e}-{f}"
