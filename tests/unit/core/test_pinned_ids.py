"""CloudEvent ids pinned as literals, independent of the code under test.

The rule (README, gateway/envelope/ids.py): a record with a native identity gets
uuid5(N, "<prefix>:<part>/<part>..."), N = uuid5(NAMESPACE_URL, "urn:xrgw:cloudevents:id").
Every expected value below was worked out once with Python's own `uuid.uuid5` and written
down: nothing here imports the namespace or the identity table, so a change of namespace,
of a protocol's identity parts (Kafka without the partition, NATS without the stream, MQTT
without the topic) or of how the parts are found (the Idempotency-Key header's name is
case-insensitive) fails here.
"""

import uuid
from pathlib import Path

import pytest

from gateway.convert import Converter
from gateway.definitions import load_catalog
from gateway.envelope.ids import event_id
from gateway.record import NativeMessage

EXAMPLES = Path(__file__).resolve().parents[3] / "config" / "examples"

NAMESPACE = "5058e238-2814-5bd8-a381-7a626d1cba1b"  # uuid5(NAMESPACE_URL, "urn:xrgw:...:id")

KAFKA = {"protocol": "KAFKA", "topic": "payments", "partition": 3, "offset": 42, "key": "acc-42",
         "headers": [{"name": "kind", "value": "authorized"}, {"name": "region", "value": "eu"}],
         "data": {"amount": 19.99, "currency": "EUR"}}
AMQP = {"protocol": "AMQP/1.0",
        "properties": {"subject": "o-1001", "message-id": "order-7",
                       "content-type": "application/json"},
        "application-properties": {"event": "order.placed", "shop": "berlin"},
        "data": {"total": 99.9}}
NATS = {"protocol": "NATS", "subject": "sensors.hamburg.pump-7.sample", "stream": "SENSORS",
        "sequence": 17, "data": {"rpm": 1450}}
MQTT = {"protocol": "MQTT/5.0", "topic_name": "devices/d-17/telemetry/temperature", "qos": 1,
        "correlation_data": "c-1", "user_properties": [{"name": "schema", "value": "reading.v1"}],
        "data": {"value": 21.5}}
HTTP = {"protocol": "HTTP", "method": "POST", "path": "/hooks/acme/issues",
        "headers": [{"name": "X-Event", "value": "opened"},
                    {"name": "IDEMPOTENCY-key", "value": "k-1"}],
        "data": {"issue": 17}}

# (record, example catalog, identity hashed, expected id)
PINNED = [
    (KAFKA, "kafka-payments", "kafka:payments/3/42", "171d8389-a9a3-56c6-b95e-262014dc9c29"),
    (AMQP, "amqp-orders", "amqp:order-7", "e88cd3c3-7dcd-525e-a941-df585f28484b"),
    (NATS, "nats-sensors", "nats:SENSORS/17", "6fa999b1-e3b2-599f-8b2a-3b0e0c4ca615"),
    (MQTT, "mqtt-telemetry", "mqtt:devices/d-17/telemetry/temperature/c-1",
     "ac5f118f-7081-5c71-8b37-0f4405916609"),
    (HTTP, "http-webhooks", "http:k-1", "812c3af5-df1b-58fc-a27a-9ca06fcff268"),
]
IDS = [p[0]["protocol"] for p in PINNED]


def test_the_namespace_literal_is_the_documented_derivation():
    # Guards the literals below: if this fails, the test file is wrong, not the code.
    assert str(uuid.uuid5(uuid.NAMESPACE_URL, "urn:xrgw:cloudevents:id")) == NAMESPACE
    for _, _, identity, expected in PINNED:
        assert str(uuid.uuid5(uuid.UUID(NAMESPACE), identity)) == expected


@pytest.mark.parametrize(("record", "catalog", "identity", "expected"), PINNED, ids=IDS)
def test_event_id_of_a_native_identity(record, catalog, identity, expected):
    assert event_id(NativeMessage.from_json(record)) == expected


@pytest.mark.parametrize(("record", "catalog", "identity", "expected"), PINNED, ids=IDS)
def test_converted_cloudevent_carries_the_pinned_id(record, catalog, identity, expected):
    """Through the whole conversion (matcher, generated renderer), twice: a redelivery."""
    defs = load_catalog([EXAMPLES / f"{catalog}.xreg.json"])
    assert not defs.errors
    converter = Converter(defs.messages())
    for _ in range(2):
        result = converter.convert(NativeMessage.from_json(record)).to_json()
        assert result["match"] is not None, result
        assert result["cloudevent"]["id"] == expected


def _random_v4(record) -> None:
    first, second = (event_id(NativeMessage.from_json(record)) for _ in range(2))
    assert first != second
    assert uuid.UUID(first).version == 4


@pytest.mark.parametrize(("record", "missing"), [
    (KAFKA, "partition"), (KAFKA, "offset"), (KAFKA, "topic"),
    (AMQP, "message-id"), (NATS, "stream"), (NATS, "sequence"), (MQTT, "correlation_data"),
])
def test_an_identity_missing_a_part_gets_a_random_id(record, missing):
    trimmed = {**record}
    if missing in trimmed:
        del trimmed[missing]
    else:
        trimmed["properties"] = {k: v for k, v in record["properties"].items() if k != missing}
    _random_v4(trimmed)


def test_mqtt_identity_needs_non_empty_correlation_data_and_reads_the_topic():
    _random_v4({**MQTT, "correlation_data": ""})
    other_topic = {**MQTT, "topic_name": "devices/d-18/telemetry/temperature"}
    # "mqtt:devices/d-18/telemetry/temperature/c-1"
    assert event_id(NativeMessage.from_json(other_topic)) == "7016ee4d-f748-5d73-b287-2266592c005e"


def test_mqtt_3_1_1_and_nats_core_have_no_identity():
    _random_v4({"protocol": "MQTT/3.1.1", "topic_name": MQTT["topic_name"], "qos": 1,
                "data": {"value": 21.5}})
    _random_v4({k: v for k, v in NATS.items() if k not in ("stream", "sequence")})


def test_http_idempotency_key_is_found_whatever_its_spelling():
    for name in ("Idempotency-Key", "idempotency-key", "IDEMPOTENCY-KEY"):
        record = {**HTTP, "headers": [{"name": name, "value": "k-1"}]}
        assert event_id(NativeMessage.from_json(record)) == "812c3af5-df1b-58fc-a27a-9ca06fcff268"
    _random_v4({**HTTP, "headers": [{"name": "Idempotency-Key", "value": ""}]})
    _random_v4({**HTTP, "headers": [{"name": "Idempotency-Keys", "value": "k-1"}]})
