"""The Kafka adapter moves batches (issue 14), against a real Tansu broker: read_batch()
hands over what is prefetched within `limit` and `max_in_flight`, a burst of acks costs
one commit, submit() returns before the broker confirmed and keeps submit order, and a
batch's Confirmation reports each record's own failure."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition  # type: ignore[import-untyped]
from support import asyncio_test
from test_adapter_kafka import _committed, _consumer, _producer, _record, _topic, _uid

from adapters.kafka import KafkaConsumer, KafkaProducer
from gateway.ports import Delivery, write
from gateway.record import NativeMessage
from harness.brokers import Tansu

TIMEOUT = 10.0


def _numbered(topic: str, numbers: Sequence[int], **fields: Any) -> list[NativeMessage]:
    return [_record(topic, data={"n": n}, **fields) for n in numbers]


async def _produce(url: str, records: Sequence[NativeMessage]) -> None:
    producer = _producer(url)
    await producer.connect()
    try:
        outcomes = await write(producer, records)
        assert all(o.delivered for o in outcomes), outcomes
    finally:
        await producer.aclose()


async def _read_batch(consumer: KafkaConsumer, limit: int) -> list[Delivery]:
    async with asyncio.timeout(TIMEOUT):
        return await consumer.read_batch(limit)


async def _read_all(consumer: KafkaConsumer, count: int, limit: int = 1000) -> list[list[Delivery]]:
    """Batches until `count` deliveries arrived."""
    batches: list[list[Delivery]] = []
    while sum(map(len, batches)) < count:
        batches.append(await _read_batch(consumer, limit))
    return batches


def _offsets(deliveries: Sequence[Delivery]) -> list[Any]:
    return [d.message.get("offset") for d in deliveries]


def _numbers(deliveries: Sequence[Delivery]) -> list[Any]:
    return [d.message.data["n"] for d in deliveries]  # type: ignore[index,call-overload]


async def _topic_numbers(tansu: Tansu, topic: str, count: int) -> list[Any]:
    """The `n` of the first `count` records of partition 0, in offset order."""
    consumer = _consumer(tansu.url, topic, f"check-{_uid()}")
    await consumer.connect()
    got: list[Delivery] = []
    try:
        while len(got) < count:
            batch = await _read_batch(consumer, count - len(got))
            got += batch
            for delivery in batch:
                await delivery.ack()  # room for the next batch (max_in_flight)
        return _numbers(got)
    finally:
        await consumer.aclose()


# ---------------------------------------------------------------------------- reading


@asyncio_test
async def test_read_batch_returns_what_is_waiting_up_to_limit(tansu: Tansu) -> None:
    topic = await _topic(tansu)
    await _produce(tansu.url, _numbered(topic, range(10)))
    consumer = _consumer(tansu.url, topic, f"g-{_uid()}")
    await consumer.connect()
    try:
        first = await _read_batch(consumer, 4)
        assert _offsets(first) == [0, 1, 2, 3]  # 10 waiting: the limit, not one
        rest = await _read_batch(consumer, 100)
        assert _offsets(rest) == [4, 5, 6, 7, 8, 9]  # every one waiting, fewer than 100
        assert consumer.unsettled == 10
        for delivery in first + rest:
            await delivery.ack()
        assert consumer.unsettled == 0
    finally:
        await consumer.aclose()


@asyncio_test
async def test_read_batch_is_bounded_by_max_in_flight(tansu: Tansu) -> None:
    topic = await _topic(tansu)
    await _produce(tansu.url, _numbered(topic, range(12)))
    consumer = _consumer(tansu.url, topic, f"g-{_uid()}", max_in_flight=5)
    await consumer.connect()
    try:
        held = await _read_batch(consumer, 100)
        assert _numbers(held) == [0, 1, 2, 3, 4]  # the room, not the limit
        with pytest.raises(TimeoutError):  # full: waits for a settlement
            async with asyncio.timeout(0.5):
                await consumer.read_batch(100)
        await held[3].ack()
        await held[4].ack()
        more = await _read_batch(consumer, 100)
        assert _numbers(more) == [5, 6]  # two slots freed, two records
        for delivery in (*held[:3], *more):
            await delivery.ack()
        last = await _read_batch(consumer, 100)
        assert _numbers(last) == [7, 8, 9, 10, 11]
        for delivery in last:
            await delivery.ack()
    finally:
        await consumer.aclose()


@asyncio_test
async def test_read_batch_spans_partitions_each_in_offset_order(tansu: Tansu) -> None:
    topic = await _topic(tansu, partitions=3)
    per_partition = 20
    records = [_record(topic, data={"n": n, "p": p}, partition=p)
               for n in range(per_partition) for p in range(3)]
    await _produce(tansu.url, records)
    consumer = _consumer(tansu.url, topic, f"g-{_uid()}")
    await consumer.connect()
    try:
        batches = await _read_all(consumer, 3 * per_partition)
        assert len(batches) < 3 * per_partition / 2  # batches, not one record per read
        got = [d for batch in batches for d in batch]
        for p in range(3):
            mine = [d for d in got if d.message.get("partition") == p]
            assert _offsets(mine) == list(range(per_partition))
            assert _numbers(mine) == list(range(per_partition))
        for delivery in got:
            await delivery.ack()
    finally:
        await consumer.aclose()


@asyncio_test
async def test_nack_in_a_batch_redelivers_from_that_offset(tansu: Tansu) -> None:
    topic, group = await _topic(tansu), f"g-{_uid()}"
    await _produce(tansu.url, _numbered(topic, range(6)))
    consumer = _consumer(tansu.url, topic, group)
    await consumer.connect()
    try:
        batch = await _read_batch(consumer, 100)
        assert _numbers(batch) == [0, 1, 2, 3, 4, 5]
        await batch[0].ack()
        await batch[1].ack()
        await batch[2].nack("downstream unavailable")
        for delivery in batch[3:]:
            await delivery.ack()  # superseded by the rewind: count for nothing
        assert consumer.unsettled == 0
        again = await _read_batch(consumer, 100)
        assert _numbers(again) == [2, 3, 4, 5]
        for delivery in again:
            await delivery.ack()
    finally:
        await consumer.aclose()
    assert await _committed(tansu, topic, group) == 6


# ---------------------------------------------------------------------------- settling


def _count_commits(consumer: KafkaConsumer) -> list[dict[Any, int]]:
    """Every commit request the consumer makes from now on (what it commits)."""
    calls: list[dict[Any, int]] = []
    client = consumer._client
    real = client.commit

    async def commit(offsets: dict[Any, int]) -> None:
        calls.append(dict(offsets))
        await real(offsets)

    client.commit = commit
    return calls


@asyncio_test
async def test_a_burst_of_acks_is_one_commit_without_io_per_ack(tansu: Tansu) -> None:
    topic, group = await _topic(tansu, partitions=3), f"g-{_uid()}"
    counts = {0: 7, 1: 5, 2: 9}
    await _produce(tansu.url, [_record(topic, data={"n": n}, partition=p)
                               for p, count in counts.items() for n in range(count)])
    consumer = _consumer(tansu.url, topic, group)
    await consumer.connect()
    try:
        got = [d for batch in await _read_all(consumer, sum(counts.values())) for d in batch]
        commits = _count_commits(consumer)
        tasks_before = len(asyncio.all_tasks())
        for delivery in got:
            settling = delivery.ack()
            # The settlement finishes in one step: it awaits no I/O.
            with pytest.raises(StopIteration):
                settling.send(None)
        assert len(asyncio.all_tasks()) <= tasks_before + 1  # one commit task, not one per ack
        assert commits == []  # nothing yet: the burst is not over until the settler yields
        async with asyncio.timeout(TIMEOUT):
            while consumer._commits._task is not None and not consumer._commits._task.done():
                await asyncio.sleep(0.01)
        assert commits == [{TopicPartition(topic, p): count for p, count in counts.items()}]
    finally:
        await consumer.aclose()
    assert await _committed(tansu, topic, group) == counts[0]


@asyncio_test
async def test_acks_arriving_during_a_commit_make_one_more(tansu: Tansu) -> None:
    topic, group = await _topic(tansu), f"g-{_uid()}"
    await _produce(tansu.url, _numbered(topic, range(30)))
    consumer = _consumer(tansu.url, topic, group)
    await consumer.connect()
    try:
        got = [d for batch in await _read_all(consumer, 30) for d in batch]
        commits = _count_commits(consumer)
        for delivery in got[:10]:
            await delivery.ack()
        await asyncio.sleep(0)  # the commit of the first burst is under way
        for burst in (got[10:20], got[20:]):
            for delivery in burst:
                await delivery.ack()
            await asyncio.sleep(0)
        async with asyncio.timeout(TIMEOUT):
            while consumer._commits._task is not None and not consumer._commits._task.done():
                await asyncio.sleep(0.01)
        tp = TopicPartition(topic, 0)
        assert commits == [{tp: 10}, {tp: 30}]  # the later bursts coalesced
    finally:
        await consumer.aclose()
    assert await _committed(tansu, topic, group) == 30


# ---------------------------------------------------------------------------- producing


@asyncio_test
async def test_submit_returns_before_the_broker_confirmed(tansu: Tansu) -> None:
    topic = await _topic(tansu)
    # A long linger holds the batch in the client: the broker cannot have confirmed
    # anything when submit() returns.
    producer = _producer(tansu.url, linger_ms=400)
    await producer.connect()
    try:
        await write(producer, _numbered(topic, [0]))  # metadata of the topic is known
        began = time.monotonic()
        confirmation = await producer.submit(_numbered(topic, range(1, 51)))
        submitted = time.monotonic() - began
        outcomes = await confirmation
        confirmed = time.monotonic() - began
        assert submitted < 0.2 and confirmed >= 0.3, (submitted, confirmed)
        assert len(outcomes) == 50 and all(o.delivered for o in outcomes)
    finally:
        await producer.aclose()
    assert await _topic_numbers(tansu, topic, 51) == list(range(51))


@asyncio_test
async def test_a_producer_whose_senders_wait_connects_with_the_shorter_linger(
        tansu: Tansu) -> None:
    topic = await _topic(tansu)
    producer = _producer(tansu.url)
    producer.for_waiting_senders()
    await producer.connect()
    try:
        # aiokafka keeps it in seconds on its accumulator (read here only: the gateway
        # passes `linger_ms` to the client and reads nothing of it back).
        assert producer._client._message_accumulator._linger_time == pytest.approx(
            producer.linger_ms / 1000)
        assert producer.linger_ms < 5
        assert all(o.delivered for o in await write(producer, _numbered(topic, [0, 1])))
    finally:
        await producer.aclose()
    assert await _topic_numbers(tansu, topic, 2) == [0, 1]


def _yielding_sends(producer: KafkaProducer) -> None:
    """Make every send() of the producer's client yield to the loop first, as a send that
    waits for metadata or for room in a full batch does."""
    client = producer._client
    real = client.send

    async def send(*args: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(0)
        return await real(*args, **kwargs)

    client.send = send


@asyncio_test
async def test_submits_in_flight_together_keep_submit_order(tansu: Tansu) -> None:
    topic = await _topic(tansu)
    producer = _producer(tansu.url)
    await producer.connect()
    try:
        await write(producer, [_record(topic, data={"n": -1})])  # metadata first
        _yielding_sends(producer)
        # Three submits at once: while one waits in a send, the next must not slip its
        # records in between.
        submits = [producer.submit(_numbered(topic, range(start, start + 40)))
                   for start in (0, 40, 80)]
        confirmations = await asyncio.gather(*submits)  # all three before any confirms
        for confirmation in reversed(confirmations):  # waiting order does not matter
            outcomes = await confirmation
            assert all(o.delivered for o in outcomes), outcomes
    finally:
        await producer.aclose()
    assert await _topic_numbers(tansu, topic, 121) == list(range(-1, 120))


@asyncio_test
async def test_small_batches_keep_order_across_submits(tansu: Tansu) -> None:
    topic = await _topic(tansu)
    # Batches of about five records: the sends wait for room while earlier batches of
    # the same and of earlier submits are still under way.
    producer = _producer(tansu.url, max_batch_size=1024, linger_ms=0)
    await producer.connect()
    pad = "x" * 150
    try:
        confirmations = [await producer.submit([_record(topic, data={"n": n, "pad": pad})
                                                for n in range(start, start + 40)])
                         for start in (0, 40, 80)]
        for confirmation in confirmations:
            outcomes = await confirmation
            assert all(o.delivered for o in outcomes), outcomes
    finally:
        await producer.aclose()
    assert await _topic_numbers(tansu, topic, 120) == list(range(120))


@asyncio_test
async def test_confirmation_reports_each_records_own_failure(tansu: Tansu) -> None:
    topic = await _topic(tansu)
    producer = _producer(tansu.url)
    await producer.connect()
    too_large = _record(topic, payload=b"x" * (2 << 20))  # over max_request_size (1 MiB)
    batch = [
        _record(topic, data={"n": 0}),
        NativeMessage("KAFKA", {}, {"n": "no topic"}),
        _record(topic, data={"n": 1}),
        too_large,
        _record(topic, data={"n": 2}),
    ]
    try:
        outcomes = await write(producer, batch)
        assert [o.delivered for o in outcomes] == [True, False, True, False, True]
        assert not outcomes[1].retryable and "topic" in (outcomes[1].reason or "")
        assert not outcomes[3].retryable and "Size" in (outcomes[3].reason or "")
        assert producer.connected  # verdicts on records, not on the link
    finally:
        await producer.aclose()
    assert await _topic_numbers(tansu, topic, 3) == [0, 1, 2]


@asyncio_test
async def test_records_keep_their_partition_and_an_unknown_one_fails_alone(tansu: Tansu) -> None:
    """Records are packed per partition: explicit partitions, keyed records and one for a
    partition the topic does not have (its own verdict; the others are delivered)."""
    topic = await _topic(tansu, partitions=3)
    producer = _producer(tansu.url)
    await producer.connect()
    batch = [_record(topic, partition=n % 3, data={"n": n}) for n in range(9)]
    batch.insert(4, _record(topic, partition=7, data={"n": "nowhere"}))
    try:
        outcomes = await write(producer, batch)
        assert [o.delivered for o in outcomes] == [True] * 4 + [False] + [True] * 5
        assert not outcomes[4].retryable and "partition 7" in (outcomes[4].reason or "")
        assert producer.connected
    finally:
        await producer.aclose()
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=tansu.bootstrap_servers,
                                auto_offset_reset="earliest", enable_auto_commit=False)
    await consumer.start()
    try:
        seen: dict[int, list[int]] = {}
        async with asyncio.timeout(30):
            while sum(len(v) for v in seen.values()) < 9:
                for tp, records in (await consumer.getmany(timeout_ms=500)).items():
                    seen.setdefault(tp.partition, []).extend(
                        json.loads(r.value)["n"] for r in records)
    finally:
        await consumer.stop()
    assert seen == {0: [0, 3, 6], 1: [1, 4, 7], 2: [2, 5, 8]}


@asyncio_test
async def test_a_batch_moves_from_consumer_to_producer(tansu: Tansu) -> None:
    """The engine's loop in small: read_batch -> submit -> confirmation -> ack all."""
    source, sink, group = await _topic(tansu), await _topic(tansu), f"g-{_uid()}"
    count = 500
    await _produce(tansu.url, _numbered(source, range(count)))
    consumer = _consumer(tansu.url, source, group, max_in_flight=200)
    producer = _producer(tansu.url, topic=sink)
    await consumer.connect()
    await producer.connect()
    try:
        moved = 0
        reads = 0
        while moved < count:
            batch = await _read_batch(consumer, 1000)
            reads += 1
            assert len(batch) <= 200
            out = [NativeMessage("KAFKA", {}, d.message.data) for d in batch]
            outcomes = await (await producer.submit(out))
            assert all(o.delivered for o in outcomes)
            for delivery in batch:
                await delivery.ack()
            moved += len(batch)
        assert reads < count / 10
    finally:
        await consumer.aclose()
        await producer.aclose()
    assert await _committed(tansu, source, group) == count
    assert await _topic_numbers(tansu, sink, count) == list(range(count))
