"""The Kafka consumer's commit tracking without a broker: a fake aiokafka client records
what would be committed. The committed offset of a partition is the one after the
contiguous settled prefix of what was handed out (never past an unsettled offset: a crash
would lose it), a `nack(retry=False)` settles like an ack, a `nack(retry=True)` rewinds,
and a revoked or superseded delivery settles nothing."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from aiokafka import TopicPartition  # type: ignore[import-untyped]
from aiokafka.errors import KafkaError  # type: ignore[import-untyped]

from adapters import _kafka_commits
from adapters.kafka import KafkaConsumer
from gateway.ports import Delivery, EndpointSettings

T0 = TopicPartition("orders", 0)
T1 = TopicPartition("orders", 1)


@dataclass
class _Record:  # what aiokafka's ConsumerRecord carries and the adapter reads
    topic: str
    partition: int
    offset: int
    timestamp: int = 0
    key: bytes | None = None
    value: bytes | None = b"{}"
    headers: tuple[tuple[str, bytes], ...] = ()


@dataclass
class _FakeClient:
    """Answers getmany() from a queue of batches; records commits and seeks."""

    batches: list[dict[Any, list[_Record]]] = field(default_factory=list)
    commits: list[dict[Any, int]] = field(default_factory=list)
    seeks: list[tuple[Any, int]] = field(default_factory=list)
    fail_commits: int = 0

    async def getmany(self, timeout_ms: int = 0, max_records: int | None = None) -> Any:
        return self.batches.pop(0) if self.batches else {}

    async def commit(self, offsets: dict[Any, int]) -> None:
        if self.fail_commits:
            self.fail_commits -= 1
            raise KafkaError("coordinator not available")
        self.commits.append(dict(offsets))

    def seek(self, tp: Any, offset: int) -> None:
        self.seeks.append((tp, offset))

    def assignment(self) -> set[Any]:
        return {T0, T1}

    async def end_offsets(self, tps: list[Any]) -> dict[Any, int]:
        return {tp: 10 for tp in tps}

    def highwater(self, tp: Any) -> int:
        return 10

    async def committed(self, tp: Any) -> int | None:
        return 0

    def pause(self, *tps: Any) -> None: ...
    def resume(self, *tps: Any) -> None: ...
    async def stop(self) -> None: ...


def _records(tp: Any, *offsets: int) -> list[_Record]:
    return [_Record(tp.topic, tp.partition, o) for o in offsets]


def _consumer(client: _FakeClient) -> KafkaConsumer:
    consumer = KafkaConsumer(EndpointSettings(
        "kafka://127.0.0.1:9092", options={"topics": ["orders"], "consumergroup": "g"}))
    consumer._client = client  # connected: connect() would join a real group
    return consumer


async def _settled() -> None:
    """Let the background commit task run (it commits once the settling burst yields)."""
    for _ in range(5):
        await asyncio.sleep(0)


def _by_offset(deliveries: list[Delivery]) -> dict[tuple[int, int], Delivery]:
    return {(d.message.fields["partition"], d.message.fields["offset"]): d  # type: ignore[misc]
            for d in deliveries}


def test_commits_the_contiguous_acked_prefix_of_one_batch_per_partition() -> None:
    async def scenario() -> None:
        client = _FakeClient([{T0: _records(T0, 10, 11, 12, 13, 14), T1: _records(T1, 0, 1)}])
        consumer = _consumer(client)
        got = _by_offset(await consumer.read_batch(100))  # the batch path: one getmany
        assert len(got) == 7 and consumer.unsettled == 7
        await got[0, 11].ack()
        await got[0, 12].ack()
        await _settled()
        assert client.commits == []  # 10 is not settled: nothing contiguous yet
        await got[0, 10].ack()
        await _settled()
        assert client.commits == [{T0: 13}]  # the next offset to read, not 14 or 15
        await got[0, 14].ack()
        await _settled()
        assert client.commits == [{T0: 13}]  # 13 still open
        await got[0, 13].nack("rejected", retry=False)  # settled for good: counts
        await _settled()
        assert client.commits[-1] == {T0: 15}
        await got[1, 1].ack()
        await got[1, 0].ack()
        await _settled()
        assert client.commits[-1] == {T1: 2}
        assert consumer.unsettled == 0 and client.seeks == []

    asyncio.run(scenario())


def test_a_burst_of_acks_over_two_partitions_is_one_commit() -> None:
    async def scenario() -> None:
        client = _FakeClient([{T0: _records(T0, 0, 1), T1: _records(T1, 5)}])
        consumer = _consumer(client)
        for delivery in await consumer.read_batch(100):
            await delivery.ack()
        await _settled()
        assert client.commits == [{T0: 2, T1: 6}]

    asyncio.run(scenario())


def test_nack_for_retry_rewinds_and_later_settlements_of_the_old_deliveries_are_void() -> None:
    async def scenario() -> None:
        client = _FakeClient([{T0: _records(T0, 0, 1, 2, 3)}])
        consumer = _consumer(client)
        first = _by_offset(await consumer.read_batch(100))
        await first[0, 0].ack()
        await first[0, 1].nack("sink down", retry=True)
        await _settled()
        assert client.seeks == [(T0, 1)]
        assert client.commits == [{T0: 1}]
        # 2 and 3 are delivered again after the seek: their old settlements commit nothing.
        await first[0, 2].ack()
        await _settled()
        assert client.commits == [{T0: 1}]
        assert consumer.unsettled == 1
        [lag] = [lag for lag in await consumer.backlog() if lag.partition == 0]
        assert lag.messages == 9  # from the rewound offset 1 (of an end of 10)
        client.batches.append({T0: _records(T0, 1, 2, 3)})
        again = _by_offset(await consumer.read_batch(100))
        # A stale delivery nacked again must not rewind (nor void) the new deliveries.
        await first[0, 3].nack("late", retry=True)
        for offset in (1, 2, 3):
            await again[0, offset].ack()
        await _settled()
        assert client.commits[-1] == {T0: 4}
        assert client.seeks == [(T0, 1)]

    asyncio.run(scenario())


def test_revoked_partitions_commit_what_is_settled_and_forget_the_rest() -> None:
    async def scenario() -> None:
        client = _FakeClient([{T0: _records(T0, 0, 1, 2)}])
        consumer = _consumer(client)
        got = _by_offset(await consumer.read_batch(100))
        await got[0, 0].ack()  # dirty, commit task not run yet
        await consumer._commits.revoked([T0])
        assert {T0: 1} in client.commits
        before = list(client.commits)
        await got[0, 1].ack()  # no longer ours: the new owner redelivers from 1
        await got[0, 2].nack("late", retry=True)  # nor ours to rewind
        await _settled()
        assert client.commits == before
        assert client.seeks == []

    asyncio.run(scenario())


def test_a_failed_commit_is_retried_with_the_newest_offset(monkeypatch: Any) -> None:
    monkeypatch.setattr(_kafka_commits, "_COMMIT_RETRY_SECONDS", 0.0)

    async def scenario() -> None:
        client = _FakeClient([{T0: _records(T0, 0, 1)}], fail_commits=1)
        consumer = _consumer(client)
        got = _by_offset(await consumer.read_batch(100))
        await got[0, 0].ack()
        await _settled()
        await got[0, 1].ack()
        for _ in range(20):
            await asyncio.sleep(0)
        assert client.commits[-1] == {T0: 2}
        assert all(c[T0] <= 2 for c in client.commits)

    asyncio.run(scenario())


def test_two_batches_of_one_partition_share_its_slots_and_count() -> None:
    async def scenario() -> None:
        client = _FakeClient([{T0: _records(T0, 0, 1)}, {T0: _records(T0, 2, 3)}])
        consumer = _consumer(client)
        first = _by_offset(await consumer.read_batch(100))
        second = _by_offset(await consumer.read_batch(100))
        assert consumer.unsettled == 4
        assert all(isinstance(d.message.received_at, str) for d in [*first.values(),
                                                                     *second.values()])
        await second[0, 2].ack()
        await second[0, 3].ack()
        await _settled()
        assert client.commits == []  # 0 and 1 (the first batch) are still open
        await first[0, 0].ack()
        await first[0, 1].ack()
        await _settled()
        assert client.commits == [{T0: 4}]

    asyncio.run(scenario())


def test_backlog_counts_from_the_first_unsettled_or_the_next_offset() -> None:
    async def scenario() -> None:
        client = _FakeClient([{T0: _records(T0, 0, 1, 2)}])
        consumer = _consumer(client)
        got = _by_offset(await consumer.read_batch(100))
        lags = {lag.partition: lag for lag in await consumer.backlog()}
        assert lags[0].messages == 10  # from offset 0, the first unsettled
        assert lags[1].messages == 10  # nothing handed out: from the committed offset 0
        await got[0, 0].ack()
        lags = {lag.partition: lag for lag in await consumer.backlog()}
        assert lags[0].messages == 9
        await got[0, 1].ack()
        await got[0, 2].ack()
        lags = {lag.partition: lag for lag in await consumer.backlog()}
        assert lags[0].messages == 7  # all settled: from the next offset, 3

    asyncio.run(scenario())
