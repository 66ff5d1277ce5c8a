"""The AMQP 1.0 adapter against a real RabbitMQ 3.x (AMQP 1.0 plugin, v1 addresses)."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest
from support import asyncio_test

from adapters.amqp import AmqpConsumer, AmqpProducer
from gateway.ports import AlreadySettled, Delivery, EndpointSettings, NotConnected, read_one, write
from gateway.record import NativeMessage
from harness.brokers import RabbitMQ, free_port

TIMEOUT = 5.0



def _queue() -> str:
    return f"/queue/xrgw-{uuid.uuid4().hex[:10]}"


def _consumer(url: str, node: str, **options: Any) -> AmqpConsumer:
    return AmqpConsumer(EndpointSettings(url, options={"node": node, **options}))


def _producer(url: str, **options: Any) -> AmqpProducer:
    return AmqpProducer(EndpointSettings(url, options=options))


def _record(
    data: Any = None, *, payload: bytes | None = None, app: Any = None, **fields: Any
) -> NativeMessage:
    if app is not None:
        fields["application-properties"] = app
    if payload is not None:
        return NativeMessage("AMQP/1.0", fields, payload=payload)
    return NativeMessage("AMQP/1.0", fields, data)


async def _read(consumer: AmqpConsumer, timeout: float = TIMEOUT) -> Delivery:
    async with asyncio.timeout(timeout):
        return await read_one(consumer)


async def _nothing_more(consumer: AmqpConsumer) -> None:
    with pytest.raises(TimeoutError):
        await _read(consumer, 0.5)


async def _send(url: str, node: str, *records: NativeMessage) -> None:
    producer = _producer(url, node=node)
    await producer.connect()
    try:
        outcomes = await write(producer, records)
        assert all(o.delivered for o in outcomes), outcomes
    finally:
        await producer.aclose()


@asyncio_test
async def test_round_trip_properties_json_and_binary(rabbitmq: RabbitMQ) -> None:
    node = _queue()
    consumer = _consumer(rabbitmq.url, node)
    await consumer.connect()
    app = {"eventType": "sale", "count": 3, "final": True}
    sent = [
        _record(
            {"amount": 12.5},
            properties={"message-id": "m-1", "subject": "store/12", "correlation-id": "c-1"},
            app=app,
        ),
        _record(payload=b"\x00\xffraw", properties={"content-type": "image/png"}),
        # No content type: JSON text is bytes unless it is an object/array.
        _record(payload=b"21.5"),
        _record(payload=b'{"a": [1]}', header={"priority": 7, "durable": False}),
    ]
    await _send(rabbitmq.url, node, *sent)
    got = [await _read(consumer) for _ in sent]
    try:
        first, binary, scalar, detected = (d.message for d in got)
        assert first.protocol == "AMQP/1.0" and first.data == {"amount": 12.5}
        assert first.get("application-properties") == app
        assert first.get("properties") == {
            "message-id": "m-1",
            "subject": "store/12",
            "correlation-id": "c-1",
            "content-type": "application/json",
        }
        header = first.get("header")
        assert isinstance(header, dict) and header["durable"] is True
        assert first.content_type == "application/json" and first.received_at
        assert binary.payload == b"\x00\xffraw" and not binary.has_json_data
        assert binary.content_type == "image/png"
        assert scalar.payload == b"21.5"
        assert detected.data == {"a": [1]}
        header = detected.get("header")
        assert isinstance(header, dict)
        assert header["priority"] == 7 and header["durable"] is False
        # The JSON form is what the gateway stores and replays: it must survive a trip.
        assert NativeMessage.from_json(first.to_json()) == first
    finally:
        for delivery in got:
            await delivery.ack()
        await consumer.aclose()
    with pytest.raises(AlreadySettled):
        await got[0].ack()


@asyncio_test
async def test_to_property_picks_the_address_and_times_are_rfc3339(rabbitmq: RabbitMQ) -> None:
    node, other = _queue(), _queue()
    consumer = _consumer(rabbitmq.url, other)
    await consumer.connect()
    # The record's `to` wins over the producer's node; a producer without node works.
    created = "2024-05-01T12:30:00.250Z"
    await _send(
        rabbitmq.url, node, _record({"n": 1}, properties={"to": other, "creation-time": created})
    )
    try:
        delivery = await _read(consumer)
        props = delivery.message.get("properties")
        assert isinstance(props, dict)
        assert props["to"] == other and props["creation-time"] == created
        await delivery.ack()
    finally:
        await consumer.aclose()


@asyncio_test
async def test_nack_with_retry_releases_and_redelivers(rabbitmq: RabbitMQ) -> None:
    # (nack_outcome=modified is not tested: RabbitMQ 3.x refuses that disposition.)
    node = _queue()
    consumer = _consumer(rabbitmq.url, node)
    await consumer.connect()
    try:
        await _send(rabbitmq.url, node, _record({"n": 1}))
        first = await _read(consumer)
        await first.nack("downstream unavailable")
        again = await _read(consumer)  # same connection: no reconnect needed
        assert again.message.data == {"n": 1}
        await again.ack()
        await _nothing_more(consumer)
        assert consumer.connected
    finally:
        await consumer.aclose()


@asyncio_test
async def test_bounded_credit(rabbitmq: RabbitMQ) -> None:
    node = _queue()
    consumer = _consumer(rabbitmq.url, node, max_in_flight=3)
    await consumer.connect()
    try:
        await _send(rabbitmq.url, node, *(_record({"n": i}) for i in range(6)))
        held = [await _read(consumer) for _ in range(3)]
        await _nothing_more(consumer)  # 3 unsettled: read() waits
        assert consumer.unsettled == 3
        # The broker sent no more than the credit: nothing waits in the buffer.
        assert consumer.buffered == 0
        await held[0].ack()
        fourth = await _read(consumer)
        assert fourth.message.data == {"n": 3}
        for delivery in [*held[1:], fourth]:
            await delivery.ack()
        rest = [await _read(consumer) for _ in range(2)]
        assert [d.message.data for d in rest] == [{"n": 4}, {"n": 5}]
        for delivery in rest:
            await delivery.ack()
    finally:
        await consumer.aclose()


@asyncio_test
async def test_unaccepted_messages_come_back_after_consumer_restart(rabbitmq: RabbitMQ) -> None:
    node = _queue()
    consumer = _consumer(rabbitmq.url, node)
    await consumer.connect()
    await _send(rabbitmq.url, node, _record({"n": 1}), _record({"n": 2}))
    one, two = await _read(consumer), await _read(consumer)
    await one.ack()
    await asyncio.sleep(0.2)  # let the disposition leave before the connection goes
    await consumer.aclose()  # `two` is never settled: the gateway "crashed"

    again = _consumer(rabbitmq.url, node)
    await again.connect()
    try:
        redelivered = await _read(again)
        assert redelivered.message.data == {"n": 2}
        await redelivered.ack()  # harmless for the stale one: nothing is sent
        await two.ack()
        await _nothing_more(again)  # n=1 was accepted: not seen again
    finally:
        await again.aclose()


@asyncio_test
async def test_producer_bad_records_and_refused_address(rabbitmq: RabbitMQ) -> None:
    node = _queue()
    producer = _producer(rabbitmq.url)  # no node
    await producer.connect()
    try:
        no_address, bad_header, refused, good = await write(producer,
            [
                _record({"x": 1}),
                _record({"x": 1}, properties={"to": node}, header={"priority": "high"}),
                _record({"x": 1}, properties={"to": "/exchange/xrgw-missing/key"}),
                _record({"x": 1}, properties={"to": node}),
            ]
        )
        for outcome in (no_address, bad_header, refused):
            assert not outcome.delivered and not outcome.retryable, outcome
        assert "not-found" in (refused.reason or "")
        assert good.delivered  # a refused address does not disturb the others
    finally:
        await producer.aclose()


@asyncio_test
async def test_unreachable_broker_fails_fast() -> None:
    url = f"amqp://127.0.0.1:{free_port()}"
    consumer = _consumer(url, "/queue/x", connect_timeout=2)
    with pytest.raises(NotConnected):
        await consumer.connect()
    with pytest.raises(NotConnected):
        await read_one(consumer)
    # Fast means "without waiting out the connect timeout": a long timeout and an assert
    # at half of it tell the two apart with room for a loaded machine's scheduling.
    producer = _producer(url, node="/queue/x", connect_timeout=10)
    started = time.monotonic()
    [outcome] = await write(producer, [_record({"n": 1})])
    assert not outcome.delivered and outcome.retryable
    assert time.monotonic() - started < 5.0
    await producer.aclose()


def _connected(producer: AmqpProducer) -> bool:
    return producer.connected  # (a call, so mypy does not keep a narrowed property)


@asyncio_test
async def test_producer_fails_fast_when_broker_down_then_reconnects(rabbitmq: RabbitMQ) -> None:
    node = _queue()
    producer = _producer(
        rabbitmq.url, node=node, connect_timeout=2, publish_timeout=3, reconnect_max=0.5
    )
    await producer.connect()
    was_connected = producer.connected  # (a local, so mypy does not narrow the property)
    await asyncio.to_thread(rabbitmq.stop)
    try:
        async with asyncio.timeout(TIMEOUT):
            [outcome] = await write(producer, [_record({"n": 1})])
        assert was_connected and not producer.connected
        assert not outcome.delivered and outcome.retryable
    finally:
        await asyncio.to_thread(rabbitmq.start)
    try:
        async with asyncio.timeout(15):
            while True:
                [outcome] = await write(producer, [_record({"n": 2})])
                if outcome.delivered:
                    break
                await asyncio.sleep(0.2)
        assert _connected(producer)
    finally:
        await producer.aclose()
    consumer = _consumer(rabbitmq.url, node)
    await consumer.connect()
    try:
        delivery = await _read(consumer)
        assert delivery.message.data == {"n": 2}
        await delivery.ack()
    finally:
        await consumer.aclose()
