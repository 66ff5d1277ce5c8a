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
