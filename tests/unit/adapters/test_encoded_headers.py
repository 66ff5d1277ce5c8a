"""The Kafka and NATS bindings hand the producer their headers already as pairs; the
producer sends exactly what it would have made of the `headers` field, and falls back to
the field as soon as the field is no longer what the pairs were made from."""

from __future__ import annotations

from datetime import UTC, datetime
from types import ModuleType

import pytest

from adapters.kafka.record import to_send
from adapters.nats.record import publish_frame, to_publish
from gateway.cloudevents.bindings import kafka, nats
from gateway.cloudevents.event import CloudEvent
from gateway.envelope.outgoing import OutputFormat
from gateway.json.values import JSON
from gateway.record import NativeMessage, WireRecord

BASE = {"specversion": "1.0", "type": "com.example.sale", "source": "/stores/1",
        "id": "a-1", "time": datetime(2026, 11, 24, 12, 0, tzinfo=UTC)}


def _plain(record: NativeMessage) -> NativeMessage:
    """The same record without encoded headers: what to_send made before they existed."""
    return NativeMessage(record.protocol, dict(record.fields), record.data, record.payload,
                         record.received_at, record.raw)


EVENTS = [
    CloudEvent({**BASE, "datacontenttype": "application/json"}, {"amount": 1}),
    CloudEvent(BASE, {"amount": 1}),  # JSON data without a content type
    CloudEvent({**BASE, "datacontenttype": "text/plain"}, "héllo"),
    CloudEvent(BASE),  # no data: a tombstone
    CloudEvent({**BASE, "subject": "ünïcode ✓", "partitionkey": "k-1", "myext": 5}, b"\x00\x01"),
    CloudEvent({**BASE, "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
                "tracestate": "a=b"}, {"x": 1}),
]


@pytest.mark.parametrize("event", EVENTS, ids=range(len(EVENTS)))
@pytest.mark.parametrize("default_headers", [(), (("x-origin", b"gw"), ("ce_type", b"no"))])
def test_the_producer_sends_what_it_would_have_made_of_the_field(
        event: CloudEvent, default_headers: tuple[tuple[str, bytes], ...]) -> None:
    record = OutputFormat("KAFKA", "binary", defaults={"topic": "t"}).render(event, {})
    sent = to_send(record, default_headers=default_headers)
    assert sent == to_send(_plain(record), default_headers=default_headers)


@pytest.mark.parametrize("event", EVENTS, ids=range(len(EVENTS)))
def test_the_nats_producer_frames_what_it_would_have_made_of_the_field(
        event: CloudEvent) -> None:
    record = OutputFormat("NATS", "binary", defaults={"subject": "s"}).render(event, {})
    plain = _plain(record)
    assert plain.current_encoded_headers() is None
    assert publish_frame(to_publish(record)) == publish_frame(to_publish(plain))


def test_nats_pairs_carry_the_percent_encoded_values() -> None:
    record = OutputFormat("NATS", "binary", defaults={"subject": "s"}).render(EVENTS[4], {})
    encoded = record.current_encoded_headers()
    assert encoded is not None and encoded.utf8 is None
    assert ("ce-subject", "%C3%BCn%C3%AFcode%20%E2%9C%93") in encoded.text
    assert ("ce-subject", "%C3%BCn%C3%AFcode%20%E2%9C%93") in (to_publish(record).pairs or [])


def test_the_binding_makes_them_and_a_key_keeps_them() -> None:
    record = OutputFormat("KAFKA", "binary", defaults={"topic": "t"}).render(
        EVENTS[0], {}, ("key", "store-1"))
    assert record.current_encoded_headers() is not None
    assert to_send(record).key == b"store-1"
    copy = record.replace_fields({**record.fields, "partition": 0})
    assert copy.current_encoded_headers() is record.current_encoded_headers()


def test_trace_context_headers_are_a_new_list_and_are_read_from_the_field() -> None:
    record = OutputFormat("KAFKA", "binary", defaults={"topic": "t"}).render(EVENTS[5], {})
    # with_trace added `traceparent` to a copy of the list: the pairs no longer describe it
    assert record.current_encoded_headers() is None
    assert ("traceparent", EVENTS[5].get("traceparent").encode()) in to_send(record).headers


def test_a_list_changed_in_place_is_read_from_the_field() -> None:
    record = OutputFormat("KAFKA", "binary", defaults={"topic": "t"}).render(EVENTS[0], {})
    entries = record.fields["headers"]
    assert isinstance(entries, list)
    entries.append({"name": "x-late", "value": "1"})
    assert record.current_encoded_headers() is None
    assert ("x-late", b"1") in to_send(record).headers


def test_headers_replaced_under_the_same_record_are_read_from_the_field() -> None:
    record = OutputFormat("KAFKA", "binary", defaults={"topic": "t"}).render(EVENTS[0], {})
    other = record.replace_fields({**record.fields, "headers": [{"name": "a", "value": "b"}]})
    assert other.current_encoded_headers() is None
    assert to_send(other).headers[0] == ("a", b"b")


@pytest.mark.parametrize(("protocol", "binding", "defaults", "key"), [
    ("KAFKA", kafka, {"topic": "t", "partition": 0}, ("key", "store-1")),
    ("NATS", nats, {"subject": "s", "reply-to": "r"}, None),
])
def test_a_wire_record_makes_its_header_entries_where_the_binding_writes_them(
        protocol: str, binding: ModuleType, defaults: dict[str, JSON],
        key: tuple[str, str] | None) -> None:
    """A `WireRecord` leaves its {name, value} entries unmade while only its producer reads
    it; read, its fields are the binding's own, with the defaults and the key after them,
    in the same order."""
    record = OutputFormat(protocol, "binary", defaults=defaults).render(EVENTS[0], {}, key)
    assert isinstance(record, WireRecord)
    encoded = record.current_encoded_headers()
    assert encoded is not None and encoded.entries is None  # the producer's view made none
    reference = dict(binding.binary_record(EVENTS[0]).fields)
    for name, value in [*defaults.items(), *([key] if key else [])]:
        reference.setdefault(name, value)
    assert list(record.fields.items()) == list(reference.items())
    assert record.current_encoded_headers() is encoded  # the entries it made describe it
    assert record.fields["headers"] is encoded.entries


@pytest.mark.parametrize(("protocol", "binding"), [("KAFKA", kafka), ("NATS", nats)])
def test_a_default_for_the_headers_does_not_replace_the_bindings_headers(
        protocol: str, binding: ModuleType) -> None:
    defaults: dict[str, JSON] = {"topic": "t", "subject": "s",
                                 "headers": [{"name": "x-default", "value": "1"}]}
    record = OutputFormat(protocol, "binary", defaults=defaults).render(EVENTS[0], {})
    assert record.fields["headers"] == binding.binary_record(EVENTS[0]).fields["headers"]
    assert to_send(record) == to_send(_plain(record)) if protocol == "KAFKA" else (
        publish_frame(to_publish(record)) == publish_frame(to_publish(_plain(record))))
