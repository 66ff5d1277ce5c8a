"""The MQTT adapter against a real Mosquitto: round trips, settlement, sessions, restarts."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from support import asyncio_test

from adapters.mqtt import MqttConsumer, MqttProducer
from gateway.ports import AlreadySettled, Delivery, EndpointSettings, NotConnected, read_one, write
from gateway.record import NativeMessage
from harness.brokers import Mosquitto

TIMEOUT = 5.0



def _uid() -> str:
    return uuid.uuid4().hex[:10]


def _consumer(url: str, topic: str, client_id: str, **options: Any) -> MqttConsumer:
    options.setdefault("filters", [topic])
    return MqttConsumer(EndpointSettings(url, client_id=client_id, options=options))


def _producer(url: str, **options: Any) -> MqttProducer:
    return MqttProducer(EndpointSettings(url, options=options))


def _record(protocol: str, topic: str, **fields: Any) -> NativeMessage:
    data = fields.pop("data", None)
    payload = fields.pop("payload", None)
    body: dict[str, Any] = {"payload": payload} if payload is not None else {"data": data}
    return NativeMessage(protocol, {"topic_name": topic, "qos": 1, **fields}, **body)


async def _read(consumer: MqttConsumer) -> Delivery:
    async with asyncio.timeout(TIMEOUT):
        return await read_one(consumer)


async def _send(url: str, *records: NativeMessage, protocol: str = "5.0") -> None:
    producer = _producer(url, protocol=protocol)
    await producer.connect()
    try:
        outcomes = await write(producer, records)
        assert all(o.delivered for o in outcomes), outcomes
    finally:
        await producer.aclose()


@asyncio_test
async def test_round_trip_mqtt5_properties_json_and_binary(mosquitto: Mosquitto) -> None:
    topic = f"xrgw/rt5/{_uid()}"
    consumer = _consumer(mosquitto.url, f"{topic}/+", f"c-{_uid()}")
    await consumer.connect()
    props = [{"name": "eventType", "value": "sale"}, {"name": "eventType", "value": "2"}]
    sent = [
        _record(
            "MQTT/5.0",
            f"{topic}/json",
            data={"amount": 12.5},
            user_properties=props,
            response_topic="reply/here",
            correlation_data="corr-1",
            message_expiry_interval=300,
        ),
        _record("MQTT/5.0", f"{topic}/bin", payload=b"\x00\xffraw", content_type="image/png"),
        # No content type: JSON text is still only bytes unless it is an object/array.
        _record("MQTT/5.0", f"{topic}/scalar", payload=b"21.5"),
    ]
    await _send(mosquitto.url, *sent)
    got = [await _read(consumer) for _ in sent]
    try:
        first, binary, scalar = (d.message for d in got)
        assert first.protocol == "MQTT/5.0"
        assert first.data == {"amount": 12.5}
        assert first.get("user_properties") == props
        assert first.get("content_type") == "application/json"
        assert first.get("response_topic") == "reply/here"
        assert first.get("correlation_data") == "corr-1"
        expiry = first.get("message_expiry_interval")
        assert isinstance(expiry, int) and 0 < expiry <= 300  # counts down in the broker
        assert first.get("qos") == 1 and first.get("retain") is False
        assert binary.payload == b"\x00\xffraw" and not binary.has_json_data
        assert binary.get("content_type") == "image/png"
        assert scalar.payload == b"21.5"
    finally:
        for delivery in got:
            await delivery.ack()
        await consumer.aclose()
    with pytest.raises(AlreadySettled):
        await got[0].ack()


@asyncio_test
async def test_round_trip_mqtt311_json_detection(mosquitto: Mosquitto) -> None:
    topic = f"xrgw/rt311/{_uid()}"
    consumer = _consumer(mosquitto.url, topic, f"c-{_uid()}", protocol="3.1.1")
    await consumer.connect()
    await _send(
        mosquitto.url,
        _record("MQTT/3.1.1", topic, data={"a": [1, 2]}),
        _record("MQTT/3.1.1", topic, payload=b"not json {"),
        protocol="3.1.1",
    )
    try:
        json_msg, raw_msg = (await _read(consumer)), (await _read(consumer))
        assert json_msg.message.protocol == "MQTT/3.1.1"
        assert json_msg.message.data == {"a": [1, 2]}
        assert set(json_msg.message.fields) == {"topic_name", "qos", "retain"}
        assert raw_msg.message.payload == b"not json {"
        await json_msg.ack()
        await raw_msg.ack()
    finally:
        await consumer.aclose()


@pytest.mark.parametrize("protocol", ["5.0", "3.1.1"])
@asyncio_test
async def test_unacked_redelivered_after_restart_acked_not(
    mosquitto: Mosquitto, protocol: str
) -> None:
    topic, client_id = f"xrgw/redeliver/{_uid()}", f"c-{_uid()}"
    consumer = _consumer(mosquitto.url, topic, client_id, protocol=protocol)
    await consumer.connect()
    assert consumer.session_present is False
    await _send(
        mosquitto.url,
        _record("MQTT/5.0", topic, data={"n": 1}),
        _record("MQTT/5.0", topic, data={"n": 2}),
    )
    one, two = await _read(consumer), await _read(consumer)
    await one.ack()
    await asyncio.sleep(0.2)  # let the PUBACK leave before the connection goes
    await consumer.aclose()  # `two` is never settled: the gateway "crashed"

    again = _consumer(mosquitto.url, topic, client_id, protocol=protocol)
    await again.connect()
    try:
        assert again.session_present is True
        redelivered = await _read(again)
        assert redelivered.message.data == {"n": 2}
        await redelivered.ack()
        with pytest.raises(TimeoutError):  # n=1 was acked: not seen again
            async with asyncio.timeout(0.5):
                await read_one(again)
    finally:
        await again.aclose()
    assert not two.settled


@asyncio_test
async def test_messages_published_while_down_arrive_after_reconnect(mosquitto: Mosquitto) -> None:
    topic, client_id = f"xrgw/offline/{_uid()}", f"c-{_uid()}"
    consumer = _consumer(mosquitto.url, topic, client_id)
    await consumer.connect()
    await consumer.aclose()
    await _send(mosquitto.url, *(_record("MQTT/5.0", topic, data={"n": i}) for i in range(3)))
    consumer = _consumer(mosquitto.url, topic, client_id)
    await consumer.connect()
    try:
        got = [await _read(consumer) for _ in range(3)]
        assert [d.message.data for d in got] == [{"n": 0}, {"n": 1}, {"n": 2}]
        for delivery in got:
            await delivery.ack()
    finally:
        await consumer.aclose()


@asyncio_test
async def test_nack_with_retry_leads_to_redelivery(mosquitto: Mosquitto) -> None:
    topic = f"xrgw/nack/{_uid()}"
    consumer = _consumer(mosquitto.url, topic, f"c-{_uid()}")
    await consumer.connect()
    try:
        await _send(mosquitto.url, _record("MQTT/5.0", topic, data={"n": 1}))
        first = await _read(consumer)
        await first.nack("downstream unavailable")
        with pytest.raises(NotConnected):  # the engine's cue to reconnect
            await _read(consumer)
        await consumer.connect()
        again = await _read(consumer)
        assert again.message.data == {"n": 1}
        await again.ack()
    finally:
        await consumer.aclose()


@asyncio_test
async def test_producer_rejects_record_without_topic(mosquitto: Mosquitto) -> None:
    producer = _producer(mosquitto.url)
    await producer.connect()
    try:
        [outcome] = await write(producer, [NativeMessage("MQTT/5.0", {}, {"x": 1})])
        assert not outcome.delivered and not outcome.retryable
    finally:
        await producer.aclose()


@asyncio_test
async def test_producer_fails_fast_when_broker_down_then_reconnects(mosquitto: Mosquitto) -> None:
    topic = f"xrgw/down/{_uid()}"
    producer = _producer(mosquitto.url, connect_timeout=1, publish_timeout=2, reconnect_max=0.5)
    await producer.connect()
    was_connected = producer.connected  # (a local, so mypy does not narrow the property)
    await asyncio.to_thread(mosquitto.stop)
    try:
        async with asyncio.timeout(TIMEOUT):
            [outcome] = await write(producer, [_record("MQTT/5.0", topic, data={"n": 1})])
        assert was_connected and not producer.connected
        assert not outcome.delivered and outcome.retryable
    finally:
        await asyncio.to_thread(mosquitto.start)
    try:
        async with asyncio.timeout(TIMEOUT):
            while True:
                [outcome] = await write(producer, [_record("MQTT/5.0", topic, data={"n": 2})])
                if outcome.delivered:
                    break
                await asyncio.sleep(0.1)
        assert producer.connected
    finally:
        await producer.aclose()
