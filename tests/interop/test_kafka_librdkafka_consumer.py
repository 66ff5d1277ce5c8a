"""The gateway's Kafka producer with each `compression_type`, read by librdkafka
(`confluent-kafka`): the batches on the broker really are in that codec, and a consumer
nobody here wrote reads every record intact (key, headers, JSON body)."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer  # type: ignore[import-untyped]
from aiokafka.admin import AIOKafkaAdminClient, NewTopic  # type: ignore[import-untyped]
from aiokafka.consumer import fetcher  # type: ignore[import-untyped]
from aiokafka.structs import TopicPartition  # type: ignore[import-untyped]
from confluent_kafka import OFFSET_BEGINNING, Consumer  # type: ignore[import-untyped]
from confluent_kafka import TopicPartition as RdPartition

from adapters.kafka import KafkaProducer
from adapters.kafka.fetch import FramedRecords
from gateway.ports import EndpointSettings
from gateway.protocols import KAFKA
from gateway.record import NativeMessage
from harness.brokers import Tansu

pytestmark = pytest.mark.integration

COUNT = 40
#: Kafka's codec numbers (record batch attributes, low three bits).
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


@pytest.fixture(scope="module")
def tansu() -> Iterator[Tansu]:
    broker = Tansu()
    try:
        broker.start()
        yield broker
    finally:
        broker.close()


async def _send(url: str, bootstrap: str, topic: str, codec: str) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, 1, 1)])
    finally:
        await admin.close()
    producer = KafkaProducer(EndpointSettings(url, options={
        "topic": topic, "compression_type": codec, "linger_ms": 50}))
    await producer.connect()
    try:
        records = [NativeMessage(KAFKA, {"key": f"dev-{i % 4}",
                                         "headers": [{"name": "n", "value": str(i)}]},
                                 data={"i": i, "pad": "x" * 200}) for i in range(COUNT)]
        outcomes = await (await producer.submit(records))
        assert all(o.delivered for o in outcomes), outcomes
    finally:
        await producer.aclose()


async def _codecs_on_the_broker(bootstrap: str, topic: str) -> set[int]:
    """The codec of every batch of `topic`, as a consumer fetches them."""
    seen: set[int] = set()

    class Spy(FramedRecords):
        def next_batch(self) -> Any:
            batch = super().next_batch()
            seen.add(batch.compression_type)
            return batch

    fetcher.MemoryRecords = Spy
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    try:
        await consumer.start()
        consumer.assign([TopicPartition(topic, 0)])
        got = 0
        async with asyncio.timeout(60):
            while got < COUNT:
                got += sum(len(r) for r in (await consumer.getmany(timeout_ms=300)).values())
    finally:
        await consumer.stop()
        fetcher.MemoryRecords = FramedRecords
    return seen


def _librdkafka_reads(bootstrap: str, topic: str) -> list[Any]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"rd-{topic}",
                         "enable.auto.commit": False})
    consumer.assign([RdPartition(topic, 0, OFFSET_BEGINNING)])  # no group join: quicker
    out: list[Any] = []
    try:
        for _ in range(600):  # at most a minute
            if len(out) >= COUNT:
                break
            msg = consumer.poll(0.1)
            if msg is not None:
                assert msg.error() is None, msg.error()
                out.append(msg)
    finally:
        consumer.close()
    return out


@pytest.mark.parametrize("codec", list(CODEC_IDS))
def test_librdkafka_reads_what_the_gateway_writes_in_each_codec(tansu: Tansu,
                                                                codec: str) -> None:
    topic = f"out-{codec}-{uuid.uuid4().hex[:8]}"
    asyncio.run(_send(tansu.url, tansu.bootstrap_servers, topic, codec))
    assert asyncio.run(_codecs_on_the_broker(tansu.bootstrap_servers, topic)) == {
        CODEC_IDS[codec]}
    messages = _librdkafka_reads(tansu.bootstrap_servers, topic)
    assert sorted(json.loads(m.value())["i"] for m in messages) == list(range(COUNT))
    for msg in messages:
        i = json.loads(msg.value())["i"]
        assert msg.key() == f"dev-{i % 4}".encode()
        assert ("n", str(i).encode()) in msg.headers()
