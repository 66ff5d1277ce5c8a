"""Counting what arrived: Kafka topics (Tansu) and JetStream streams, read from the
start by fresh consumers, into a Tally by sequence number -- never by end offsets (Tansu
reports them one batch short). Also the topics and streams the scenarios create."""

from __future__ import annotations

import asyncio
import time
from collections import Counter

import nats
from aiokafka import AIOKafkaConsumer, TopicPartition  # type: ignore[import-untyped]
from aiokafka.admin import AIOKafkaAdminClient, NewTopic  # type: ignore[import-untyped]
from nats.aio.msg import Msg
from nats.js.api import StorageType, StreamConfig
from proton import Link, Terminus
from proton.reactor import LinkOption
from proton.utils import BlockingConnection

from harness.brokers import Tansu
from harness.faults.tally import Tally
from harness.faults.waiting import patience, until, until_async


async def create_topics(tansu: Tansu, *names: str, partitions: int = 1) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=tansu.bootstrap_servers)
    await admin.start()
    try:
        await admin.create_topics(
            [NewTopic(n, num_partitions=partitions, replication_factor=1) for n in names])
    finally:
        await admin.close()


class KafkaReader:
    """A fresh reader of one single-partition topic from offset 0 (no group: assigned),
    counting every record into `tally`, and by its `xrgw-reason` header (a dead letter's
    reason; `?` without one) into `reasons`, while `run()` is active."""

    def __init__(self, tansu: Tansu, topic: str) -> None:
        self.tansu = tansu
        self.topic = topic
        self.tally = Tally()
        self.reasons: Counter[str] = Counter()
        self.last_arrival = time.monotonic()
        # Set once the reader is assigned, at the start of the topic, and a first fetch has
        # come back: a quiet window opened before that could pass having read nothing.
        self.ready = asyncio.Event()
        self._stop = asyncio.Event()

    async def run(self) -> None:
        consumer = AIOKafkaConsumer(bootstrap_servers=self.tansu.bootstrap_servers,
                                    group_id=None, enable_auto_commit=False,
                                    fetch_max_wait_ms=100)
        await consumer.start()
        try:
            partition = TopicPartition(self.topic, 0)
            consumer.assign([partition])
            await consumer.seek_to_beginning(partition)
            while not self._stop.is_set():
                batch = await consumer.getmany(timeout_ms=100, max_records=5000)
                for records in batch.values():
                    for record in records:
                        headers = dict(record.headers or ())
                        self.reasons[(headers.get("xrgw-reason") or b"?").decode()] += 1
                        self.tally.add(record.value, record.offset)
                        self.last_arrival = time.monotonic()
                if not self.ready.is_set():
                    self.last_arrival = time.monotonic()  # the quiet window starts now
                    self.ready.set()
        finally:
            await consumer.stop()

    def stop(self) -> None:
        self._stop.set()


async def read_kafka(tansu: Tansu, topic: str, *, expect: range | None,
                     quiet: float = 1.0, timeout: float | None = None) -> Tally:
    """A fresh full read of `topic`: until every sequence number of `expect` is there
    (if given) and then nothing new came for `quiet` seconds (late duplicates). The quiet
    window opens only once the reader is connected and its first fetch is back, so an
    "expect nothing" read (`expect=None`) cannot pass having read nothing."""
    if timeout is None:
        timeout = patience(len(expect) if expect is not None else 0)
    reader = KafkaReader(tansu, topic)
    task = asyncio.create_task(reader.run())
    try:
        await until(lambda: reader.ready.is_set() or task.done(), timeout,
                    lambda: f"{topic}: the reader did not connect")
        if task.done():
            task.result()  # the reader failed: raise its error instead of counting nothing
        if expect is not None:
            await until(lambda: reader.tally.unique >= len(expect)
                        and not reader.tally.missing(expect),
                        timeout, lambda: f"{topic}: {reader.tally.unique} of "
                        f"{len(expect)} arrived")
        while time.monotonic() - reader.last_arrival < quiet:
            if task.done():
                break
            await asyncio.sleep(0.1)
    finally:
        reader.stop()
        await task
    return reader.tally


class _DurableTarget(LinkOption):
    def apply(self, link: Link) -> None:
        link.target.durability = Terminus.CONFIGURATION


def declare_durable_queue(url: str, queue: str) -> None:
    """A durable RabbitMQ queue `queue` (RabbitMQ 3.x declares the queue of a
    `/queue/<name>` address durable when the attaching link's terminus is; a plain
    attach declares it transient, and a broker restart erases it with its messages).
    Address it as `/amq/queue/<name>` afterwards: that names an existing queue of any
    durability, where `/queue/<name>` with another durability is refused."""
    connection = BlockingConnection(url, timeout=60)
    try:
        # Attached means declared; the connection's close ends the link (RabbitMQ 3.10
        # left a detach of this link unanswered).
        connection.create_sender(f"/queue/{queue}", options=_DurableTarget())
    finally:
        connection.close()


async def create_stream(url: str, stream: str, subject: str) -> None:
    nc = await nats.connect(url)
    try:
        await nc.jetstream().add_stream(StreamConfig(
            name=stream, subjects=[subject], storage=StorageType.FILE))
    finally:
        await nc.close()


async def jetstream_count(url: str, stream: str) -> int:
    """Messages stored in a JetStream stream (0 while the server is unreachable)."""
    try:
        nc = await nats.connect(url, connect_timeout=1, max_reconnect_attempts=0,
                                allow_reconnect=False)
    except Exception:
        return 0
    try:
        info = await nc.jetstream().stream_info(stream)
        return int(info.state.messages)
    except Exception:
        return 0
    finally:
        await nc.close()


async def read_jetstream(url: str, stream: str, subject: str, expect: range | int,
                         timeout: float = 60.0) -> Tally:
    """Every message of `stream` (an ordered consumer from the start), once all of
    `expect` (or that many messages) is stored."""
    count = expect if isinstance(expect, int) else len(expect)
    await until_async(lambda: jetstream_count(url, stream), count, timeout)
    nc = await nats.connect(url)
    tally = Tally()
    try:
        js = nc.jetstream()
        total = (await js.stream_info(stream)).state.messages
        if not total:
            return tally
        done = asyncio.Event()

        async def collect(msg: Msg) -> None:
            tally.add(msg.data, msg.metadata.sequence.stream)
            if sum(tally.counts.values()) >= total:
                done.set()

        sub = await js.subscribe(subject, stream=stream, ordered_consumer=True, cb=collect)
        try:
            async with asyncio.timeout(timeout):
                await done.wait()
        finally:
            await sub.unsubscribe()
    finally:
        await nc.close()
    return tally
