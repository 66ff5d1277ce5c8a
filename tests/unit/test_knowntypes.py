"""The content-type facts kept per type (`gateway/json/knowntypes.py`): the same answers as
working them out, and bounded in number and length (the keys are a sender's text)."""

from __future__ import annotations

import pytest

from gateway.cloudevents import mediatype
from gateway.json.knowntypes import MAX_LENGTH, MAX_TYPES, keep
from gateway.record import NativeMessage, is_json_media_type


@pytest.mark.parametrize(("content_type", "json", "cloudevents"), [
    ("application/json", True, False),
    ("Application/JSON; charset=utf-8", True, False),
    ("text/json", True, False),
    ("application/vnd.x+json", True, False),
    ("application/cloudevents+json", True, True),
    ("APPLICATION/CLOUDEVENTS-BATCH+JSON", True, True),
    ("text/plain", False, False),
    ("application/jsonx", False, False),
])
def test_answers_are_the_same_asked_once_or_again(content_type: str, json: bool,
                                                  cloudevents: bool) -> None:
    for _ in range(2):  # worked out, then kept
        assert is_json_media_type(content_type) is json
        assert mediatype.is_cloudevents(content_type) is cloudevents


def test_a_table_keeps_at_most_its_bound_of_types() -> None:
    table: dict[str, bool] = {}
    for n in range(MAX_TYPES + 50):
        keep(table, f"application/x-{n}", False)
    assert len(table) == MAX_TYPES
    assert "application/x-1030" not in table


def test_a_long_type_is_worked_out_but_not_kept() -> None:
    long_type = "application/json; x=" + "y" * MAX_LENGTH
    table: dict[str, bool] = {}
    keep(table, long_type, True)
    assert long_type not in table
    assert is_json_media_type(long_type)
    record = NativeMessage.from_wire("KAFKA", {}, b'{"a": 1}', long_type)
    assert record.data == {"a": 1}


@pytest.mark.parametrize(("value", "text"), [
    (b"application/json", "application/json"),
    (b"\xff\xfejson", "//5qc29u"),  # not UTF-8: its base64, as the entry's text says it
])
def test_a_kafka_content_type_reads_the_same_seen_once_or_again(
        monkeypatch: pytest.MonkeyPatch, value: bytes, text: str) -> None:
    """The Kafka consumer keeps each content-type value's text (bytes on the wire): the
    record's content type and its `headers` entry agree, the first time and after."""
    from aiokafka.structs import ConsumerRecord  # type: ignore[import-untyped]

    from adapters.kafka import record as kafka_record

    table: dict[bytes, tuple[str, str | None]] = {}
    monkeypatch.setattr(kafka_record, "_TYPE_FACTS", table)
    for offset in range(2):
        consumed = ConsumerRecord("t", 0, offset, 0, 0, b"k", b"{}", None, 1, 2,
                                  (("content-type", value),))
        record = kafka_record.to_record(consumed)
        assert record.header_facts == (text, None)
        assert record.fields["headers"] == [{"name": "content-type", "value": text}]
    assert table == {value: (text, None)}
