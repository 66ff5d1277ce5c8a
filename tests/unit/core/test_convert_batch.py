"""`Converter.convert_batch` and the per-message pieces it leans on.

- a batch converts exactly as `convert_all` converts each record, in order, whatever
  mix of native messages, CloudEvents, HTTP batches, failures and protocols it holds;
- records without a receive time share one clock reading per batch;
- name-based ids are `uuid.uuid5` of the same identity (Spark computes them in SQL
  from the same formula), read by the generated per-protocol readers as the profile
  says; random ids are version-4 UUIDs.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from datetime import UTC, datetime
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.convert import Conversion, Converter
from gateway.envelope.ids import ID_NAMESPACE, name_uuid, native_identity, random_uuid
from gateway.protocols import PROFILES, find_profile
from gateway.record import NativeMessage

from .defs import CASHIER, define, opt, prop

NOW = datetime(2026, 11, 21, 9, 0, tzinfo=UTC)
KAFKA_DEF = define("k", "KAFKA", [opt("topic", "orders"), opt("key", "{region}",
                                                                type="uritemplate")],
                   {"type": prop("order"), "source": prop("/regions/{region}")})
CE_DEF = define("ce", None, None, {"type": prop("com.example.{kind}", type="uritemplate"),
                                   "source": prop("/s")})
CONVERTER = Converter([CASHIER, KAFKA_DEF, CE_DEF])


def sale(store: str, received_at: str | None = "2026-11-21T09:00:00Z") -> NativeMessage:
    return NativeMessage.from_wire(
        "MQTT/5.0", {"topic_name": f"/store/{store}/cashierdesk/3",
                     "user_properties": [{"name": "eventType", "value": "sale"}]},
        b'{"amount": 1}', None, received_at)


def kafka(key: Any, offset: int = 7) -> NativeMessage:
    return NativeMessage("KAFKA", {"topic": "orders", "partition": 0, "offset": offset,
                                   "key": key}, data={"n": 1})


def binary_ce(kind: str) -> NativeMessage:
    return NativeMessage("KAFKA", {"topic": "x", "headers": [
        {"name": "ce_specversion", "value": "1.0"}, {"name": "ce_id", "value": "1"},
        {"name": "ce_source", "value": "/s"}, {"name": "ce_type", "value": f"com.example.{kind}"},
    ]}, data={})


def http_batch(members: list[dict[str, Any]]) -> NativeMessage:
    return NativeMessage("HTTP", {"method": "POST", "path": "/", "headers": [
        {"name": "Content-Type", "value": "application/cloudevents-batch+json"}]},
        payload=json.dumps(members).encode())


def shown(conversion: Conversion) -> dict[str, Any]:
    """The JSON form, with a random id replaced by its version."""
    out = conversion.to_json()
    event = out.get("cloudevent")
    if isinstance(event, dict) and conversion.event is not None and (
            native_identity(conversion.record) is None and conversion.source_event is None):
        event["id"] = uuid.UUID(str(event["id"])).version
    return out


RECORDS = st.sampled_from([
    sale("12"), sale("12", None), sale(""), sale("a b"), kafka("eu"), kafka(""), kafka(3),
    kafka("eu\x00"), binary_ce("x"), binary_ce(""),
    http_batch([{"specversion": "1.0", "id": "1", "source": "/s", "type": "com.example.a"},
                {"specversion": "1.0", "id": "2", "source": "/s", "type": "nope"}]),
    http_batch([]), http_batch([{"specversion": "2.0"}]),
    NativeMessage("MQTT/5.0", {"topic_name": "/elsewhere"}, payload=b"21.5"),
    NativeMessage("NATS", {"subject": "a.b"}),
])


@settings(max_examples=200, deadline=None)
@given(st.lists(RECORDS, max_size=12), st.booleans())
def test_a_batch_converts_as_each_record_does(records: list[NativeMessage],
                                              explain: bool) -> None:
    batch = CONVERTER.convert_batch(records, explain=explain, now=NOW)
    one_by_one = [CONVERTER.convert_all(r, explain=explain, now=NOW) for r in records]
    assert [[shown(c) for c in cs] for cs in batch] == [
        [shown(c) for c in cs] for cs in one_by_one]
    assert [[c.record for c in cs] for cs in batch] == [
        [c.record for c in cs] for cs in one_by_one]


def test_records_without_a_receive_time_share_the_batch_clock() -> None:
    converted = CONVERTER.convert_batch([sale("1", None), sale("2", None), sale("3")])
    times = [c.event.get_attributes()["time"] for [c] in converted if c.event is not None]
    assert times[0] is times[1]  # one reading for the batch
    assert times[2] == datetime(2026, 11, 21, 9, 0, tzinfo=UTC)  # the record's own
    assert CONVERTER.convert_batch([]) == []


def test_convert_batch_renders_what_convert_renders() -> None:
    [[batched]] = CONVERTER.convert_batch([kafka("eu")], now=NOW)
    single = CONVERTER.convert(kafka("eu"), now=NOW)
    assert batched.event == single.event  # name-based id: the same for a redelivery
    assert batched.match.context == single.match.context == {"region": "eu"}


# -- ids ----------------------------------------------------------------------------------
def uuid5_reference(name: str) -> str:
    """`uuid.uuid5`, and for text with lone surrogates (no UTF-8 form) SHA-1 over their
    `surrogatepass` bytes, as before."""
    try:
        return str(uuid.uuid5(ID_NAMESPACE, name))
    except UnicodeEncodeError:
        data = ID_NAMESPACE.bytes + name.encode("utf-8", "surrogatepass")
        digest = hashlib.sha1(data, usedforsecurity=False).digest()
        return str(uuid.UUID(bytes=digest[:16], version=5))


@given(st.text())
def test_name_based_ids_are_uuid5(name: str) -> None:
    assert name_uuid(name) == uuid5_reference(name)


def test_random_ids_are_version_4() -> None:
    ids = {random_uuid() for _ in range(1000)}
    assert len(ids) == 1000
    for text in ids:
        parsed = uuid.UUID(text)
        assert str(parsed) == text and parsed.version == 4 and parsed.variant == uuid.RFC_4122


def identity_reference(record: NativeMessage) -> str | None:
    """`native_identity` as the profile table describes it, one part at a time."""
    prof = find_profile(record.protocol)
    if prof is None or prof.identity is None:
        return None
    values = []
    for part in prof.identity.parts:
        ref = part.ref
        if ref.name is None:
            value = record.fields.get(ref.field, "" if part.need == "optional" else None)
        elif prof.metadata is not None and ref.field == prof.metadata.field:
            value = record.metadata(ref.name)
        else:
            section = record.fields.get(ref.field)
            value = section.get(ref.name) if isinstance(section, dict) else None
        if (part.need == "present" and value is None) or (
                part.need == "non-empty" and not value):
            return None
        values.append(value)
    return f"{prof.identity.prefix}:{'/'.join(str(v) for v in values)}"


FIELD_VALUES = st.one_of(st.none(), st.text(max_size=5), st.integers(), st.booleans(),
                         st.just(""), st.just(0))


@settings(max_examples=300)
@given(st.sampled_from([p.name for p in PROFILES]), st.data())
def test_identity_readers_follow_the_profile(protocol: str, data: st.DataObject) -> None:
    names = ["topic", "partition", "offset", "topic_name", "correlation_data", "stream",
             "sequence"]
    fields: dict[str, Any] = {n: data.draw(FIELD_VALUES) for n in names if data.draw(
        st.booleans())}
    if data.draw(st.booleans()):
        fields["properties"] = {"message-id": data.draw(FIELD_VALUES)}
    if data.draw(st.booleans()):
        fields["headers"] = [{"name": "Idempotency-Key", "value": data.draw(FIELD_VALUES)}]
    record = NativeMessage(protocol, fields)
    assert native_identity(record) == identity_reference(record)
