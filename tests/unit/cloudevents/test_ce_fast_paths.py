"""The shortcuts every received message takes agree with the full decoders.

- `detect` (what the converter asks first) says no mode exactly when `decode` finds no
  CloudEvent (and raises nothing);
- `headers.peek` reports what `headers.scan` would;
- a binary-mode record of an event rendered from received JSON carries those bytes, only
  when they are plain UTF-8.
"""

from __future__ import annotations

from typing import Any

from ce_strategies import HEADER_NAMES, HEADER_VALUES, hostile_records, mutated_records
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.cloudevents.bindings import BINDINGS, decode, encode, headers
from gateway.cloudevents.errors import CloudEventError
from gateway.cloudevents.event import CloudEvent
from gateway.record import NativeMessage


@settings(max_examples=500, deadline=None)
@given(st.one_of(hostile_records(), mutated_records()))
def test_detect_says_none_exactly_when_decode_finds_no_event(record: NativeMessage) -> None:
    mode = BINDINGS[record.protocol].detect(record)
    try:
        decoded: CloudEvent | str | None = decode(record)
    except CloudEventError:
        decoded = "raised"
    assert (mode is None) == (decoded is None), (mode, decoded)


ENTRIES = st.lists(st.one_of(
    st.fixed_dictionaries({"name": HEADER_NAMES, "value": HEADER_VALUES}),
    st.fixed_dictionaries({"name": st.sampled_from(["ce-SpecVersion", "CE_specversion",
                                                    "Content-Type", "ce_specversion"]),
                           "value": st.one_of(HEADER_VALUES, st.integers(), st.none())}),
    st.just("not an entry"),
    st.fixed_dictionaries({"name": st.integers(), "value": st.booleans()}),
), max_size=6)


@settings(max_examples=500, deadline=None)
@given(st.one_of(ENTRIES, st.none(), st.just({"a": 1})), st.sampled_from(["ce-", "ce_"]),
       st.booleans())
def test_peek_is_what_scan_sees(raw: Any, prefix: str, lower_names: bool) -> None:
    content_type, entries = headers.scan(raw, prefix, lower_names)
    assert headers.peek(raw, prefix, lower_names) == (
        content_type, headers.has_specversion(entries))


def _event(raw: bytes) -> CloudEvent:
    record = NativeMessage.from_wire("KAFKA", {}, raw, "application/json")
    return CloudEvent.trusted({"specversion": "1.0", "id": "1", "source": "/s", "type": "t",
                               "datacontenttype": "application/json"},
                              record.data, True, record.raw)


def test_binary_mode_records_carry_the_received_bytes() -> None:
    raw = b'{"amount": 1.10, "note": "caf\\u00e9"}'
    for protocol in ("KAFKA", "NATS", "HTTP", "MQTT/5.0", "AMQP/1.0"):
        record = encode(_event(raw), protocol, "binary")
        assert record.raw is raw and record.body_bytes() is raw
        assert record.body_length() == len(raw)
    structured = encode(_event(raw), "KAFKA", "structured")
    assert structured.raw is None  # a new document: serialised by whoever sends it


def test_json_in_other_encodings_is_serialised_again() -> None:
    """`json.loads` reads UTF-16 and a UTF-8 byte order mark; neither goes out as
    `application/json` as it came."""
    for raw in ('{"a": 1}'.encode("utf-16"), '{"a": 1}'.encode("utf-16-le"),
                b'\xef\xbb\xbf{"a": 1}'):
        record = encode(_event(raw), "KAFKA", "binary")
        assert record.raw is None
        assert record.body_bytes() == b'{"a":1}'


def test_a_json_body_is_serialised_once() -> None:
    """What a producer sends and what the published-bytes metric counts: one
    serialisation, kept on the record."""
    record = NativeMessage("KAFKA", {}, data={"a": [1, 2]})
    first = record.body_bytes()
    assert first == b'{"a":[1,2]}'
    assert record.body_bytes() is first and record.raw is first
    assert record.body_length() == len(first)
