"""The AMQP 1.0 adapter moves batches, against a real RabbitMQ: read_batch hands out what
is waiting (bounded by its limit and by max_in_flight), a burst of settlements is one
hand-over to the proton thread and one flow, submits are pipelined and keep their order,
and a Confirmation reports each message's own outcome."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from proton import Receiver
from support import asyncio_test

import adapters.amqp
from adapters.amqp import AmqpConsumer, AmqpProducer
from gateway.ports import Delivery, EndpointSettings, read_one, write
from gateway.record import NativeMessage
from harness.brokers import RabbitMQ

TIMEOUT = 5.0


def _queue() -> str:
    return f"/queue/xrgw-batch-{uuid.uuid4().hex[:10]}"


def _consumer(url: str, node: str, **options: Any) -> AmqpConsumer:
    return AmqpConsumer(EndpointSettings(url, options={"node": node, **options}))


def _producer(url: str, **options: Any) -> AmqpProducer:
    return AmqpProducer(EndpointSettings(url, options=options))


def _records(numbers: range) -> list[NativeMessage]:
    return [NativeMessage("AMQP/1.0", {}, {"n": n}) for n in numbers]


async def _send(url: str, node: str, numbers: range) -> None:
    producer = _producer(url, node=node)
    await producer.connect()
    try:
        outcomes = await write(producer, _records(numbers))
        assert all(o.delivered for o in outcomes), outcomes
    finally:
        await producer.aclose()


async def _until(condition: Callable[[], bool], what: str) -> None:
    async with asyncio.timeout(TIMEOUT):
        while not condition():
            await asyncio.sleep(0.01)
    assert condition(), what


def _buffered(consumer: AmqpConsumer) -> int:
    return consumer.buffered


def _numbers(deliveries: list[Delivery]) -> list[Any]:
    return [d.message.data["n"] for d in deliveries]  # type: ignore[index,call-overload]


async def _nothing_more(consumer: AmqpConsumer) -> None:
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.5):
            await consumer.read_batch(100)


@pytest.fixture
def settle_bursts(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The size of each burst of settlements the proton thread receives."""
    bursts: list[int] = []
    settle = adapters.amqp.consumer._ReceiverHandler.settle_burst

    def counted(self: adapters.amqp.consumer._ReceiverHandler,
                settlements: list[tuple[int, int, str]]) -> None:
        bursts.append(len(settlements))
        settle(self, settlements)

    monkeypatch.setattr(adapters.amqp.consumer._ReceiverHandler, "settle_burst", counted)
    yield bursts


@pytest.fixture
def flows(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The credit of each flow a receiver gives."""
    given: list[int] = []
    flow = Receiver.flow

    def counted(self: Receiver, n: int) -> None:
        given.append(n)
        flow(self, n)

    monkeypatch.setattr(Receiver, "flow", counted)
    yield given


@asyncio_test
async def test_read_batch_hands_out_what_is_waiting_up_to_limit(rabbitmq: RabbitMQ) -> None:
    node = _queue()
    await _send(rabbitmq.url, node, range(10))
    consumer = _consumer(rabbitmq.url, node, max_in_flight=100)
    await consumer.connect()
    try:
        await _until(lambda: _buffered(consumer) == 10, "the 10 queued messages arrived")
        first = await consumer.read_batch(4)
        rest = await consumer.read_batch(100)
        assert _numbers(first) == [0, 1, 2, 3]
        assert _numbers(rest) == [4, 5, 6, 7, 8, 9]  # all that waited, not one
        assert consumer.unsettled == 10
        for delivery in [*first, *rest]:
            await delivery.ack()
        assert consumer.unsettled == 0
        await _nothing_more(consumer)
    finally:
        await consumer.aclose()


@asyncio_test
async def test_read_batch_never_exceeds_max_in_flight(rabbitmq: RabbitMQ) -> None:
    node = _queue()
    await _send(rabbitmq.url, node, range(12))
    consumer = _consumer(rabbitmq.url, node, max_in_flight=5)
    await consumer.connect()
    try:
        await _until(lambda: _buffered(consumer) == 5, "the credit's worth arrived")
        held = await consumer.read_batch(100)
        assert _numbers(held) == [0, 1, 2, 3, 4]
        await _nothing_more(consumer)  # 5 unsettled: read_batch waits
        assert _buffered(consumer) == 0  # and the broker sent no more than the credit
        await held[0].ack()
        await held[1].ack()
        await _until(lambda: _buffered(consumer) == 2, "the returned credit was used")
        more = await consumer.read_batch(100)
        assert _numbers(more) == [5, 6]  # room for two, not for the limit's 100
        for delivery in [*held[2:], *more]:
            await delivery.ack()
        rest: list[Delivery] = []
        while len(rest) < 5:
            async with asyncio.timeout(TIMEOUT):
                batch = await consumer.read_batch(100)
            rest += batch
            for delivery in batch:
                await delivery.ack()
        assert _numbers(rest) == [7, 8, 9, 10, 11]
    finally:
        await consumer.aclose()


@asyncio_test
async def test_a_burst_of_settlements_is_one_hand_over_and_one_flow(
    rabbitmq: RabbitMQ, settle_bursts: list[int], flows: list[int]
) -> None:
    node = _queue()
    await _send(rabbitmq.url, node, range(20))
    consumer = _consumer(rabbitmq.url, node, max_in_flight=50)
    await consumer.connect()
    try:
        await _until(lambda: _buffered(consumer) == 20, "the 20 queued messages arrived")
        deliveries = await consumer.read_batch(100)
        assert flows == [50]  # the initial credit
        for delivery in deliveries[:18]:
            await delivery.ack()
        await deliveries[18].nack("try again later")  # released: comes back
        await deliveries[19].nack("poison", retry=False)  # rejected: gone
        await _until(lambda: bool(settle_bursts), "the settlements reached proton")
        await asyncio.sleep(0.2)  # (nothing else follows)
        assert settle_bursts == [20]
        assert flows[1:] == [20]  # their credit, returned at once
        again = await read_one(consumer)
        assert _numbers([again]) == [18]
        await again.ack()
        await _nothing_more(consumer)
    finally:
        await consumer.aclose()
    # The broker has the accepts: a new consumer gets nothing.
    after = _consumer(rabbitmq.url, node)
    await after.connect()
    try:
        await _nothing_more(after)
    finally:
        await after.aclose()


@asyncio_test
async def test_acks_right_before_close_still_reach_the_broker(rabbitmq: RabbitMQ) -> None:
    node = _queue()
    await _send(rabbitmq.url, node, range(5))
    consumer = _consumer(rabbitmq.url, node)
    await consumer.connect()
    await _until(lambda: _buffered(consumer) == 5, "the 5 queued messages arrived")
    for delivery in await consumer.read_batch(100):
        await delivery.ack()
    await consumer.aclose()  # at once: the acks have not left the event loop yet
    after = _consumer(rabbitmq.url, node)
    await after.connect()
    try:
        await _nothing_more(after)  # none of them comes again
    finally:
        await after.aclose()


@asyncio_test
async def test_submits_are_pipelined_and_keep_their_order(rabbitmq: RabbitMQ) -> None:
    node = _queue()
    producer = _producer(rabbitmq.url, node=node)
    await producer.connect()
    try:
        first = await producer.submit(_records(range(0, 300)))
        second = await producer.submit(_records(range(300, 600)))
        # Both submits returned before any disposition could have been handled.
        assert isinstance(first, asyncio.Future) and not first.done()
        assert isinstance(second, asyncio.Future) and not second.done()
        outcomes = [*await first, *await second]
        assert len(outcomes) == 600 and all(o.delivered for o in outcomes)
    finally:
        await producer.aclose()
    consumer = _consumer(rabbitmq.url, node, max_in_flight=1000)
    await consumer.connect()
    try:
        received: list[Delivery] = []
        while len(received) < 600:
            async with asyncio.timeout(TIMEOUT):
                received += await consumer.read_batch(1000)
        assert _numbers(received) == list(range(600))
        for delivery in received:
            await delivery.ack()
    finally:
        await consumer.aclose()


@asyncio_test
async def test_a_confirmation_reports_each_message(rabbitmq: RabbitMQ) -> None:
    node = _queue()
    producer = _producer(rabbitmq.url)  # no node: records name their address
    await producer.connect()
    good = NativeMessage("AMQP/1.0", {"properties": {"to": node}}, {"n": 1})
    try:
        confirmation = await producer.submit([
            good,
            NativeMessage("AMQP/1.0", {}, {"n": 2}),  # no address
            NativeMessage("AMQP/1.0", {"properties": {"to": node},
                                       "header": {"priority": "high"}}, {"n": 3}),
            NativeMessage("AMQP/1.0", {"properties": {"to": "/exchange/xrgw-missing/k"}},
                          {"n": 4}),
            good,
        ])
        later = await producer.submit([good])
        outcomes = await confirmation
        assert [o.delivered for o in outcomes] == [True, False, False, False, True]
        assert not any(o.retryable for o in outcomes[1:4]), outcomes
        assert "properties.to" in (outcomes[1].reason or "")
        assert "header.priority" in (outcomes[2].reason or "")
        assert "not-found" in (outcomes[3].reason or "")
        assert [o.delivered for o in await later] == [True]
    finally:
        await producer.aclose()
