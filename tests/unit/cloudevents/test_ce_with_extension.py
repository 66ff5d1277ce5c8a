"""`with_extension`: the binding adds an extension attribute to a binary record (what
request-reply's `correlationid` needs), where the binding writes extensions, and leaves
every other record alone."""

from __future__ import annotations

import pytest

from gateway.cloudevents.bindings import decode, encode, with_extension
from gateway.cloudevents.event import CloudEvent
from gateway.protocols import AMQP, HTTP, KAFKA, MQTT5, MQTT311, NATS
from gateway.record import NativeMessage

EVENT = CloudEvent.create(
    {"specversion": "1.0", "id": "1", "source": "/s", "type": "t",
     "datacontenttype": "application/json"}, data={"a": 1})


@pytest.mark.parametrize("protocol", [NATS, MQTT5, KAFKA, AMQP])
def test_a_binary_record_gets_the_extension_and_keeps_the_rest(protocol: str) -> None:
    record = encode(EVENT, protocol, "binary")
    extended = with_extension(record, "correlationid", "tok-1")
    event = decode(extended)
    assert event is not None
    assert event.get("correlationid") == "tok-1"
    assert event.get("id") == "1" and event.data == {"a": 1}
    assert decode(record) is not None and decode(record).get("correlationid") is None  # type: ignore[union-attr]


def test_nats_writes_a_ce_header() -> None:
    extended = with_extension(encode(EVENT, NATS, "binary"), "correlationid", "tok-1")
    assert ("ce-correlationid", "tok-1") in extended.pairs("headers")


def test_mqtt5_writes_the_records_own_style() -> None:
    bare = with_extension(encode(EVENT, MQTT5, "binary"), "correlationid", "t")
    assert ("correlationid", "t") in bare.pairs("user_properties")
    sdk_go = NativeMessage(MQTT5, {"user_properties": [
        {"name": "ce-specversion", "value": "1.0"}, {"name": "ce-id", "value": "1"},
        {"name": "ce-source", "value": "/s"}, {"name": "ce-type", "value": "t"}]},
        payload=b"x")
    extended = with_extension(sdk_go, "correlationid", "t")
    assert ("ce-correlationid", "t") in extended.pairs("user_properties")
    assert decode(extended).get("correlationid") == "t"  # type: ignore[union-attr]


@pytest.mark.parametrize("protocol", [NATS, MQTT5, MQTT311, KAFKA, HTTP, AMQP])
def test_structured_events_and_plain_messages_are_left_alone(protocol: str) -> None:
    structured = encode(EVENT, protocol, "structured")
    assert with_extension(structured, "correlationid", "t") is structured
    plain = NativeMessage(protocol, {}, payload=b"{}")
    assert with_extension(plain, "correlationid", "t") is plain


def test_kafka_writes_a_ce_header_and_amqp_an_application_property() -> None:
    kafka = with_extension(encode(EVENT, KAFKA, "binary"), "correlationid", "t")
    assert ("ce_correlationid", "t") in kafka.pairs("headers")
    amqp = with_extension(encode(EVENT, AMQP, "binary"), "correlationid", "t")
    properties = amqp.fields["application-properties"]
    assert isinstance(properties, dict) and properties["cloudEvents_correlationid"] == "t"


def test_a_binding_without_extend_leaves_the_record_alone() -> None:
    record = encode(EVENT, HTTP, "binary")
    assert with_extension(record, "correlationid", "t") is record
