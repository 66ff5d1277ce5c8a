"""Native identity readers (the `identity` of `gateway.protocols.accessors`, read by
`gateway.envelope.ids`): the generated reader of scalar identities (Kafka, NATS, MQTT) and
the looped one of named parts (AMQP, HTTP) give `prefix:part/part` or None by each part's
need (present, non-empty, optional)."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.envelope import ids
from gateway.json.values import JSON
from gateway.protocols import accessors, find_profile
from gateway.record import NativeMessage

# protocol, record fields, the identity (None: the record lacks a part it needs)
CASES: list[tuple[str, dict[str, JSON], str | None]] = [
    ("KAFKA", {"topic": "orders", "partition": 0, "offset": 5}, "kafka:orders/0/5"),
    ("KAFKA", {"topic": "", "partition": 3, "offset": 0}, "kafka:/3/0"),  # present, empty
    ("KAFKA", {"topic": "orders", "partition": 0}, None),
    ("KAFKA", {"partition": 0, "offset": 5}, None),
    ("KAFKA", {"topic": None, "partition": 0, "offset": 5}, None),
    ("NATS", {"subject": "a.b", "stream": "S", "sequence": 7}, "nats:S/7"),
    ("NATS", {"subject": "a.b", "sequence": 7}, None),
    ("NATS", {"subject": "a.b"}, None),
    # MQTT 5: the topic is optional (empty when absent), correlation data must be non-empty
    ("MQTT/5.0", {"topic_name": "t/1", "correlation_data": "c9"}, "mqtt:t/1/c9"),
    ("MQTT/5.0", {"correlation_data": "c9"}, "mqtt:/c9"),
    ("MQTT/5.0", {"topic_name": "t/1", "correlation_data": ""}, None),
    ("MQTT/5.0", {"topic_name": "t/1"}, None),
    ("AMQP/1.0", {"properties": {"message-id": "m-1"}}, "amqp:m-1"),
    ("AMQP/1.0", {"properties": {"message-id": 42}}, "amqp:42"),
    ("AMQP/1.0", {"properties": {}}, None),
    ("AMQP/1.0", {"properties": "not a section"}, None),
    ("HTTP", {"headers": [{"name": "Idempotency-Key", "value": "k-1"}]}, "http:k-1"),
    ("HTTP", {"headers": [{"name": "Idempotency-Key", "value": ""}]}, None),
    ("HTTP", {"headers": []}, None),
    ("MQTT/3.1.1", {"topic_name": "t"}, None),
    ("FOO", {"id": "x"}, None),
]


@pytest.fixture
def fresh_readers() -> None:
    """Accessors are built once per protocol and kept: start from none, so building them is
    part of the test."""
    accessors.ACCESSORS.clear()  # type: ignore[attr-defined]  # a cache: refilled on use


@pytest.mark.parametrize(("protocol", "fields", "expected"), CASES)
def test_native_identity_of_each_protocol(fresh_readers: None, protocol: str,
                                          fields: dict[str, JSON], expected: str | None) -> None:
    record = NativeMessage(protocol, fields)
    assert ids.native_identity(record) == expected
    assert accessors.ACCESSORS[protocol].identity(fields) == expected  # the kept one agrees


@pytest.mark.parametrize("protocol", ["KAFKA", "NATS", "MQTT/5.0"])
def test_the_generated_scalar_reader_reads_like_the_profile_says(protocol: str) -> None:
    identity = find_profile(protocol).identity  # type: ignore[union-attr]
    assert identity is not None
    read = accessors._scalar_identity_reader(identity.prefix, identity.parts)
    for case_protocol, fields, expected in CASES:
        if case_protocol == protocol:
            assert read(fields) == expected


def test_a_scalar_reader_with_only_optional_parts_always_has_an_identity() -> None:
    from gateway.protocols.profile import FieldRef, IdentityPart
    parts = (IdentityPart(FieldRef("a"), "optional"), IdentityPart(FieldRef("b"), "optional"))
    read: Any = accessors._scalar_identity_reader("x", parts)
    assert read({"a": 1, "b": "two"}) == "x:1/two"
    assert read({}) == "x:/"


@pytest.mark.parametrize(("protocol", "scalar"), [
    ("KAFKA", True), ("NATS", True), ("MQTT/5.0", True), ("AMQP/1.0", False),
    ("HTTP", False), ("MQTT/3.1.1", False), ("FOO", False),
])
def test_which_identities_are_scalar(protocol: str, scalar: bool) -> None:
    assert accessors.ACCESSORS[protocol].scalar_identity is scalar


def test_the_general_reader_joins_mixed_parts_in_profile_order() -> None:
    """No shipped profile mixes scalar fields and named entries in one identity, but the
    general reader is written for it (a profile may add one): scalar parts read with their
    need's default, named parts from their section, joined by "/" in profile order."""
    from dataclasses import replace

    from gateway.protocols.profile import FieldRef, Identity, IdentityPart
    amqp = find_profile("AMQP/1.0")
    assert amqp is not None
    mixed = replace(amqp, identity=Identity("mix", (
        IdentityPart(FieldRef("topic"), "optional"),
        IdentityPart(FieldRef("properties", "message-id")),
        IdentityPart(FieldRef("seq"), "present"),
    )))
    compiled = accessors.compile_accessors(mixed)
    assert not compiled.scalar_identity
    read = compiled.identity
    assert read({"topic": "t", "properties": {"message-id": "m"}, "seq": 4}) == "mix:t/m/4"
    no_topic = {"properties": {"message-id": "m"}, "seq": 0}
    assert read(no_topic) == "mix:/m/0"  # optional: an absent field reads as ""
    no_seq = {"topic": "t", "properties": {"message-id": "m"}}
    assert read(no_seq) is None  # present: an absent field means no identity
    empty_seq = {"topic": "t", "properties": {"message-id": "m"}, "seq": ""}
    assert read(empty_seq) == "mix:t/m/"  # present: an empty value still counts
