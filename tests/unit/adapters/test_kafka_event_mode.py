"""The Kafka adapter says, while it reads a record's headers, whether the record carries a
CloudEvent (`NativeMessage.event_mode`); the binding's `detect` then takes its word
instead of reading the headers again. What it says is what the binding's own look at
the headers finds, for any headers a sender may send."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given
from hypothesis import strategies as st

from adapters.kafka.record import to_record
from gateway.cloudevents.bindings import kafka
from gateway.record import UNDETECTED


@dataclass
class _Record:  # what aiokafka's ConsumerRecord carries and the adapter reads
    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


NAMES = st.sampled_from(["content-type", "Content-Type", "ce_specversion", "CE_specversion",
                         "ce_SpecVersion", "ce-specversion", "ce_specversio", "ce_type",
                         "x-message-id", "specversion", "ce_specversionx"])
VALUES = st.sampled_from([b"application/json", b"application/cloudevents+json",
                          b"Application/CloudEvents-Batch+JSON; charset=utf-8", b"1.0",
                          b"text/plain", b"\xff", None])


@given(st.lists(st.tuples(NAMES, VALUES), max_size=4), st.sampled_from([b"{}", b"x", b""]))
def test_the_adapter_says_what_the_binding_finds(headers, body):
    record = to_record(_Record("t", 0, 1, 0, None, body, headers))
    assert record.event_mode != UNDETECTED
    looked = record.replace_fields(dict(record.fields))  # not marked: the binding looks
    assert looked.event_mode == UNDETECTED
    assert kafka.detect(record) == kafka.detect(looked)


def test_the_usual_records_are_marked():
    plain = to_record(_Record("t", 0, 1, 0, None, b"{}", [("content-type", b"application/json")]))
    binary = to_record(_Record("t", 0, 1, 0, None, b"{}", [("ce_specversion", b"1.0")]))
    structured = to_record(_Record("t", 0, 1, 0, None, b"{}",
                                   [("content-type", b"application/cloudevents+json")]))
    assert (plain.event_mode, binary.event_mode, structured.event_mode) == (
        None, "binary", "structured")
