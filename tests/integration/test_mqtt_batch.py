"""The MQTT adapter moves batches: read_batch drains what arrived, submit pipelines inside
the broker's window, settlement and publishing of a burst leave in one socket write.

Against a real Mosquitto, plus a tiny scripted MQTT 5 server (`ScriptedBroker`) where the
test must decide when PUBACKs come and what they say."""

from __future__ import annotations

import asyncio
import socket
import struct
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from support import asyncio_test

from adapters.mqtt import MqttConsumer, MqttProducer
from gateway.ports import Delivery, EndpointSettings, read_one, write
from gateway.record import NativeMessage
from harness.brokers import Mosquitto

TIMEOUT = 5.0


def _uid() -> str:
    return uuid.uuid4().hex[:10]


def _record(topic: str, n: int, qos: int = 1) -> NativeMessage:
    return NativeMessage("MQTT/5.0", {"topic_name": topic, "qos": qos}, {"n": n})


def _consumer(url: str, topic: str, **options: Any) -> MqttConsumer:
    options.setdefault("filters", [topic])
    return MqttConsumer(EndpointSettings(url, client_id=f"c-{_uid()}", options=options))


async def _send(url: str, records: list[NativeMessage]) -> None:
    producer = MqttProducer(EndpointSettings(url))
    await producer.connect()
    try:
        assert all(o.delivered for o in await write(producer, records))
    finally:
        await producer.aclose()


async def _read_exactly(consumer: MqttConsumer, count: int) -> list[Delivery]:
    got: list[Delivery] = []
    async with asyncio.timeout(TIMEOUT):
        while len(got) < count:
            got += await consumer.read_batch(count - len(got))
    return got


def _numbers(deliveries: list[Delivery]) -> list[int]:
    return [d.message.data["n"] for d in deliveries]  # type: ignore[call-overload,index]


async def _until(condition: Any, what: str) -> None:
    async with asyncio.timeout(TIMEOUT):
        while not condition():
            await asyncio.sleep(0.01)
    assert condition(), what


class CountingSocket:
    """The client's socket, counting the system calls paho's I/O turns into."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self.sends = 0
        self.recvs = 0

    def send(self, data: bytes) -> int:
        self.sends += 1
        return self._sock.send(data)

    def recv(self, size: int) -> bytes:
        self.recvs += 1
        return self._sock.recv(size)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


def _count_io(endpoint: MqttConsumer | MqttProducer) -> CountingSocket:
    link = endpoint._link
    assert link is not None
    counting = CountingSocket(link.client._sock)  # type: ignore[arg-type]
    link.client._sock = counting  # type: ignore[assignment]
    return counting


# ====================================================================== consumer


@asyncio_test
async def test_read_batch_returns_everything_waiting_up_to_limit(mosquitto: Mosquitto) -> None:
    topic = f"xrgw/batch/{_uid()}"
    consumer = _consumer(mosquitto.url, topic, max_in_flight=100)
    await consumer.connect()
    try:
        await _send(mosquitto.url, [_record(topic, n) for n in range(30)])
        await _until(lambda: consumer.buffered == 30, "all 30 buffered")
        first = await consumer.read_batch(12)
        rest = await consumer.read_batch(100)
        assert _numbers(first) == list(range(12))  # several at once, never more than limit
        assert _numbers(rest) == list(range(12, 30))  # everything still waiting
        # One clock read per batch: a batch shares its receive time.
        assert len({d.message.received_at for d in rest}) == 1
        for delivery in first + rest:
            await delivery.ack()
    finally:
        await consumer.aclose()


@asyncio_test
async def test_read_batch_never_exceeds_the_unsettled_limit(mosquitto: Mosquitto) -> None:
    topic = f"xrgw/batchlimit/{_uid()}"
    consumer = _consumer(mosquitto.url, topic, max_in_flight=5)
    await consumer.connect()
    try:
        await _send(mosquitto.url, [_record(topic, n) for n in range(9)])
        await _until(lambda: consumer.buffered == 5, "the window's 5 buffered")
        held = await consumer.read_batch(100)
        assert _numbers(held) == [0, 1, 2, 3, 4]
        with pytest.raises(TimeoutError):  # 5 unsettled: read_batch waits
            async with asyncio.timeout(0.3):
                await consumer.read_batch(100)
        await held[0].ack()
        await held[1].ack()
        async with asyncio.timeout(TIMEOUT):
            freed = await consumer.read_batch(100)
        assert _numbers(freed) == [5, 6][: len(freed)] and 1 <= len(freed) <= 2
        for delivery in [*held[2:], *freed]:
            await delivery.ack()
        rest = await _read_exactly(consumer, 9 - 5 - len(freed))
        assert _numbers(freed + rest) == [5, 6, 7, 8]
        for delivery in rest:
            await delivery.ack()
    finally:
        await consumer.aclose()


@asyncio_test
async def test_burst_is_received_with_few_reads_and_acked_in_one_write(
    mosquitto: Mosquitto,
) -> None:
    topic, client_id = f"xrgw/burst/{_uid()}", f"c-{_uid()}"
    options = {"filters": [topic], "max_in_flight": 200}
    consumer = MqttConsumer(EndpointSettings(mosquitto.url, client_id=client_id, options=options))
    await consumer.connect()
    await consumer.aclose()  # the session keeps what is published while we are away
    await _send(mosquitto.url, [_record(topic, n) for n in range(200)])

    consumer = MqttConsumer(EndpointSettings(mosquitto.url, client_id=client_id, options=options))
    await consumer.connect()
    try:
        io = _count_io(consumer)
        got = await _read_exactly(consumer, 200)
        assert _numbers(got) == list(range(200))
        # paho alone reads a packet with three recv() calls: 600+ for 200 messages.
        assert io.recvs < 50, io.recvs
        await asyncio.sleep(0.1)
        sends_before = io.sends
        for delivery in got:  # the engine settles a batch in a burst like this
            await delivery.ack()
        await asyncio.sleep(0.2)
        assert io.sends - sends_before == 1  # 200 PUBACKs, one socket write
    finally:
        await consumer.aclose()
    # ... and they all arrived: nothing is redelivered on the persistent session.
    again = MqttConsumer(EndpointSettings(mosquitto.url, client_id=client_id, options=options))
    await again.connect()
    try:
        assert again.session_present
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.5):
                await read_one(again)
    finally:
        await again.aclose()


# ====================================================================== producer


@asyncio_test
async def test_submits_pipeline_in_order_beyond_the_window(mosquitto: Mosquitto) -> None:
    topic = f"xrgw/pipeline/{_uid()}"
    consumer = _consumer(mosquitto.url, topic, max_in_flight=400)
    await consumer.connect()
    producer = MqttProducer(EndpointSettings(mosquitto.url))
    await producer.connect()
    try:
        # Three submits before any confirmation, 300 messages: far beyond Mosquitto's
        # Receive Maximum of 20, so most wait in the backlog and leave as PUBACKs come.
        confirmations = [await producer.submit([_record(topic, n) for n in range(i, i + 100)])
                         for i in (0, 100, 200)]
        assert producer._link is not None and producer._link.window == 20
        outcomes = [o for c in confirmations for o in await c]
        assert len(outcomes) == 300 and all(o.delivered for o in outcomes)
        got = await _read_exactly(consumer, 300)
        assert _numbers(got) == list(range(300))
        for delivery in got:
            await delivery.ack()
    finally:
        await producer.aclose()
        await consumer.aclose()


@asyncio_test
async def test_a_burst_of_publishes_leaves_in_one_write(mosquitto: Mosquitto) -> None:
    topic = f"xrgw/onewrite/{_uid()}"
    producer = MqttProducer(EndpointSettings(mosquitto.url))
    await producer.connect()
    try:
        io = _count_io(producer)
        confirmation = await producer.submit([_record(topic, n) for n in range(15)])
        assert io.sends == 0  # queued, not written: submit does not wait for the socket
        outcomes = await confirmation
        assert all(o.delivered for o in outcomes)
        assert io.sends == 1  # 15 PUBLISHes (within the window of 20) in one write
    finally:
        await producer.aclose()


@asyncio_test
async def test_qos0_is_delivered_once_written(mosquitto: Mosquitto) -> None:
    topic = f"xrgw/qos0/{_uid()}"
    consumer = _consumer(mosquitto.url, topic, qos=0)
    await consumer.connect()
    producer = MqttProducer(EndpointSettings(mosquitto.url, options={"qos": 0}))
    await producer.connect()
    try:
        records = [NativeMessage("MQTT/5.0", {"topic_name": topic}, {"n": n}) for n in range(5)]
        outcomes = await write(producer, records)
        assert all(o.delivered for o in outcomes)
        got = await _read_exactly(consumer, 5)
        assert _numbers(got) == list(range(5)) and {d.message.get("qos") for d in got} == {0}
    finally:
        await producer.aclose()
        await consumer.aclose()


# ====================================================================== scripted broker


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value % 128, value // 128
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


class ScriptedBroker:
    """An MQTT 5 server for one client: CONNACK with a Receive Maximum, records every
    PUBLISH, and sends PUBACKs only when the test says so (failure reason 0x87 for topics
    containing "deny")."""

    def __init__(self, receive_maximum: int) -> None:
        self.receive_maximum = receive_maximum
        self.published: list[tuple[str, int]] = []  # (topic, packet id)
        self.acked = 0
        self._writer: asyncio.StreamWriter | None = None

    @property
    def url(self) -> str:
        return f"mqtt://127.0.0.1:{self.port}"

    @asynccontextmanager
    async def running(self) -> AsyncIterator[ScriptedBroker]:
        server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        try:
            yield self
        finally:
            if self._writer is not None:
                self._writer.close()
            server.close()

    def ack(self, count: int) -> None:
        """PUBACK the next `count` PUBLISHes received, in one write."""
        assert self._writer is not None
        out = bytearray()
        for topic, mid in self.published[self.acked:self.acked + count]:
            if "deny" in topic:
                out += b"\x40\x03" + struct.pack("!HB", mid, 0x87)
            else:
                out += b"\x40\x02" + struct.pack("!H", mid)
        self.acked += count
        self._writer.write(bytes(out))

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writer = writer
        try:
            while True:
                header = (await reader.readexactly(1))[0]
                length, shift = 0, 0
                while True:
                    byte = (await reader.readexactly(1))[0]
                    length |= (byte & 0x7F) << shift
                    shift += 7
                    if not byte & 0x80:
                        break
                body = await reader.readexactly(length)
                self._handle(header, body, writer)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass

    def _handle(self, header: int, body: bytes, writer: asyncio.StreamWriter) -> None:
        kind = header >> 4
        if kind == 1:  # CONNECT -> CONNACK, Receive Maximum as the only property
            props = b"\x21" + struct.pack("!H", self.receive_maximum)
            variable = b"\x00\x00" + _varint(len(props)) + props
            writer.write(b"\x20" + _varint(len(variable)) + variable)
        elif kind == 3:  # PUBLISH (QoS 1 here)
            (size,) = struct.unpack_from("!H", body)
            topic = body[2:2 + size].decode()
            (mid,) = struct.unpack_from("!H", body, 2 + size)
            self.published.append((topic, mid))
        elif kind == 12:  # PINGREQ
            writer.write(b"\xd0\x00")


@asyncio_test
async def test_publishes_stay_inside_the_receive_maximum_and_in_order() -> None:
    async with ScriptedBroker(receive_maximum=3).running() as broker:
        producer = MqttProducer(EndpointSettings(broker.url))
        await producer.connect()
        try:
            first = await producer.submit([_record(f"t/{n}", n) for n in range(5)])
            second = await producer.submit([_record(f"t/{n}", n) for n in range(5, 8)])
            await _until(lambda: len(broker.published) == 3, "the window's 3 PUBLISHes")
            await asyncio.sleep(0.2)
            assert len(broker.published) == 3  # no more until PUBACKs free the window
            broker.ack(2)
            await _until(lambda: len(broker.published) == 5, "2 more after 2 PUBACKs")
            broker.ack(3)
            await _until(lambda: len(broker.published) == 8, "the rest")
            broker.ack(3)
            assert all(o.delivered for o in await first + await second)
            assert [t for t, _ in broker.published] == [f"t/{n}" for n in range(8)]
        finally:
            await producer.aclose()


@asyncio_test
async def test_confirmation_reports_each_message() -> None:
    async with ScriptedBroker(receive_maximum=10).running() as broker:
        producer = MqttProducer(EndpointSettings(broker.url, options={"publish_timeout": 1}))
        await producer.connect()
        try:
            records = [
                _record("t/ok", 0),
                NativeMessage("MQTT/5.0", {}, {"n": 1}),  # no topic: not sendable
                _record("t/deny", 2),  # the broker refuses it (PUBACK 0x87)
                _record("t/+/wild", 3),  # a wildcard cannot be published
                _record("t/late", 4),  # never acknowledged
            ]
            confirmation = await producer.submit(records)
            await _until(lambda: len(broker.published) == 3, "the 3 sendable ones")
            broker.ack(2)
            ok, no_topic, denied, wildcard, late = await confirmation
            assert ok.delivered
            assert not no_topic.delivered and not no_topic.retryable
            assert not denied.delivered and not denied.retryable
            assert "refused" in (denied.reason or "")
            assert not wildcard.delivered and not wildcard.retryable
            assert not late.delivered and late.retryable
            assert "PUBACK" in (late.reason or "")
        finally:
            await producer.aclose()


@asyncio_test
async def test_unconfirmed_messages_fail_retryable_when_the_link_drops() -> None:
    async with ScriptedBroker(receive_maximum=2).running() as broker:
        producer = MqttProducer(EndpointSettings(broker.url, options={"reconnect_max": 0.1}))
        await producer.connect()
        try:
            confirmation = await producer.submit([_record(f"t/{n}", n) for n in range(4)])
            await _until(lambda: len(broker.published) == 2, "the window's 2")
            broker.ack(1)
            await _until(lambda: len(broker.published) == 3, "one more")
            assert broker._writer is not None
            broker._writer.close()  # the broker goes away: 2 in flight, 1 never sent
            outcomes = await confirmation
            assert [o.delivered for o in outcomes] == [True, False, False, False]
            assert all(o.retryable for o in outcomes[1:])
        finally:
            await producer.aclose()


@asyncio_test
async def test_timed_out_messages_still_in_the_backlog_are_not_sent_later() -> None:
    async with ScriptedBroker(receive_maximum=2).running() as broker:
        producer = MqttProducer(EndpointSettings(broker.url, options={"publish_timeout": 0.5}))
        await producer.connect()
        try:
            outcomes = await write(producer, [_record(f"t/{n}", n) for n in range(5)])
            assert not any(o.delivered for o in outcomes) and all(o.retryable for o in outcomes)
            assert len(broker.published) == 2
            broker.ack(2)  # the window frees up, but the engine will resend the other 3
            await asyncio.sleep(0.3)
            assert len(broker.published) == 2
        finally:
            await producer.aclose()


@asyncio_test
async def test_submit_waits_for_room_when_the_backlog_is_long(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import adapters.mqtt.producer

    monkeypatch.setattr(adapters.mqtt.producer, "_MAX_BACKLOG", 10)
    async with ScriptedBroker(receive_maximum=2).running() as broker:
        producer = MqttProducer(EndpointSettings(broker.url))
        await producer.connect()
        try:
            first = await producer.submit([_record(f"t/{n}", n) for n in range(12)])
            # 2 in flight, 10 in the backlog: the next submit waits (back-pressure) ...
            second = asyncio.create_task(producer.submit([_record("t/12", 12)]))
            await asyncio.sleep(0.3)
            assert not second.done()
            await _until(lambda: len(broker.published) == 2, "the window's 2")
            broker.ack(2)  # ... until PUBACKs move the backlog into the window
            async with asyncio.timeout(TIMEOUT):
                confirmation = await second
            while broker.acked < 13:
                await _until(lambda: len(broker.published) > broker.acked, "more")
                broker.ack(len(broker.published) - broker.acked)
            assert all(o.delivered for o in await first + await confirmation)
            assert [t for t, _ in broker.published] == [f"t/{n}" for n in range(13)]
        finally:
            await producer.aclose()
