"""The generated binary encoders (`bindings/wireform.py`) write what the bindings' own
steps write.

For any valid event (extensions, typed values, every kind of data, text that needs
percent-encoding), with or without the JSON bytes its data came from, each binding's
wire form either declines (None) or gives the record `binary_record` gives: the same
protocol, fields in the same order, body, raw bytes, and producer pairs. The usual
event of a route -- rendered from a received JSON message -- is never declined.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from types import ModuleType

import pytest
from ce_strategies import usual_events, valid_events
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.cloudevents.bindings import http, kafka, layouts, nats, wireform
from gateway.cloudevents.event import CloudEvent
from gateway.record import NativeMessage

BINDINGS = [nats, kafka, http]


def _with_raw(event: CloudEvent, raw: str) -> CloudEvent:
    """`event` as a renderer makes it from a received record: with the bytes of its data
    (compact JSON, a UTF-8 BOM before them, UTF-16), where the data is a JSON value."""
    if raw == "none" or not event.has_data or isinstance(event.data, bytes):
        return event
    text = json.dumps(event.data, separators=(",", ":"), ensure_ascii=False)
    body = {"utf8": text.encode("utf-8", "surrogatepass"),
            "bom": b"\xef\xbb\xbf" + text.encode("utf-8", "surrogatepass"),
            "utf16": text.encode("utf-16-le", "surrogatepass")}[raw]
    return CloudEvent.trusted(dict(event.get_attributes()), event.data, True, body)


def _state(record: NativeMessage) -> tuple[object, ...]:
    encoded = record.current_encoded_headers()
    return (record.protocol, list(record.fields.items()), record.has_json_data,
            record.data if record.has_json_data else None, record.payload, record.raw,
            record.received_at,
            None if encoded is None else (encoded.text, encoded.utf8, encoded.typed))


def _producer_view(record: NativeMessage) -> tuple[object, ...]:
    """What a producer reads of `record` (`wire_fields()` but the headers, and
    `header_pairs()`), read before anything else reads it: a `WireRecord` then has not
    made its {name, value} entries yet."""
    pairs = record.header_pairs()
    fields = [(name, value) for name, value in record.wire_fields().items()
              if name != "headers"]
    return (fields, list(pairs.text), pairs.utf8, pairs.typed, pairs.lines)


@settings(max_examples=600, deadline=None)
@given(valid_events() | usual_events(), st.sampled_from(BINDINGS),
       st.sampled_from(["none", "utf8", "bom", "utf16"]))
def test_a_wire_form_record_is_the_bindings_own_record(
        event: CloudEvent, binding: ModuleType, raw: str) -> None:
    event = _with_raw(event, raw)
    form = wireform.BinaryForm(binding.WIRE.protocol, binding.WIRE.prefix,
                               binding.WIRE.percent_encode, binding.WIRE.content_type_header,
                               fixed=binding.WIRE.fixed, key_field=binding.WIRE.key_field,
                               pairs=binding.WIRE.pairs, utf8=binding.WIRE.utf8,
                               typed_pairs=binding.WIRE.typed_pairs)
    written = wireform.encode(form, event)
    if written is None:
        return
    reference = binding.binary_record(event)
    view = _producer_view(written)
    assert view[:4] == _producer_view(reference)[:4]
    assert _state(written) == _state(reference)
    assert _producer_view(written) == view  # the same once its fields were read
    # The binding's encode gives the same record either way.
    assert _state(binding.encode(event, "binary")) == _state(reference)


def _usual_event(extra: dict[str, object] | None = None) -> CloudEvent:
    """The event a route renders from a received JSON message (`envelope.fastrender`)."""
    attributes = {"specversion": "1.0", "type": "com.example.store.sale",
                  "source": "/stores/1000", "subject": "07",
                  "id": "eb0bd48c-2cd6-552c-93e5-22d8b5550569",
                  "time": datetime(2026, 11, 28, 7, 50, 30, 551437, tzinfo=UTC),
                  **(extra or {}), "datacontenttype": "application/json"}
    data = {"storeid": "1000", "total": 12.5}
    return CloudEvent.trusted(attributes, data, True, json.dumps(data).encode())  # type: ignore[arg-type]


@pytest.mark.parametrize("binding", BINDINGS, ids=lambda b: b.__name__.rsplit(".", 1)[1])
def test_the_usual_event_is_written_by_the_wire_form(binding: ModuleType) -> None:
    for event in (_usual_event(), _usual_event({"partitionkey": "1000"}),
                  CloudEvent.trusted({**_usual_event().get_attributes()}, b"\x00\x01", True)):
        written = wireform.encode(binding.WIRE, event)
        assert written is not None
        assert _state(written) == _state(binding.binary_record(event))


def test_what_each_binding_writes_for_the_usual_event() -> None:
    event = _usual_event({"partitionkey": "1000"})
    record = kafka.encode(event, "binary")
    assert record.fields["key"] == "1000"
    assert record.fields["headers"][-1] == {"name": "content-type", "value": "application/json"}
    assert record.header_pairs().utf8 is not None and record.header_pairs().typed
    assert record.raw == event.raw
    record = nats.encode(event, "binary")
    assert record.fields["headers"][-1] == {"name": "ce-datacontenttype",
                                            "value": "application/json"}
    assert not record.header_pairs().typed
    assert ("ce-time", "2026-11-28T07:50:30.551437Z") in record.header_pairs().text
    record = http.encode(event, "binary")
    assert list(record.fields) == ["method", "headers"]
    assert record.current_encoded_headers() is None


def test_a_value_to_percent_encode_is_left_to_the_binding() -> None:
    event = _usual_event({"subject": "caf\u00e9 7"})
    assert wireform.encode(nats.WIRE, event) is None
    assert ("ce-subject", "caf%C3%A9%207") in nats.encode(event, "binary").header_pairs().text
    # Kafka carries raw UTF-8: nothing to encode, so its wire form writes it.
    written = wireform.encode(kafka.WIRE, event)
    assert written is not None and ("ce_subject", "caf\u00e9 7") in written.header_pairs().text


def test_kafka_pairs_of_repeated_values_are_made_once() -> None:
    """A value that is the same text object as in the last event (a constant of the
    definition) reuses its (name, UTF-8) pair; others get their own."""
    form = wireform.BinaryForm(kafka.WIRE.protocol, "ce_", False, "content-type",
                               key_field="key", pairs=True, utf8=True, typed_pairs=True)
    first, second = _usual_event(), _usual_event({"subject": "08"})
    one = wireform.encode(form, first)
    two = wireform.encode(form, second)
    assert one is not None and two is not None
    pairs_one, pairs_two = one.header_pairs().utf8, two.header_pairs().utf8
    assert pairs_one is not None and pairs_two is not None
    assert pairs_one[0] is pairs_two[0] == ("ce_specversion", b"1.0")
    assert pairs_one[-1] is pairs_two[-1] == ("content-type", b"application/json")
    assert pairs_one[3] == ("ce_subject", b"07") and pairs_two[3] == ("ce_subject", b"08")
    assert _state(two) == _state(kafka.binary_record(second))


def test_past_the_bound_new_layouts_go_to_the_bindings_steps(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(layouts, "MAX_LAYOUTS", 1)
    form = wireform.BinaryForm(nats.WIRE.protocol, "ce-", True, "ce-datacontenttype",
                               pairs=True, lines=True)
    assert wireform.encode(form, _usual_event()) is not None
    other = _usual_event({"region": "eu"})
    assert wireform.encode(form, other) is None
    assert _state(nats.encode(other, "binary")) == _state(nats.binary_record(other))


@given(st.binary(max_size=4) | st.sampled_from([b"", b"{", b"\xef\xbb\xbf{}", b"{\x00", b"\x00{"]))
def test_the_generated_utf8_check_says_what_the_function_says(raw: bytes) -> None:
    """`plain_utf8_code`: the expression the generated writers use instead of a call."""
    from gateway.cloudevents.bindings.common import _plain_utf8, plain_utf8_code

    assert bool(eval(plain_utf8_code("raw"), {}, {"raw": raw})) is _plain_utf8(raw)
