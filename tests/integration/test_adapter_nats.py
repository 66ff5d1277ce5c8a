"""The NATS adapter against a real nats-server: core and JetStream, settlement, restarts."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from typing import Any

import nats
import pytest
from nats.js.api import StreamConfig
from support import asyncio_test

from adapters.nats import NatsConsumer, NatsProducer
from gateway.ports import AlreadySettled, Delivery, EndpointSettings, NotConnected, read_one, write
from gateway.record import NativeMessage
from harness.brokers import NatsServer, free_port

TIMEOUT = 5.0



def _uid() -> str:
    return uuid.uuid4().hex[:10]


def _consumer(url: str, **options: Any) -> NatsConsumer:
    return NatsConsumer(EndpointSettings(url, options=options))


def _producer(url: str, **options: Any) -> NatsProducer:
    return NatsProducer(EndpointSettings(url, options=options))


def _record(subject: str, **fields: Any) -> NativeMessage:
    data = fields.pop("data", None)
    payload = fields.pop("payload", None)
    body: dict[str, Any] = {"payload": payload} if payload is not None else {"data": data}
    return NativeMessage("NATS", {"subject": subject, **fields}, **body)


async def _read(consumer: NatsConsumer) -> Delivery:
    async with asyncio.timeout(TIMEOUT):
        return await read_one(consumer)


async def _nothing_more(consumer: NatsConsumer, wait: float = 0.5) -> None:
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(wait):
            await read_one(consumer)


async def _send(url: str, *records: NativeMessage, jetstream: bool = False) -> None:
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
    prefix = name.lower()
    nc = await nats.connect(url)
    try:
        await nc.jetstream().add_stream(StreamConfig(name=name, subjects=[f"{prefix}.>"]))
    finally:
        await nc.close()
    return name, prefix


# ====================================================================== core


@asyncio_test
async def test_core_round_trip_headers_json_and_binary(nats_server: NatsServer) -> None:
    base = f"xrgw.rt.{_uid()}"
    consumer = _consumer(nats_server.url, subjects=[f"{base}.*"])
    await consumer.connect()
    headers = [{"name": "eventType", "value": "sale"}, {"name": "eventType", "value": "2"}]
    sent = [
        _record(f"{base}.json", data={"amount": 12.5}, headers=headers, **{"reply-to": "r.1"}),
        _record(
            f"{base}.bin",
            payload=b"\x00\xffraw",
            headers=[{"name": "content-type", "value": "image/png"}],
        ),
        # No content type: JSON text is only data when it is an object or array.
        _record(f"{base}.scalar", payload=b"21.5"),
        _record(f"{base}.obj", payload=b'{"a":1}'),
    ]
    await _send(nats_server.url, *sent)
    got = [await _read(consumer) for _ in sent]
    try:
        first, binary, scalar, obj = (d.message for d in got)
        assert first.protocol == "NATS"
        assert first.get("subject") == f"{base}.json"
        assert first.get("reply-to") == "r.1"
        assert first.data == {"amount": 12.5}
        assert first.get("headers") == [
            *headers,
            {"name": "Content-Type", "value": "application/json"},
        ]
        assert "stream" not in first.fields and "sequence" not in first.fields
        assert binary.payload == b"\x00\xffraw" and not binary.has_json_data
        assert binary.content_type == "image/png"
        assert scalar.payload == b"21.5"
        assert obj.data == {"a": 1}
        assert consumer.dropped == 0
    finally:
        for delivery in got:
            await delivery.ack()  # core: a no-op, but settles
        await consumer.aclose()
    with pytest.raises(AlreadySettled):
        await got[0].nack("again")


@asyncio_test
async def test_core_queue_group_shares_messages(nats_server: NatsServer) -> None:
    subject = f"xrgw.qg.{_uid()}"
    one = _consumer(nats_server.url, subjects=[subject], queuegroup="workers")
    two = _consumer(nats_server.url, subjects=[subject], queuegroup="workers")
    await one.connect()
    await two.connect()
    try:
        await _send(nats_server.url, *(_record(subject, data={"n": i}) for i in range(20)))
        seen: list[int] = []
        counts = []
        for consumer in (one, two):
            count = 0
            while True:
                try:
                    async with asyncio.timeout(0.5):
                        delivery = await read_one(consumer)
                except TimeoutError:
                    break
                data = delivery.message.data
                assert isinstance(data, dict) and isinstance(data["n"], int)
                seen.append(data["n"])
                count += 1
                await delivery.ack()
            counts.append(count)
        assert sorted(seen) == list(range(20))  # each message exactly once in the group
        assert all(c > 0 for c in counts), counts
    finally:
        await one.aclose()
        await two.aclose()


@asyncio_test
async def test_core_slow_consumer_drops_are_counted(nats_server: NatsServer) -> None:
    subject = f"xrgw.slow.{_uid()}"
    consumer = _consumer(nats_server.url, subjects=[subject], max_in_flight=2, pending_msgs_limit=5)
    await consumer.connect()
    try:
        await _send(nats_server.url, *(_record(subject, data={"n": i}) for i in range(50)))
        async with asyncio.timeout(TIMEOUT):
            while consumer.dropped == 0:
                await asyncio.sleep(0.05)
        got = []
        while True:
            try:
                async with asyncio.timeout(0.5):
                    delivery = await read_one(consumer)
            except TimeoutError:
                break
            got.append(delivery)
            await delivery.ack()
        # 2 held unsettled + 2 buffered by us + up to 5 pending in nats-py; the rest dropped.
        assert 0 < len(got) < 50
        assert len(got) + consumer.dropped == 50
    finally:
        await consumer.aclose()


# ====================================================================== JetStream

_HEADERS = [{"name": "trace", "value": "a"}, {"name": "trace", "value": "b"}]


@asyncio_test
async def test_jetstream_ack_nak_term(nats_server: NatsServer) -> None:
    stream, prefix = await _stream(nats_server.url)
    await _send(
        nats_server.url,
        *(_record(f"{prefix}.orders", data={"n": i}, headers=_HEADERS) for i in range(3)),
        jetstream=True,
    )
    consumer = _consumer(nats_server.url, stream=stream, durable="d1", subjects=[f"{prefix}.>"])
    await consumer.connect()
    try:
        acked, nacked, termed = [await _read(consumer) for _ in range(3)]
        assert [d.message.get("sequence") for d in (acked, nacked, termed)] == [1, 2, 3]
        assert acked.message.get("stream") == stream
        assert acked.message.get("subject") == f"{prefix}.orders"
        assert acked.message.data == {"n": 0}
        assert acked.message.pairs("headers") == [
            ("trace", "a"),
            ("trace", "b"),
            ("Content-Type", "application/json"),
        ]
        assert "reply-to" not in acked.message.fields  # the ack subject is not reported
        await acked.ack()
        await termed.nack("poison", retry=False)
        await nacked.nack("downstream unavailable")
        again = await _read(consumer)
        assert again.message.get("sequence") == 2  # same stream sequence: same event id
        assert again.message.data == {"n": 1}
        await again.ack()
        await _nothing_more(consumer)  # acked and terminated ones do not come back
    finally:
        await consumer.aclose()


@asyncio_test
async def test_jetstream_unacked_redelivered_after_restart_acked_not(
    nats_server: NatsServer,
) -> None:
    stream, prefix = await _stream(nats_server.url)
    options = {"stream": stream, "durable": "restartable", "ack_wait": 1}
    consumer = _consumer(nats_server.url, **options)
    await consumer.connect()
    await _send(
        nats_server.url, *(_record(f"{prefix}.x", data={"n": i}) for i in (1, 2)), jetstream=True
    )
    one, two = await _read(consumer), await _read(consumer)
    await one.ack()
    await consumer.aclose()  # `two` is never settled: the gateway "crashed"

    again = _consumer(nats_server.url, **options)
    await again.connect()
    try:
        redelivered = await _read(again)  # after ack_wait
        assert redelivered.message.data == {"n": 2}
        assert redelivered.message.get("sequence") == 2
        await redelivered.ack()
        await _nothing_more(again, 1.5)  # n=1 was acked: not seen again
    finally:
        await again.aclose()
    assert not two.settled


@asyncio_test
async def test_jetstream_bounded_in_flight_by_max_ack_pending(nats_server: NatsServer) -> None:
    stream, prefix = await _stream(nats_server.url)
    consumer = _consumer(nats_server.url, stream=stream, durable="bounded", max_in_flight=3)
    await consumer.connect()
    try:
        await _send(
            nats_server.url,
            *(_record(f"{prefix}.x", data={"n": i}) for i in range(5)),
            jetstream=True,
        )
        held = [await _read(consumer) for _ in range(3)]
        await _nothing_more(consumer)
        assert consumer.unsettled == 3
        nc = await nats.connect(nats_server.url)
        try:
            info = await nc.jetstream().consumer_info(stream, "bounded")
        finally:
            await nc.close()
        # The server itself holds back: 3 awaiting ack, 2 not even sent.
        assert (info.num_ack_pending, info.num_pending) == (3, 2)
        await held[0].ack()
        fourth = await _read(consumer)
        assert fourth.message.data == {"n": 3}
        for delivery in [*held[1:], fourth]:
            await delivery.ack()
        fifth = await _read(consumer)
        assert fifth.message.data == {"n": 4}
        await fifth.ack()
    finally:
        await consumer.aclose()


@asyncio_test
async def test_jetstream_producer_reports_pub_ack(nats_server: NatsServer) -> None:
    stream, prefix = await _stream(nats_server.url)
    producer = _producer(nats_server.url, jetstream=True, publish_timeout=2)
    await producer.connect()
    try:
        outcomes = await write(producer,
            [
                _record(f"{prefix}.a", data={"n": 1}),
                NativeMessage("NATS", {}, {"x": 1}),  # no subject: never sendable
                _record(f"{prefix}.b", payload=b"raw"),
                _record(f"nostream.{_uid()}", data={"n": 2}),  # no stream takes it
            ]
        )
        ok_a, no_subject, ok_b, no_stream = outcomes
        assert ok_a.delivered and ok_b.delivered
        assert not no_subject.delivered and not no_subject.retryable
        assert not no_stream.delivered and no_stream.reason
        nc = await nats.connect(nats_server.url)
        try:
            info = await nc.jetstream().stream_info(stream)
        finally:
            await nc.close()
        assert info.state.messages == 2
    finally:
        await producer.aclose()


# ====================================================================== failures


@asyncio_test
async def test_consumer_reports_not_connected_when_server_unreachable() -> None:
    consumer = _consumer(f"nats://127.0.0.1:{free_port()}", subjects=["x"], connect_timeout=1)
    began = time.monotonic()
    with pytest.raises(NotConnected):
        await consumer.connect()
    # Generous on purpose (3x the 1 s connect timeout): what this guards against is the
    # client's default of retrying for minutes, not scheduling noise on a busy machine.
    assert time.monotonic() - began < 3
    with pytest.raises(NotConnected):
        await read_one(consumer)


@asyncio_test
async def test_server_restart_consumers_and_producer_continue(nats_server: NatsServer) -> None:
    """Runs last: restarts the shared server (JetStream state survives)."""
    stream, prefix = await _stream(nats_server.url)
    core_subject = f"xrgw.restart.{_uid()}"
    fast = {"reconnect_wait": 0.2, "connect_timeout": 2, "publish_timeout": 2}
    core = _consumer(nats_server.url, subjects=[core_subject], **fast)
    js = _consumer(nats_server.url, stream=stream, durable="after-restart", **fast)
    core_pub = _producer(nats_server.url, **fast)
    js_pub = _producer(nats_server.url, jetstream=True, **fast)
    for endpoint in (core, js, core_pub, js_pub):
        await endpoint.connect()
    try:
        await asyncio.to_thread(nats_server.stop)
        try:
            async with asyncio.timeout(TIMEOUT):
                while core_pub.connected or js_pub.connected:
                    await asyncio.sleep(0.05)
                # Down: fast, retryable failures instead of nats-py buffering.
                began = time.monotonic()
                [core_out] = await write(core_pub, [_record(core_subject, data={"n": 0})])
                [js_out] = await write(js_pub, [_record(f"{prefix}.x", data={"n": 0})])
                assert time.monotonic() - began < 1
            assert not core_out.delivered and core_out.retryable
            assert not js_out.delivered and js_out.retryable
            assert not core.connected and not js.connected
        finally:
            await asyncio.to_thread(nats_server.start)

        async def deliver(producer: NatsProducer, record: NativeMessage) -> None:
            async with asyncio.timeout(TIMEOUT):
                while True:
                    [outcome] = await write(producer, [record])
                    if outcome.delivered:
                        return
                    await asyncio.sleep(0.1)

        # The consumers were reconnected by nats-py, subscriptions restored.
        for consumer in (core, js):
            async with asyncio.timeout(TIMEOUT):
                while not consumer.connected:
                    with contextlib.suppress(NotConnected):
                        await consumer.connect()
        await deliver(js_pub, _record(f"{prefix}.x", data={"n": 1}))
        got_js = await _read(js)
        assert got_js.message.data == {"n": 1}
        assert got_js.message.get("sequence") == 1  # n=0 never reached the stream
        await got_js.ack()
        # Core is at-most-once: until the server has the subscription again, messages are
        # simply gone, so send until one arrives.
        async with asyncio.timeout(TIMEOUT):
            while True:
                await deliver(core_pub, _record(core_subject, data={"n": 1}))
                try:
                    async with asyncio.timeout(0.3):
                        got_core = await read_one(core)
                    break
                except TimeoutError:
                    continue
        assert got_core.message.data == {"n": 1}
        await got_core.ack()
        states = [e.connected for e in (core, js, core_pub, js_pub)]  # (no mypy narrowing)
        assert all(states)
    finally:
        for endpoint in (core, js, core_pub, js_pub):
            await endpoint.aclose()


@asyncio_test
async def test_jetstream_backlog_is_the_durables_pending_count(nats_server: NatsServer) -> None:
    """`backlog()` (the xrgw_consumer_pending gauge): the server's count of the durable's
    messages not yet acknowledged; core subscriptions have none."""
    stream, prefix = await _stream(nats_server.url)
    await _send(nats_server.url, *(_record(f"{prefix}.x", data={"n": i}) for i in range(4)),
                jetstream=True)
    consumer = _consumer(nats_server.url, stream=stream, durable="pending", max_in_flight=2)
    with pytest.raises(NotConnected):
        await consumer.backlog()
    await consumer.connect()
    try:
        [pending] = await consumer.backlog()
        assert (pending.stream, pending.consumer, pending.messages) == (stream, "pending", 4)
        first = await _read(consumer)
        await first.ack()
        async with asyncio.timeout(TIMEOUT):  # the server counts the ack asynchronously
            while (await consumer.backlog())[0].messages != 3:
                await asyncio.sleep(0.05)
    finally:
        await consumer.aclose()
    core = _consumer(nats_server.url, subjects=[f"{prefix}.core"])
    await core.connect()
    try:
        assert await core.backlog() == []
    finally:
        await core.aclose()
