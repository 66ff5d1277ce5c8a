"""The in-memory adapter and the Delivery settlement contract."""

from __future__ import annotations

import asyncio

import pytest

from adapters.memory import MemoryConsumer, MemoryProducer
from gateway.ports import (
    AlreadySettled,
    Consumer,
    EndOfInput,
    NotConnected,
    Outcome,
    Producer,
    read_one,
    write,
)
from gateway.record import NativeMessage


def _msg(n: int) -> NativeMessage:
    return NativeMessage("MQTT/5.0", {"topic_name": f"t/{n}"}, {"n": n})


def test_protocols_are_satisfied() -> None:
    assert isinstance(MemoryConsumer(), Consumer)
    assert isinstance(MemoryProducer(), Producer)


def test_settle_once_and_nack_requeues() -> None:
    async def run() -> None:
        consumer = MemoryConsumer([_msg(1)], close_when_empty=True)
        with pytest.raises(NotConnected):
            await read_one(consumer)
        await consumer.connect()
        first = await read_one(consumer)
        await first.nack("later")
        assert first.settled
        with pytest.raises(AlreadySettled):
            await first.ack()
        again = await read_one(consumer)
        assert again.message == _msg(1)
        await again.ack()
        assert consumer.acked == [_msg(1)]
        assert [n.reason for n in consumer.nacked] == ["later"]
        with pytest.raises(EndOfInput):
            await read_one(consumer)

    asyncio.run(run())


def test_max_in_flight_blocks_read() -> None:
    async def run() -> None:
        consumer = MemoryConsumer([_msg(1), _msg(2)], max_in_flight=1)
        await consumer.connect()
        first = await read_one(consumer)
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.05):
                await read_one(consumer)
        await first.ack()
        assert (await read_one(consumer)).message == _msg(2)

    asyncio.run(run())


def test_producer_injected_failures() -> None:
    async def run() -> None:
        producer = MemoryProducer(
            rule=lambda m: Outcome.failed("bad", False) if m.data == {"n": 3} else None
        )
        assert (await write(producer, [_msg(1)]))[0].retryable  # not connected yet
        await producer.connect()
        producer.fail_next(Outcome.failed("busy"))
        outcomes = await write(producer, [_msg(1), _msg(2), _msg(3)])
        assert [o.delivered for o in outcomes] == [False, True, False]
        assert [o.retryable for o in outcomes] == [True, False, False]
        assert producer.written == [_msg(2)]

    asyncio.run(run())
