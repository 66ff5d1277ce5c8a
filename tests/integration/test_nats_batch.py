"""The NATS adapter moves batches (issue 14), against a real nats-server: read_batch hands
over everything waiting (never more than asked or than the window allows), a burst of
acks is one socket write, a submit is one PING behind its publishes or one wait for its
PubAcks, and pipelined submits keep their order."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import nats
import pytest
from nats.js.api import StreamConfig
from support import asyncio_test

from adapters.nats import NatsConsumer, NatsProducer
from adapters.nats.client import Client
from adapters.nats.record import jetstream_ack
from gateway.ports import Delivery, EndpointSettings, Outcome, read_one, write
from gateway.record import NativeMessage
from harness.brokers import NatsServer

TIMEOUT = 5.0


def _uid() -> str:
    return uuid.uuid4().hex[:10]


def _consumer(url: str, **options: Any) -> NatsConsumer:
    return NatsConsumer(EndpointSettings(url, options=options))


def _producer(url: str, **options: Any) -> NatsProducer:
    return NatsProducer(EndpointSettings(url, options=options))


def _record(subject: str, n: int, **fields: Any) -> NativeMessage:
    return NativeMessage("NATS", {"subject": subject, **fields}, data={"n": n})


def _numbers(batch: list[Delivery]) -> list[int]:
    numbers = []
    for delivery in batch:
        data = delivery.message.data
        assert isinstance(data, dict) and isinstance(data["n"], int)
        numbers.append(data["n"])
    return numbers


async def _send(url: str, records: list[NativeMessage], jetstream: bool = False) -> None:
    producer = _producer(url, jetstream=jetstream)
    await producer.connect()
    try:
        outcomes = await write(producer, records)
        assert all(o.delivered for o in outcomes), outcomes
    finally:
        await producer.aclose()


async def _stream(url: str) -> tuple[str, str]:
    """A fresh stream capturing `<prefix>.>`; returns (stream name, subject prefix)."""
    name = f"XRGW_{_uid()}"
    nc = await nats.connect(url)
    try:
        await nc.jetstream().add_stream(StreamConfig(name=name, subjects=[f"{name.lower()}.>"]))
    finally:
        await nc.close()
    return name, name.lower()


async def _buffered(consumer: NatsConsumer, count: int) -> None:
    """Wait until `count` messages are received and waiting in the consumer."""
    async with asyncio.timeout(TIMEOUT):
        while consumer.buffered < count:
            await asyncio.sleep(0.01)


async def _blocked(consumer: NatsConsumer, wait: float = 0.3) -> None:
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(wait):
            await consumer.read_batch(100)


async def _ack_floor(url: str, stream: str, durable: str) -> int:
    """The stream sequence up to which the server has every message acknowledged."""
    nc = await nats.connect(url)
    try:
        info = await nc.jetstream().consumer_info(stream, durable)
    finally:
        await nc.close()
    return info.ack_floor.stream_seq if info.ack_floor and info.ack_floor.stream_seq else 0


class _Wire:
    """What a nats-py client writes to its socket: one entry per write call (the flusher
    writes its whole pending buffer in one `writelines`)."""

    def __init__(self, client: Client | None) -> None:
        assert client is not None
        transport: Any = client._transport
        self.writes: list[list[bytes]] = []
        write_one, write_lines = transport.write, transport.writelines

        def spy_write(data: bytes) -> None:
            self.writes.append([bytes(data)])
            write_one(data)

        def spy_writelines(lines: list[bytes]) -> None:
            self.writes.append([bytes(line) for line in lines])
            write_lines(lines)

        transport.write, transport.writelines = spy_write, spy_writelines

    @property
    def commands(self) -> list[bytes]:
        return [chunk for write in self.writes for chunk in write]


# ====================================================================== consumer


@asyncio_test
async def test_core_read_batch_hands_over_everything_waiting_up_to_limit(
    nats_server: NatsServer,
) -> None:
    subject = f"xrgw.batch.{_uid()}"
    consumer = _consumer(nats_server.url, subjects=[subject], max_in_flight=64)
    await consumer.connect()
    try:
        await _send(nats_server.url, [_record(subject, n) for n in range(20)])
        await _buffered(consumer, 20)
        first = await consumer.read_batch(7)
        rest = await consumer.read_batch(100)
        assert _numbers(first) == list(range(7))  # the limit, in the order received
        assert _numbers(rest) == list(range(7, 20))  # all the rest at once
        assert len({d.message.received_at for d in rest}) == 1  # one timestamp per batch
        assert consumer.unsettled == 20
        await _blocked(consumer)
        for delivery in [*first, *rest]:
            await delivery.ack()
        assert consumer.unsettled == 0
    finally:
        await consumer.aclose()


@asyncio_test
async def test_core_read_batch_stays_within_max_in_flight(nats_server: NatsServer) -> None:
    subject = f"xrgw.window.{_uid()}"
    consumer = _consumer(nats_server.url, subjects=[subject], max_in_flight=5)
    await consumer.connect()
    try:
        await _send(nats_server.url, [_record(subject, n) for n in range(12)])
        await _buffered(consumer, 5)
        held = await consumer.read_batch(100)
        assert _numbers(held) == [0, 1, 2, 3, 4]  # the window, not the limit
        await _buffered(consumer, 5)  # the buffer refills behind them...
        await _blocked(consumer)  # ...but nothing more is handed out while 5 are unsettled
        await held[0].ack()
        await held[1].nack("later")  # core: gone, but settled all the same
        more = await consumer.read_batch(100)
        assert _numbers(more) == [5, 6]  # exactly the freed slots
        for delivery in [*held[2:], *more]:
            await delivery.ack()
        async with asyncio.timeout(TIMEOUT):
            rest: list[Delivery] = []
            while len(rest) < 5:
                batch = await consumer.read_batch(100)
                rest += batch
                for delivery in batch:
                    await delivery.ack()
        assert _numbers(rest) == [7, 8, 9, 10, 11]
    finally:
        await consumer.aclose()


@asyncio_test
async def test_jetstream_batches_and_a_burst_of_acks_is_one_write(
    nats_server: NatsServer,
) -> None:
    stream, prefix = await _stream(nats_server.url)
    await _send(nats_server.url, [_record(f"{prefix}.x", n) for n in range(25)], jetstream=True)
    consumer = _consumer(nats_server.url, stream=stream, durable="batches", max_in_flight=10)
    await consumer.connect()
    try:
        await _buffered(consumer, 10)  # max_ack_pending: the server sent 10, holds 15
        first = await consumer.read_batch(4)
        second = await consumer.read_batch(100)
        assert [d.message.get("sequence") for d in first] == [1, 2, 3, 4]
        assert [d.message.get("sequence") for d in second] == [5, 6, 7, 8, 9, 10]
        assert all(d.message.get("stream") == stream for d in [*first, *second])
        await _blocked(consumer)

        wire = _Wire(consumer._client)
        for delivery in [*first, *second]:
            await delivery.ack()  # no round trip, and nothing written yet
        assert wire.writes == []
        async with asyncio.timeout(TIMEOUT):
            while await _ack_floor(nats_server.url, stream, "batches") < 10:
                await asyncio.sleep(0.02)
        # AckPolicy.ALL: the ten settlements are one +ACK, of the highest sequence, in one
        # socket write and no PING (adapters/nats/acks.py).
        assert len(wire.writes) == 1, wire.writes
        [command] = wire.writes[0]
        assert command.startswith(b"PUB $JS.ACK.")
        subject = command.split(b" ")[1].decode()
        assert jetstream_ack(subject)[1:] == (10, 10)  # type: ignore[index]

        got: list[Delivery] = []
        async with asyncio.timeout(TIMEOUT):
            while len(got) < 15:
                batch = await consumer.read_batch(8)
                assert 1 <= len(batch) <= 8
                got += batch
                for delivery in batch:
                    await delivery.ack()
        assert [d.message.get("sequence") for d in got] == list(range(11, 26))
    finally:
        await consumer.aclose()


# ====================================================================== producer


@asyncio_test
async def test_core_submit_is_one_ping_behind_the_batch(nats_server: NatsServer) -> None:
    subject = f"xrgw.ping.{_uid()}"
    producer = _producer(nats_server.url)
    await producer.connect()
    try:
        wire = _Wire(producer._client)
        confirmation = await producer.submit([_record(subject, n) for n in range(50)])
        outcomes = await confirmation
        assert outcomes == [Outcome.ok()] * 50
        commands = wire.commands
        # The PONG confirms the batch only if the PING follows all of it on the wire.
        assert [c for c in commands if c == b"PING\r\n"] == [b"PING\r\n"]
        assert commands[-1] == b"PING\r\n"
        assert sum(c.startswith(b"HPUB ") for c in commands) == 50  # (a JSON content type)
    finally:
        await producer.aclose()


@asyncio_test
async def test_client_flush_pings_behind_its_pending_publishes(nats_server: NatsServer) -> None:
    """nats-py's own flush() wrote PING ahead of publishes its flusher had not written
    yet; the adapter's client writes them first, so the PONG confirms them."""
    client = Client()
    await client.connect(nats_server.url)
    try:
        wire = _Wire(client)
        for n in range(3):
            await client.publish(f"xrgw.flush.{_uid()}", str(n).encode())
        await client.flush()
        assert [c[:4] for c in wire.commands] == [b"PUB ", b"PUB ", b"PUB ", b"PING"]
    finally:
        await client.close()


@asyncio_test
async def test_core_pipelined_submits_arrive_in_submit_order(nats_server: NatsServer) -> None:
    subject = f"xrgw.order.{_uid()}"
    consumer = _consumer(nats_server.url, subjects=[subject], max_in_flight=100)
    producer = _producer(nats_server.url)
    await consumer.connect()
    await producer.connect()
    try:
        first = await producer.submit([_record(subject, n) for n in range(10)])
        second = await producer.submit([_record(subject, n) for n in range(10, 20)])
        # Both handed over before either was confirmed: submit does not wait.
        assert isinstance(first, asyncio.Future) and not first.done()
        assert all(o.delivered for o in await second)
        assert all(o.delivered for o in await first)
        await _buffered(consumer, 20)
        assert _numbers(await consumer.read_batch(100)) == list(range(20))
    finally:
        await producer.aclose()
        await consumer.aclose()


@asyncio_test
async def test_core_batch_reports_per_message_failures(nats_server: NatsServer) -> None:
    subject = f"xrgw.fail.{_uid()}"
    consumer = _consumer(nats_server.url, subjects=[subject])
    producer = _producer(nats_server.url)
    await consumer.connect()
    await producer.connect()
    try:
        outcomes = await write(producer, [
            _record(subject, 0),
            NativeMessage("NATS", {}, data={"n": -1}),  # no subject
            NativeMessage("NATS", {"subject": subject}, payload=b"x" * (2 << 20)),  # too big
            _record(subject, 1),
        ])
        ok, no_subject, too_big, ok_too = outcomes
        assert ok.delivered and ok_too.delivered
        assert not no_subject.delivered and not no_subject.retryable
        assert not too_big.delivered and not too_big.retryable
        await _buffered(consumer, 2)
        assert _numbers(await consumer.read_batch(10)) == [0, 1]
    finally:
        await producer.aclose()
        await consumer.aclose()


@asyncio_test
async def test_jetstream_pipelined_submits_are_stored_in_submit_order(
    nats_server: NatsServer,
) -> None:
    stream, prefix = await _stream(nats_server.url)
    producer = _producer(nats_server.url, jetstream=True)
    await producer.connect()
    try:
        wire = _Wire(producer._client)
        first = await producer.submit([_record(f"{prefix}.a", n) for n in range(30)])
        second = await producer.submit([_record(f"{prefix}.b", n) for n in range(30, 60)])
        assert isinstance(first, asyncio.Future) and not first.done()
        assert all(o.delivered for o in await second)
        assert all(o.delivered for o in await first)
        assert b"PING\r\n" not in wire.commands  # the PubAcks confirm, not a round trip
        assert producer._pub_acks is not None and producer._pub_acks.waiting == 0
    finally:
        await producer.aclose()
    consumer = _consumer(nats_server.url, stream=stream, durable="order", max_in_flight=100)
    await consumer.connect()
    try:
        await _buffered(consumer, 60)
        batch = await consumer.read_batch(100)
        assert [d.message.get("sequence") for d in batch] == list(range(1, 61))
        assert _numbers(batch) == list(range(60))
    finally:
        await consumer.aclose()


@asyncio_test
async def test_jetstream_batch_reports_per_message_outcomes(nats_server: NatsServer) -> None:
    stream, prefix = await _stream(nats_server.url)
    hole = f"xrgw.hole.{_uid()}"  # a core subscriber that never answers: no PubAck
    listener = await nats.connect(nats_server.url)
    await listener.subscribe(hole)
    await listener.flush()
    producer = _producer(nats_server.url, jetstream=True, publish_timeout=1)
    await producer.connect()
    try:
        expect_999 = [{"name": "Nats-Expected-Last-Sequence", "value": "999"}]
        outcomes = await write(producer, [
            _record(f"{prefix}.x", 0),
            NativeMessage("NATS", {}, data={"n": -1}),  # no subject: never sendable
            _record(f"{prefix}.x", 1, headers=expect_999),  # the stream refuses it (400)
            _record(f"nostream.{_uid()}", 2),  # no stream takes the subject
            _record(hole, 3),  # answered by nobody
            NativeMessage("NATS", {"subject": f"{prefix}.x"}, payload=b"x" * (2 << 20)),
            _record(f"{prefix}.x", 4),
        ])
        ok, no_subject, refused, no_stream, unanswered, too_big, ok_too = outcomes
        assert ok.delivered and ok_too.delivered
        assert not no_subject.delivered and not no_subject.retryable
        assert not refused.delivered and not refused.retryable
        assert refused.reason is not None and "wrong last sequence" in refused.reason
        assert not no_stream.delivered and no_stream.retryable
        assert no_stream.reason == "no JetStream stream answered for the subject"
        assert unanswered == Outcome.failed("no PubAck in time")
        assert not too_big.delivered and not too_big.retryable
        assert producer._pub_acks is not None and producer._pub_acks.waiting == 0
        nc = await nats.connect(nats_server.url)
        try:
            info = await nc.jetstream().stream_info(stream)
        finally:
            await nc.close()
        assert info.state.messages == 2
    finally:
        await producer.aclose()
        await listener.close()


@asyncio_test
async def test_jetstream_close_fails_the_waiting_batch_at_once(nats_server: NatsServer) -> None:
    hole = f"xrgw.hole.{_uid()}"
    listener = await nats.connect(nats_server.url)
    await listener.subscribe(hole)
    await listener.flush()
    producer = _producer(nats_server.url, jetstream=True, publish_timeout=30)
    await producer.connect()
    try:
        confirmation = await producer.submit([_record(hole, n) for n in range(3)])
        await asyncio.sleep(0.1)
        await producer.aclose()  # nobody would answer now: no waiting out publish_timeout
        async with asyncio.timeout(1):
            outcomes = await confirmation
        assert all(not o.delivered and o.retryable for o in outcomes), outcomes
    finally:
        await producer.aclose()
        await listener.close()


@asyncio_test
async def test_one_at_a_time_helpers_still_work(nats_server: NatsServer) -> None:
    """read_one/write are read_batch(1)/submit+await: a batch of one."""
    subject = f"xrgw.single.{_uid()}"
    consumer = _consumer(nats_server.url, subjects=[subject])
    await consumer.connect()
    try:
        await _send(nats_server.url, [_record(subject, n) for n in range(3)])
        await _buffered(consumer, 3)
        async with asyncio.timeout(TIMEOUT):
            singles = [await read_one(consumer) for _ in range(3)]
        assert _numbers(singles) == [0, 1, 2]
    finally:
        await consumer.aclose()
