"""The Kafka adapter says, while it reads a record's headers, whether the record carries a
CloudEvent (`NativeMessage.event_mode`); the binding's `detect` then takes its word
instead of reading the headers again. What it says is what the binding's own look at
the headers finds, for any headers a sender may send."""

from __future__ import annotations

from aiokafka.structs import ConsumerRecord  # type: ignore[import-untyped]
from hypothesis import given
from hypothesis import strategies as st

from adapters.kafka.record import to_record
from gateway.cloudevents.bindings import kafka
from gateway.record import UNDETECTED, NativeMessage


def _record(value: bytes, headers: list[tuple[str, bytes | None]]) -> NativeMessage:
    """The record the adapter makes of aiokafka's own record."""
    return to_record(ConsumerRecord("t", 0, 1, 0, 0, None, value, None, 0, len(value),
                                    headers))


NAMES = st.sampled_from(["content-type", "Content-Type", "ce_specversion", "CE_specversion",
                         "ce_SpecVersion", "ce-specversion", "ce_specversio", "ce_type",
                         "x-message-id", "specversion", "ce_specversionx"])
VALUES = st.sampled_from([b"application/json", b"application/cloudevents+json",
                          b"Application/CloudEvents-Batch+JSON; charset=utf-8", b"1.0",
                          b"text/plain", b"\xff", None])


@given(st.lists(st.tuples(NAMES, VALUES), max_size=4), st.sampled_from([b"{}", b"x", b""]))
def test_the_adapter_says_what_the_binding_finds(headers, body):
    record = _record(body, headers)
    assert record.event_mode != UNDETECTED
    looked = record.replace_fields(dict(record.fields))  # not marked: the binding looks
    assert looked.event_mode == UNDETECTED
    assert kafka.detect(record) == kafka.detect(looked)


def test_the_usual_records_are_marked():
    plain = _record(b"{}", [("content-type", b"application/json")])
    binary = _record(b"{}", [("ce_specversion", b"1.0")])
    structured = _record(b"{}", [("content-type", b"application/cloudevents+json")])
    assert (plain.event_mode, binary.event_mode, structured.event_mode) == (
        None, "binary", "structured")


@given(st.lists(st.tuples(NAMES, st.one_of(VALUES, st.binary(max_size=6))), max_size=4))
def test_header_values_are_text_base64_or_empty(headers):
    """The module's rule for header values, read in the same pass: valid UTF-8 as text,
    other bytes as base64 text, a header without a value as ""."""
    import base64

    def text(value: bytes | None) -> str:
        if value is None:
            return ""
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return base64.b64encode(value).decode("ascii")

    record = _record(b"{}", headers)
    expected = [{"name": name, "value": text(value)} for name, value in headers]
    assert record.fields.get("headers", []) == expected


FACT_NAMES = st.sampled_from(["content-type", "Content-Type", "CONTENT-TYPE", "content-typ",
                              "traceparent", "TraceParent", "traceparentx", "tracestate",
                              "ce_specversion", "x-message-id"])
TRACES = st.sampled_from([b"00-" + b"a" * 32 + b"-" + b"b" * 16 + b"-01", b"not-a-trace",
                          b"application/json", b"text/plain; charset=utf-8", b"\xff", None])


@given(st.lists(st.tuples(FACT_NAMES, TRACES), max_size=5))
def test_the_adapter_says_the_content_type_and_trace_parent_the_entries_hold(headers):
    """`header_facts` is what a look at the entries finds: the first value of each name,
    compared ignoring case, as the entries' text (`fastrender` then skips its look)."""
    record = _record(b"{}", headers)
    assert record.header_facts == (record.header("content-type", True),
                                   record.header("traceparent", True))


@given(st.lists(st.tuples(FACT_NAMES, TRACES), max_size=5),
       st.sampled_from([b'{"a": 1}', b"plain", b""]))
def test_a_record_renders_the_same_with_the_adapters_word_or_without(headers, body):
    from datetime import UTC, datetime

    from gateway.convert import Converter
    from gateway.definitions import read_document

    doc = {"specversion": "1.0", "messagegroups": {"g": {
        "envelope": "CloudEvents/1.0", "messages": {"m": {
            "protocol": "KAFKA", "protocoloptions": {"topic": "t"},
            "envelope": "CloudEvents/1.0",
            "envelopemetadata": {"type": {"value": "t"}, "source": {"value": "/s"}}}}}}}
    converter = Converter(read_document(doc).messages())
    record = _record(body, headers)
    unmarked = record.replace_fields(dict(record.fields))
    assert unmarked.header_facts is None  # read from the entries
    now = datetime(2026, 1, 1, tzinfo=UTC)
    marked_event = converter.convert(record, now=now).event
    assert marked_event == converter.convert(unmarked, now=now).event


@given(st.lists(st.tuples(NAMES, st.one_of(VALUES, st.binary(max_size=6))), max_size=4),
       st.sampled_from([b'{"a": 1}', b"x", b""]), st.booleans())
def test_a_record_reads_as_the_one_made_with_its_entries_up_front(headers, body, parse):
    """The adapter's record makes its `headers` field when first read
    (`PairsRecord`), parsed body or not: it reads, compares and serialises as the
    record made with the field up front, and `head` is its fields without the entries."""
    from adapters.kafka.record import to_record as kafka_record
    from gateway.record import ENTRY_FIELDS

    consumed = ConsumerRecord("t", 0, 1, 0, 0, b"k", body, None, 1, len(body), headers)
    record = kafka_record(consumed, "2026-01-01T00:00:00Z", parse=parse)
    head = dict(record.head)
    whole = dict(record.fields)  # made now
    assert {k: v for k, v in whole.items() if k not in ENTRY_FIELDS} == head
    eager = NativeMessage.from_wire("KAFKA", whole, body, record.header("content-type", True),
                                    "2026-01-01T00:00:00Z")
    assert record == eager and record.to_json() == eager.to_json()
    assert record.data == eager.data and record.payload == eager.payload  # parses now
    assert dict(record.fields) == whole
