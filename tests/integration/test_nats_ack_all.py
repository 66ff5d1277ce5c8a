"""JetStream AckPolicy.ALL against a real nats-server: the server rules the consumer's ack
bookkeeping (adapters/nats/acks.py) relies on, and the adapter keeping at-least-once
with one +ACK per settled burst."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import nats
import pytest
from nats.aio.msg import Msg
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy, StreamConfig
from support import asyncio_test

from adapters.nats import NatsConsumer
from gateway.ports import Delivery, EndpointSettings, NotConnected, read_one
from harness.brokers import NatsServer

TIMEOUT = 5.0


async def _stream(nc: Any, count: int) -> tuple[str, str]:
    """A fresh stream holding `count` messages b"0".. ; (stream, subject)."""
    name = f"ACKALL_{uuid.uuid4().hex[:8]}"
    subject = f"{name.lower()}.x"
    js = nc.jetstream()
    await js.add_stream(StreamConfig(name=name, subjects=[subject]))
    for n in range(count):
        await js.publish(subject, str(n).encode())
    return name, subject


async def _floor(nc: Any, stream: str, durable: str) -> tuple[int, int]:
    """(ack floor stream sequence, messages awaiting an ack)."""
    info = await nc.jetstream().consumer_info(stream, durable)
    return info.ack_floor.stream_seq, info.num_ack_pending


async def _until(predicate: Any) -> None:
    async with asyncio.timeout(TIMEOUT):
        while not await predicate():
            await asyncio.sleep(0.02)


class _AckSpy:
    """The settlements a consumer's nats-py client writes to its socket."""

    def __init__(self, consumer: NatsConsumer) -> None:
        transport: Any = consumer._client._transport  # type: ignore[union-attr]
        self.commands: list[bytes] = []
        write_one, write_lines = transport.write, transport.writelines

        def spy_write(data: bytes) -> None:
            self.commands.append(bytes(data))
            write_one(data)

        def spy_writelines(lines: list[bytes]) -> None:
            self.commands += [bytes(line) for line in lines]
            write_lines(lines)

        transport.write, transport.writelines = spy_write, spy_writelines

    def _payloads(self) -> list[bytes]:
        return [c.split(b"\r\n")[1] for c in self.commands if c.startswith(b"PUB $JS.ACK.")]

    @property
    def acks(self) -> int:
        return sum(1 for p in self._payloads() if p in (b"", b"+ACK"))  # nats-py: empty

    @property
    def naks(self) -> int:
        return sum(1 for p in self._payloads() if p.startswith(b"-NAK"))


@asyncio_test
async def test_the_server_rules_ack_all_relies_on(nats_server: NatsServer) -> None:
    nc = await nats.connect(nats_server.url)
    try:
        stream, subject = await _stream(nc, 4)
        got: list[Msg] = []

        async def on_msg(msg: Msg) -> None:
            got.append(msg)

        config = ConsumerConfig(durable_name="rules", ack_policy=AckPolicy.ALL,
                                deliver_policy=DeliverPolicy.ALL, ack_wait=30)
        await nc.jetstream().subscribe(subject, durable="rules", stream=stream, cb=on_msg,
                                       manual_ack=True, config=config)
        await _until(lambda: asyncio.sleep(0, len(got) == 4))
        # -NAK acts on its own message: 2 (stream seq 2) comes again, with delivery seq 5.
        await got[1].nak()
        await _until(lambda: asyncio.sleep(0, len(got) == 5))
        assert (got[4].data, got[4].metadata.sequence.consumer) == (b"1", 5)
        # +ACK of stream seq 4 (delivery 4) acknowledges every lower stream sequence,
        # the redelivered one (delivery 5) included.
        await got[3].ack()
        await _until(lambda: _ack_floor_is(nc, stream, "rules", (4, 0)))

        # An ack at or below the highest acknowledged delivery sequence is ignored.
        js = nc.jetstream()
        await js.publish(subject, b"4")
        await js.publish(subject, b"5")  # stream 5, 6; deliveries 6, 7
        await _until(lambda: asyncio.sleep(0, len(got) == 7))
        await got[5].nak()  # stream 5 comes again as delivery 8
        await _until(lambda: asyncio.sleep(0, len(got) == 8))
        await got[7].ack()  # stream 5 acked at delivery 8
        await _until(lambda: _ack_floor_is(nc, stream, "rules", (5, 1)))
        await got[6].ack()  # stream 6, delivery 7 <= 8: ignored
        await asyncio.sleep(0.3)
        assert await _floor(nc, stream, "rules") == (5, 1)
    finally:
        await nc.close()


async def _ack_floor_is(nc: Any, stream: str, durable: str, expected: tuple[int, int]) -> bool:
    return await _floor(nc, stream, durable) == expected


def _consumer(url: str, **options: Any) -> NatsConsumer:
    return NatsConsumer(EndpointSettings(url, options=options))


async def _read(consumer: NatsConsumer, count: int) -> list[Delivery]:
    async with asyncio.timeout(TIMEOUT):
        return [await read_one(consumer) for _ in range(count)]


@asyncio_test
async def test_settling_out_of_order_with_a_retry_loses_nothing_and_acks_in_bursts(
    nats_server: NatsServer,
) -> None:
    nc = await nats.connect(nats_server.url)
    consumer: NatsConsumer | None = None
    try:
        stream, _subject = await _stream(nc, 6)
        consumer = _consumer(nats_server.url, stream=stream, durable="frontier", ack_wait=1)
        await consumer.connect()
        watch = _AckSpy(consumer)
        info = await nc.jetstream().consumer_info(stream, "frontier")
        assert info.config.ack_policy == AckPolicy.ALL  # a durable the gateway creates
        one, two, three, four, five, six = await _read(consumer, 6)
        await three.ack()
        await four.ack()
        await asyncio.sleep(0.2)
        assert watch.acks == 0  # 1 and 2 are open: no ack may pass them
        await two.nack("sink down")  # a retry: -NAK, and 2 keeps its place
        await one.ack()
        await _until(lambda: _ack_floor_is(nc, stream, "frontier", (1, 5)))
        await five.ack()
        await six.ack()
        [again] = await _read(consumer, 1)
        assert again.message.get("sequence") == 2
        await asyncio.sleep(0.2)
        assert await _floor(nc, stream, "frontier") == (1, 5)  # still held by 2
        await again.ack()
        await _until(lambda: _ack_floor_is(nc, stream, "frontier", (6, 0)))
        # Nothing comes again after ack_wait: everything was acknowledged.
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(1.5):
                await read_one(consumer)
        assert watch.naks == 1
        assert watch.acks == 2  # 1, then 6 covering 2..6
    finally:
        if consumer is not None:
            await consumer.aclose()
        await nc.close()


@asyncio_test
async def test_a_burst_acknowledged_then_closed_is_not_delivered_again(
    nats_server: NatsServer,
) -> None:
    """The burst's +ACK is still pending when the consumer closes: it is sent first."""
    nc = await nats.connect(nats_server.url)
    try:
        stream, _subject = await _stream(nc, 3)
        options = {"stream": stream, "durable": "closing", "ack_wait": 1}
        consumer = _consumer(nats_server.url, **options)
        await consumer.connect()
        for delivery in await _read(consumer, 3):
            await delivery.ack()
        await consumer.aclose()
        assert await _floor(nc, stream, "closing") == (3, 0)
    finally:
        await nc.close()


@asyncio_test
async def test_queue_groups_and_existing_explicit_durables_ack_each_message(
    nats_server: NatsServer,
) -> None:
    nc = await nats.connect(nats_server.url)
    consumers: list[NatsConsumer] = []
    try:
        stream, _subject = await _stream(nc, 3)
        # A durable made before ack-all (explicit acks) keeps its policy.
        await nc.jetstream().add_consumer(stream, ConsumerConfig(
            durable_name="older", ack_policy=AckPolicy.EXPLICIT,
            deliver_subject=nc.new_inbox(), max_ack_pending=1000))
        older = _consumer(nats_server.url, stream=stream, durable="older")
        grouped = _consumer(nats_server.url, stream=stream, durable="grouped",
                            queuegroup="workers")
        consumers += [older, grouped]
        spies = []
        for consumer in consumers:
            await consumer.connect()
            spies.append(_AckSpy(consumer))
            for delivery in await _read(consumer, 3):
                await delivery.ack()
        await _until(lambda: _ack_floor_is(nc, stream, "older", (3, 0)))
        await _until(lambda: _ack_floor_is(nc, stream, "grouped", (3, 0)))
        info = await nc.jetstream().consumer_info(stream, "grouped")
        assert info.config.ack_policy == AckPolicy.EXPLICIT  # the group shares it
        assert [spy.acks for spy in spies] == [3, 3]  # one per message
    finally:
        for consumer in consumers:
            await consumer.aclose()
        await nc.close()


@asyncio_test
async def test_a_queue_group_refuses_an_ack_all_durable(nats_server: NatsServer) -> None:
    nc = await nats.connect(nats_server.url)
    try:
        stream, _subject = await _stream(nc, 1)
        single = _consumer(nats_server.url, stream=stream, durable="single")
        await single.connect()  # made with ack policy all
        await single.aclose()
        grouped = _consumer(nats_server.url, stream=stream, durable="single",
                            queuegroup="workers")
        with pytest.raises(NotConnected, match="queue group cannot share"):
            await grouped.connect()
        await grouped.aclose()
    finally:
        await nc.close()
