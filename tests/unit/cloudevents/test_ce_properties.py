"""Property tests: round trips of generated events, and decoders on hostile input."""

from __future__ import annotations

import contextlib
import json

from ce_strategies import hostile_records, mutated_records, valid_events
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.cloudevents.bindings import decode, decode_batch, detect_mode, encode
from gateway.cloudevents.errors import CloudEventError
from gateway.cloudevents.event import CloudEvent
from gateway.cloudevents.jsonformat import parse_batch, parse_event, serialize_event
from gateway.protocols import AMQP, HTTP, KAFKA, MQTT5, MQTT311, NATS
from gateway.record import NativeMessage

COMBINATIONS = [
    (protocol, mode)
    for protocol in (HTTP, KAFKA, MQTT5, MQTT311, AMQP, NATS)
    for mode in ("binary", "structured")
    if (protocol, mode) != (MQTT311, "binary")
]


def _expected(event: CloudEvent, mode: str) -> CloudEvent:
    if (
        mode == "binary"
        and event.has_data
        and not isinstance(event.data, bytes)
        and event.datacontenttype is None
    ):
        return event.with_attributes(datacontenttype="application/json")
    return event


@settings(max_examples=300)
@given(valid_events(), st.sampled_from(COMBINATIONS))
def test_every_valid_event_round_trips(event: CloudEvent, combination: tuple[str, str]) -> None:
    protocol, mode = combination
    record = encode(event, protocol, mode)  # type: ignore[arg-type]
    assert detect_mode(record) == mode
    wire = NativeMessage.from_line(record.to_line())
    assert decode(wire, event.attribute_types()) == _expected(event, mode)


@settings(max_examples=300)
@given(valid_events())
def test_json_format_round_trips(event: CloudEvent) -> None:
    assert parse_event(serialize_event(event), event.attribute_types()) == event


@settings(max_examples=500)
@given(st.one_of(hostile_records(), mutated_records()))
def test_decoders_raise_only_cloudevent_errors(record: NativeMessage) -> None:
    try:
        mode = detect_mode(record)
        event = decode(record)
    except CloudEventError:
        return
    if event is not None:
        assert mode in ("binary", "structured")
        # Whatever was accepted is a valid event: it re-validates and re-encodes.
        CloudEvent.create(dict(event.attributes), event.data, has_data=event.has_data)
        serialize_event(event)
    else:
        assert mode in (None, "batch")


@settings(max_examples=300)
@given(hostile_records())
def test_decode_batch_raises_only_cloudevent_errors(record: NativeMessage) -> None:
    with contextlib.suppress(CloudEventError):
        decode_batch(record)


@given(st.one_of(st.binary(max_size=200), st.text(max_size=200)))
def test_json_parsers_raise_only_cloudevent_errors(text: bytes | str) -> None:
    for parse in (parse_event, parse_batch):
        with contextlib.suppress(CloudEventError):
            parse(text)


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=10), inner),
    max_leaves=12,
)


@given(
    st.dictionaries(
        st.sampled_from(
            [
                "specversion",
                "id",
                "type",
                "source",
                "time",
                "subject",
                "dataschema",
                "datacontenttype",
                "data",
                "data_base64",
                "ext",
                "Ext",
            ]
        ),
        JSONISH,
    )
)
def test_json_events_are_accepted_or_rejected_cleanly(obj: dict[str, object]) -> None:
    try:
        text = json.dumps(obj)
    except ValueError:
        return
    try:
        event = parse_event(text)
    except CloudEventError as exc:
        assert exc.problems
        return
    assert parse_event(serialize_event(event)) == event
