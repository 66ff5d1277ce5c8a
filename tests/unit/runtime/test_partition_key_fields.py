"""Partition keys read from the source's fields (gateway/runtime/keys.py): only text
values are keys, and a missing or malformed container of named fields means no key."""

from __future__ import annotations

import pytest

from gateway.record import NativeMessage
from gateway.runtime.keys import PartitionKeys


@pytest.mark.parametrize(("fields", "key"), [
    ({}, None),  # no properties at all
    ({"properties": None}, None),
    ({"properties": "group-id"}, None),  # not a section
    ({"properties": [{"name": "group-id", "value": "g"}]}, None),
    ({"properties": {"group-id": 7, "subject": "s"}}, "s"),  # a number is no key
    ({"properties": {"group-id": {"id": "g"}, "subject": 5}}, None),
    ({"properties": {"group-id": "", "subject": "s"}}, "s"),  # empty: the next one
    ({"properties": {"group-id": "g", "subject": "s"}}, "g"),
])
def test_amqp_keys_are_text_values_of_the_properties_section(
        fields: dict[str, object], key: str | None) -> None:
    record = NativeMessage("AMQP/1.0", fields)  # type: ignore[arg-type]
    assert PartitionKeys().key(record, {}) == key


@pytest.mark.parametrize(("topic", "key"), [
    ("a/b", "a/b"), (12, None), (None, None), (["a"], None), ("", None)])
def test_an_mqtt_topic_is_a_key_only_when_it_is_text(topic: object, key: str | None) -> None:
    record = NativeMessage("MQTT/5.0", {"topic_name": topic})  # type: ignore[dict-item]
    assert PartitionKeys().key(record, {}) == key
