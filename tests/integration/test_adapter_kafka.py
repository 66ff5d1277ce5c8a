"""The Kafka adapter against a real Tansu broker: round trips, commits, nack, back-pressure."""

from __future__ import annotations

import asyncio
import base64
import time
import uuid
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition  # type: ignore[import-untyped]
from aiokafka.admin import AIOKafkaAdminClient, NewTopic  # type: ignore[import-untyped]
from support import asyncio_test

from adapters.kafka import KafkaConsumer, KafkaOptions, KafkaProducer
from adapters.kafka import consumer as kafka_adapter
from adapters.kafka.liveness import watch_of
from gateway.ports import (
    AlreadySettled,
    Delivery,
    EndOfInput,
    EndpointSettings,
    NotConnected,
    read_one,
    write,
)
from gateway.record import NativeMessage
from harness.brokers import Tansu, free_port
from harness.faults.proxy import FaultProxy

TIMEOUT = 10.0  # generous: the first JoinGroup answer alone takes session_timeout/2



def _uid() -> str:
    return uuid.uuid4().hex[:10]


async def _topic(tansu: Tansu, partitions: int = 1) -> str:
    name = f"xrgw-{_uid()}"
    admin = AIOKafkaAdminClient(bootstrap_servers=tansu.bootstrap_servers)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])
    finally:
        await admin.close()
    return name


async def _committed(tansu: Tansu, topic: str, group: str) -> int | None:
    """The group's committed offset of partition 0, read without joining the group."""
    client = AIOKafkaConsumer(
        bootstrap_servers=tansu.bootstrap_servers, group_id=group, enable_auto_commit=False
    )
    await client.start()  # no subscription: no JoinGroup
    try:
        offset: int | None = await client.committed(TopicPartition(topic, 0))
        return offset
    finally:
        await client.stop()


def _consumer(url: str, topic: str, group: str, **options: Any) -> KafkaConsumer:
    options.setdefault("topics", [topic])
    options.setdefault("consumergroup", group)
    # Tansu holds the first JoinGroup answer for session_timeout/2.
    options.setdefault("session_timeout_ms", 3000)
    options.setdefault("heartbeat_interval_ms", 500)
    return KafkaConsumer(EndpointSettings(url, options=options))


def _producer(url: str, **options: Any) -> KafkaProducer:
    return KafkaProducer(EndpointSettings(url, options=options))


def _record(topic: str, **fields: Any) -> NativeMessage:
    body: dict[str, Any] = {}
    if "data" in fields:
        body["data"] = fields.pop("data")
    if "payload" in fields:
        body["payload"] = fields.pop("payload")
    return NativeMessage("KAFKA", {"topic": topic, **fields}, **body)


async def _read(consumer: KafkaConsumer) -> Delivery:
    async with asyncio.timeout(TIMEOUT):
        return await read_one(consumer)


async def _nothing_more(consumer: KafkaConsumer, seconds: float = 1.0) -> None:
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(seconds):
            await read_one(consumer)


async def _send(url: str, *records: NativeMessage) -> None:
    producer = _producer(url)
    await producer.connect()
    try:
        outcomes = await write(producer, records)
        assert all(o.delivered for o in outcomes), outcomes
    finally:
        await producer.aclose()


def _numbers(deliveries: list[Delivery]) -> list[Any]:
    return [d.message.data["n"] for d in deliveries]  # type: ignore[index,call-overload]


@asyncio_test
async def test_round_trip_key_headers_json_binary(tansu: Tansu) -> None:
    topic = await _topic(tansu)
    headers = [{"name": "ce_type", "value": "sale"}, {"name": "ce_type", "value": "2"}]
    sent = [
        _record(topic, data={"amount": 12.5}, key="store-12", headers=headers),
        _record(
            topic,
            payload=b"\x00\xffraw",
            key_base64=base64.b64encode(b"\xfe\x01").decode(),
            headers=[{"name": "content-type", "value": "image/png"}],
        ),
        # No content type: JSON text is only data when it is an object/array.
        _record(topic, payload=b"21.5"),
        _record(topic, key="gone"),  # no body: a tombstone
    ]
    await _send(tansu.url, *sent)
    consumer = _consumer(tansu.url, topic, f"g-{_uid()}")
    await consumer.connect()
    try:
        got = [await _read(consumer) for _ in sent]
        first, binary, scalar, tombstone = (d.message for d in got)
        assert first.protocol == "KAFKA"
        assert first.data == {"amount": 12.5}
        assert first.get("key") == "store-12" and first.get("key_base64") is None
        assert first.get("headers") == [
            *headers,
            {"name": "content-type", "value": "application/json"},
        ]
        assert [m.get("offset") for m in (first, binary, scalar, tombstone)] == [0, 1, 2, 3]
        assert first.get("topic") == topic and first.get("partition") == 0
        stamp = first.get("timestamp")
        assert isinstance(stamp, int) and abs(stamp / 1000 - time.time()) < 60
        assert binary.payload == b"\x00\xffraw" and not binary.has_json_data
        assert binary.get("key_base64") == base64.b64encode(b"\xfe\x01").decode()
        assert binary.content_type == "image/png"
        assert scalar.payload == b"21.5" and scalar.get("headers") is None
        assert not tombstone.has_body and tombstone.get("key") == "gone"
        for delivery in got:
            await delivery.ack()
        with pytest.raises(AlreadySettled):
            await got[0].ack()
        waiting = asyncio.create_task(read_one(consumer))
        await asyncio.sleep(0.2)
    finally:
        await consumer.aclose()
    with pytest.raises(EndOfInput):  # closing ends a read() that waits for records
        async with asyncio.timeout(TIMEOUT):
            await waiting


@asyncio_test
async def test_producer_honours_partition(tansu: Tansu) -> None:
    topic = await _topic(tansu, partitions=3)
    await _send(tansu.url, _record(topic, data={"n": 1}, partition=2))
    consumer = _consumer(tansu.url, topic, f"g-{_uid()}")
    await consumer.connect()
    try:
        delivery = await _read(consumer)
        assert delivery.message.get("partition") == 2
        await delivery.ack()
    finally:
        await consumer.aclose()


@asyncio_test
async def test_commit_only_contiguous_acks(tansu: Tansu) -> None:
    topic, group = await _topic(tansu), f"g-{_uid()}"
    await _send(tansu.url, *(_record(topic, data={"n": i}) for i in range(6)))
    consumer = _consumer(tansu.url, topic, group)
    await consumer.connect()
    try:
        got = [await _read(consumer) for _ in range(6)]
        assert _numbers(got) == [0, 1, 2, 3, 4, 5]
        for index in (0, 1, 3, 4):  # 2 and 5 stay unsettled: the gateway "crashed"
            await got[index].ack()
    finally:
        await consumer.aclose()
    assert await _committed(tansu, topic, group) == 2  # 3 and 4 lie past the gap

    again = _consumer(tansu.url, topic, group)
    await again.connect()
    try:
        redelivered = [await _read(again) for _ in range(4)]
        # From the first unacked offset on; 3 and 4 were acked but lie past the gap.
        assert _numbers(redelivered) == [2, 3, 4, 5]
        for delivery in redelivered:
            await delivery.ack()
        await _nothing_more(again)
    finally:
        await again.aclose()


@asyncio_test
async def test_nack_with_retry_leads_to_redelivery(tansu: Tansu) -> None:
    topic, group = await _topic(tansu), f"g-{_uid()}"
    await _send(tansu.url, *(_record(topic, data={"n": i}) for i in range(3)))
    consumer = _consumer(tansu.url, topic, group)
    await consumer.connect()
    try:
        zero, one, two = [await _read(consumer) for _ in range(3)]
        await one.nack("downstream unavailable")
        await zero.ack()
        again = [await _read(consumer) for _ in range(2)]
        assert _numbers(again) == [1, 2]
        await two.ack()  # superseded by the rewind: counts for nothing
        assert consumer.unsettled == 2
        await again[0].ack()
        await again[1].nack("poison", retry=False)  # given up on: committed past it
        await _nothing_more(consumer, 0.5)
    finally:
        await consumer.aclose()

    assert await _committed(tansu, topic, group) == 3


@asyncio_test
async def test_bounded_in_flight(tansu: Tansu, monkeypatch: pytest.MonkeyPatch) -> None:
    # A short keepalive, so that the wait below also pauses and polls the partitions.
    monkeypatch.setattr(kafka_adapter, "_KEEPALIVE_SECONDS", 0.1)
    topic = await _topic(tansu)
    await _send(tansu.url, *(_record(topic, data={"n": i}) for i in range(5)))
    consumer = _consumer(tansu.url, topic, f"g-{_uid()}", max_in_flight=3)
    await consumer.connect()
    try:
        held = [await _read(consumer) for _ in range(3)]
        await _nothing_more(consumer, 0.5)  # 3 unsettled: read() waits
        assert consumer._paused  # the keepalive poll ran
        assert consumer.unsettled == 3
        await held[1].ack()  # out of order: frees a slot, commits nothing yet
        fourth = await _read(consumer)
        assert _numbers([fourth]) == [3]
        for delivery in (held[0], held[2], fourth):
            await delivery.ack()
        fifth = await _read(consumer)
        assert _numbers([fifth]) == [4]
        await fifth.ack()
    finally:
        await consumer.aclose()


@asyncio_test
async def test_producer_rejects_record_without_topic(tansu: Tansu) -> None:
    producer = _producer(tansu.url)
    await producer.connect()
    try:
        [outcome] = await write(producer, [NativeMessage("KAFKA", {}, {"x": 1})])
        assert not outcome.delivered and not outcome.retryable
    finally:
        await producer.aclose()


@asyncio_test
async def test_producer_fails_fast_when_broker_down_then_reconnects(tansu: Tansu) -> None:
    topic = f"xrgw-down-{_uid()}"  # auto-created (a restarted Tansu starts empty anyway)
    producer = _producer(tansu.url, connect_timeout=3, publish_timeout=3, reconnect_max=0.5)
    await producer.connect()
    [outcome] = await write(producer, [_record(topic, data={"n": 0})])
    assert outcome.delivered
    await asyncio.to_thread(tansu.stop)
    try:
        async with asyncio.timeout(TIMEOUT):
            outcomes = await write(producer, [_record(topic, data={"n": i}) for i in (1, 2)])
        assert all(not o.delivered and o.retryable for o in outcomes), outcomes
        assert not producer.connected
        began = time.monotonic()
        [outcome] = await write(producer, [_record(topic, data={"n": 3})])
        assert not outcome.delivered and outcome.retryable
        # No waiting once the broker is known gone: the write must not take the connect
        # or publish timeout (3 s each) that trying would cost; half of it leaves a
        # loaded machine's scheduling room without letting a real wait through.
        assert time.monotonic() - began < 1.5
    finally:
        await asyncio.to_thread(tansu.start)
    try:
        async with asyncio.timeout(TIMEOUT):
            while True:
                [outcome] = await write(producer, [_record(topic, data={"n": 4})])
                if outcome.delivered:
                    break
                await asyncio.sleep(0.1)
        assert producer.connected
    finally:
        await producer.aclose()


@asyncio_test
async def test_unreachable_broker_raises_not_connected() -> None:
    url = f"kafka://127.0.0.1:{free_port()}"
    consumer = _consumer(url, "t", "g", connect_timeout=1)
    with pytest.raises(NotConnected):
        await consumer.connect()
    with pytest.raises(NotConnected):
        await read_one(consumer)
    producer = _producer(url, connect_timeout=1)
    with pytest.raises(NotConnected):
        await producer.connect()
    [outcome] = await write(producer, [_record("t", data={"n": 1})])
    assert not outcome.delivered and outcome.retryable


def test_options() -> None:
    opts = KafkaOptions.parse(EndpointSettings("kafka://a:1,b:2,c", options={}))
    assert opts.bootstrap == ("a:1", "b:2", "c:9092")
    assert opts.autooffsetreset == "earliest"
    with pytest.raises(ValueError, match="consumergroup"):
        KafkaConsumer(EndpointSettings("kafka://a:1", options={"topics": ["t"]}))
    with pytest.raises(ValueError, match="topics"):
        KafkaConsumer(EndpointSettings("kafka://a:1", options={"consumergroup": "g"}))
    with pytest.raises(ValueError, match="auto_offset_reset"):
        KafkaOptions.parse(EndpointSettings("kafka://a:1", options={"auto_offset_reset": "x"}))
    with pytest.raises(ValueError, match="scheme"):
        KafkaOptions.parse(EndpointSettings("kafka+ssl://a:1"))


@asyncio_test
async def test_backlog_is_per_partition_end_minus_first_unsettled(tansu: Tansu) -> None:
    """`backlog()` (the xrgw_consumer_lag gauge): per assigned partition, records not yet
    settled by this member; delivered-but-unsettled records still count."""
    topic = await _topic(tansu, partitions=2)
    await _send(tansu.url, *(_record(topic, data={"n": i}, partition=0) for i in range(5)),
                *(_record(topic, data={"n": i}, partition=1) for i in range(2)))
    consumer = _consumer(tansu.url, topic, f"g-{_uid()}")
    with pytest.raises(NotConnected):
        await consumer.backlog()  # before connect(): nothing to ask
    await consumer.connect()
    try:
        # Tansu's ListOffsets answers short (its last batch's base offset + 1); the end is
        # right once a fetch has brought the high watermark, as it does on any broker.
        got = [await _read(consumer) for _ in range(7)]
        lag = {b.partition: b.messages for b in await consumer.backlog()}
        assert lag == {0: 5, 1: 2}  # delivered is not done
        assert {b.topic for b in await consumer.backlog()} == {topic}
        by_partition = {p: [d for d in got if d.message.get("partition") == p] for p in (0, 1)}
        for delivery in by_partition[0][:3]:
            await delivery.ack()
        await by_partition[0][4].ack()  # past the unsettled offset 3: still counts
        for delivery in by_partition[1]:
            await delivery.ack()
        lag = {b.partition: b.messages for b in await consumer.backlog()}
        assert lag == {0: 2, 1: 0}
        await by_partition[0][3].ack()
        assert {b.partition: b.messages for b in await consumer.backlog()} == {0: 0, 1: 0}
    finally:
        await consumer.aclose()


async def _connected_throughout(consumer: KafkaConsumer, seconds: float) -> None:
    """`consumer.connected` sampled every 50 ms for `seconds`: never false."""
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    while loop.time() < end:
        assert consumer.connected, "an idle consumer reported itself not connected"
        await asyncio.sleep(0.05)


async def _until(check: Any, seconds: float, what: str) -> None:
    async with asyncio.timeout(seconds):
        while not check():
            await asyncio.sleep(0.05)
    assert check(), what


@asyncio_test
async def test_an_idle_source_stays_connected_and_a_silent_link_does_not(
        tmp_path: Any) -> None:
    """Through a fault proxy: no records for longer than the liveness threshold leaves the
    consumer connected (the broker answers its long-polls); a blackholed link (every byte
    held, aiokafka neither fails nor reconnects) makes it not connected once a fetch has
    gone unanswered for the threshold, and connected again after the link heals, without
    a reconnect, and the records written meanwhile arrive."""
    broker_port = free_port()
    with FaultProxy(broker_port) as proxy, Tansu(
            port=broker_port, data_dir=tmp_path / "tansu",
            advertised_port=proxy.port) as broker:
        url = f"kafka://{proxy.address}"
        topic = await _topic(broker)
        consumer = _consumer(url, topic, f"g-{_uid()}")
        await consumer.connect()
        reading = asyncio.create_task(read_one(consumer))
        try:
            watch = watch_of(consumer._client)
            assert watch is not None
            threshold = watch.overdue_after
            assert threshold >= 5.0
            await _connected_throughout(consumer, threshold * 1.5)
            proxy.blackhole()
            await _until(lambda: not consumer.connected, threshold + TIMEOUT,
                         "still connected with the link blackholed")
            assert not reading.done()
            client = consumer._client
            proxy.heal()
            await _until(lambda: consumer.connected, 3 * TIMEOUT,
                         "not connected again after the heal")
            assert consumer._client is client  # aiokafka carried on: no rejoin needed
            await _send(url, _record(topic, data={"n": 1}))
            async with asyncio.timeout(3 * TIMEOUT):
                delivery = await reading
            assert _numbers([delivery]) == [1]
        finally:
            reading.cancel()
            await consumer.aclose()
