"""The Kafka consumer's commit tracking without a broker: a fake aiokafka client records
what would be committed. The committed offset of a partition is the one after the
contiguous settled prefix of what was handed out (never past an unsettled offset: a crash
would lose it), a `nack(retry=False)` settles like an ack, a `nack(retry=True)` rewinds,
and a revoked or superseded delivery settles nothing.

The first tests go through KafkaConsumer (the batch path, backlog); the later ones drive
the tracking itself (`adapters/kafka/commits.py`, `Commits`) with a fake that has only
what it uses of the client, `commit(offsets)` and `seek(tp, offset)`: commit failures,
flushing with a timeout, revocation and the client going away."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiokafka import TopicPartition  # type: ignore[import-untyped]
from aiokafka.errors import (  # type: ignore[import-untyped]
    CommitFailedError,
    IllegalStateError,
    KafkaError,
)
from hypothesis import given
from hypothesis import strategies as st

from adapters.kafka import KafkaConsumer
from adapters.kafka import commits as _kafka_commits
from adapters.kafka.commits import Commits
from gateway.ports import (
    Delivery,
    EndpointSettings,
    NotConnected,
    ack_all,
    answer_nobody,
    defer_bodies,
)

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


def test_a_new_consumer_is_not_connected_until_it_joins() -> None:
    async def scenario() -> None:
        consumer = KafkaConsumer(EndpointSettings(
            "kafka://127.0.0.1:9092", options={"topics": ["orders"], "consumergroup": "g"}))
        assert not consumer.connected
        assert consumer.unsettled == 0
        with pytest.raises(NotConnected):
            await consumer.read_batch(10)
        with pytest.raises(NotConnected):
            await consumer.backlog()

    asyncio.run(scenario())


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


# ---------------------------------------------------------------------------- the tracking

RECEIVED = "2026-11-24T10:00:00Z"
T9 = TopicPartition("orders", 9)  # never assigned, never delivered


class _Committer:
    """What the tracking uses of the client. `failures` are raised by the next commits,
    one each; the next `hang` commits never answer (until cancelled)."""

    def __init__(self) -> None:
        self.attempts: list[dict[Any, int]] = []  # every commit request, failed ones too
        self.commits: list[dict[Any, int]] = []  # the successful ones
        self.seeks: list[tuple[Any, int]] = []
        self.failures: list[BaseException] = []
        self.hang = 0
        self.held: asyncio.Event | None = None  # while set, commits wait for it

    async def commit(self, offsets: dict[Any, int]) -> None:
        self.attempts.append(dict(offsets))
        if self.hang:
            self.hang -= 1
            await asyncio.Event().wait()
        if self.held is not None:
            await self.held.wait()
        if self.failures:
            raise self.failures.pop(0)
        self.commits.append(dict(offsets))

    def seek(self, tp: Any, offset: int) -> None:
        self.seeks.append((tp, offset))


def _tracking(client: _Committer | None,
              fetched: dict[Any, list[_Record]]) -> tuple[Commits, dict[tuple[int, int], Delivery]]:
    commits = Commits()  # no client: as before the consumer connects
    if client is not None:
        commits.client = client
    return commits, _by_offset(commits.deliver(fetched, RECEIVED))


def _bounded(scenario: Any) -> None:
    """Runs a scenario; one that waits forever (a flush without its timeout) fails."""
    async def run() -> None:
        async with asyncio.timeout(2):
            await scenario()

    asyncio.run(run())


async def _spin(rounds: int = 20) -> None:
    for _ in range(rounds):
        await asyncio.sleep(0)


def test_deliveries_come_partition_by_partition_with_the_batch_receive_time() -> None:
    async def scenario() -> None:
        commits = Commits()
        out = commits.deliver({T0: _records(T0, 5, 6), T1: _records(T1, 0)}, RECEIVED)
        assert [(d.message.fields["partition"], d.message.fields["offset"])
                for d in out] == [(0, 5), (0, 6), (1, 0)]
        assert {d.message.received_at for d in out} == {RECEIVED}
        assert commits.unsettled == 3
        assert (commits.first_unsettled(T0), commits.first_unsettled(T1)) == (5, 0)

    _bounded(scenario)


def test_each_delivery_carries_the_answer_its_record_asks_for() -> None:
    """Request-reply: with an answerer (a route that answers), every delivery carries
    what it says of its own record -- a record with nowhere to answer, None; without
    one (no route answers), no delivery carries an answer."""
    async def scenario() -> None:
        asked: list[int] = []

        def answerer(record: Any) -> Any:
            asked.append(record.offset)
            return None if record.offset == 6 else ("answer", record.offset)

        commits = Commits()
        commits.answerer = answerer
        out = commits.deliver({T0: _records(T0, 5, 6, 7)}, RECEIVED)
        answers: list[Any] = [d.answer for d in out]
        assert answers == [("answer", 5), None, ("answer", 7)]
        assert asked == [5, 6, 7]
        plain = Commits().deliver({T0: _records(T0, 8)}, RECEIVED)
        assert [d.answer for d in plain] == [None]

    _bounded(scenario)


def test_a_consumer_told_to_answer_nobody_stops_looking_for_reply_topics() -> None:
    """`ports.answer_nobody`: the consumer's commit tracking has the reply sender's
    answerer (records naming a reply topic get a hook) until the route says it answers
    nobody; then it has none, and no delivery carries an answer."""
    consumer = _consumer(_FakeClient())
    assert consumer._commits.answerer is not None
    assert answer_nobody(consumer)
    assert consumer._commits.answerer is None


def test_first_unsettled_is_the_first_open_offset_then_the_next_one() -> None:
    async def scenario() -> None:
        commits = Commits()
        commits.assigned([T0])
        assert commits.first_unsettled(T0) is None  # assigned, nothing handed out yet
        assert commits.first_unsettled(T9) is None  # not ours at all
        got = _by_offset(commits.deliver({T0: _records(T0, 5, 6, 7)}, RECEIVED))
        assert commits.first_unsettled(T0) == 5
        await got[0, 6].ack()
        assert commits.first_unsettled(T0) == 5  # 6 lies past the open 5
        await got[0, 5].ack()
        assert commits.first_unsettled(T0) == 7
        await got[0, 7].ack()
        assert commits.first_unsettled(T0) == 8  # all settled: the next to hand out
        assert commits.unsettled == 0

    _bounded(scenario)


def test_a_new_assignment_keeps_the_deliveries_of_partitions_still_owned() -> None:
    async def scenario() -> None:
        client = _Committer()
        commits, got = _tracking(client, {T0: _records(T0, 0, 1)})
        commits.assigned([T0, T1])
        assert commits.first_unsettled(T0) == 0
        assert commits.first_unsettled(T1) is None
        for offset in (0, 1):
            await got[0, offset].ack()
        more = _by_offset(commits.deliver({T1: _records(T1, 3)}, RECEIVED))
        await more[1, 3].ack()
        await _spin()
        assert client.commits == [{T0: 2, T1: 4}]

    _bounded(scenario)


def test_a_burst_of_acks_starts_one_commit_task_and_acks_during_a_commit_make_one_more(
) -> None:
    async def scenario() -> None:
        client = _Committer()
        client.held = asyncio.Event()
        _, got = _tracking(client, {T0: _records(T0, *range(10))})
        before = len(asyncio.all_tasks())
        for offset in range(5):
            await got[0, offset].ack()
        assert len(asyncio.all_tasks()) == before + 1
        await _spin()
        assert client.attempts == [{T0: 5}]  # under way, held
        for offset in range(5, 10):
            await got[0, offset].ack()
        assert len(asyncio.all_tasks()) == before + 1  # the running loop takes them
        client.held.set()
        await _spin()
        assert client.commits == [{T0: 5}, {T0: 10}]
        assert len(asyncio.all_tasks()) == before

    _bounded(scenario)


def test_without_a_client_settling_works_and_the_offsets_wait_for_one() -> None:
    async def scenario() -> None:
        commits, got = _tracking(None, {T0: _records(T0, 0, 1, 2)})
        await got[0, 0].ack()
        await got[0, 1].nack("sink down", retry=True)  # rewinds; nothing to seek
        await _spin()
        assert commits.first_unsettled(T0) == 1
        assert commits.unsettled == 1
        client = _Committer()
        commits.client = client
        await commits.flush(0.5)
        assert client.commits == [{T0: 1}]
        assert client.seeks == []

    _bounded(scenario)


def test_a_failed_commit_is_retried_on_its_own(monkeypatch: Any) -> None:
    monkeypatch.setattr(_kafka_commits, "_COMMIT_RETRY_SECONDS", 0.0)

    async def scenario() -> None:
        client = _Committer()
        client.failures = [KafkaError("coordinator not available")]
        _, got = _tracking(client, {T0: _records(T0, 0, 1)})
        await got[0, 0].ack()
        await got[0, 1].ack()
        await _spin()
        assert client.attempts == [{T0: 2}, {T0: 2}]
        assert client.commits == [{T0: 2}]

    _bounded(scenario)


def test_a_retry_takes_the_newest_offset_and_leaves_out_revoked_partitions(
        monkeypatch: Any) -> None:
    monkeypatch.setattr(_kafka_commits, "_COMMIT_RETRY_SECONDS", 0.0)

    async def scenario() -> None:
        client = _Committer()
        client.held = asyncio.Event()
        client.failures = [KafkaError("request timed out")]
        commits, got = _tracking(client, {T0: _records(T0, 0, 1), T1: _records(T1, 0)})
        await got[0, 0].ack()
        await got[1, 0].ack()
        await _spin()
        assert client.attempts == [{T0: 1, T1: 1}]  # under way; it is going to fail
        await got[0, 1].ack()  # newer than the failing {T0: 1}
        await commits.revoked([T1])  # nothing dirty of T1: no request, just forgotten
        assert len(client.attempts) == 1
        client.held.set()
        await _spin()
        assert client.commits == [{T0: 2}]

    _bounded(scenario)


@pytest.mark.parametrize("refusal", [CommitFailedError, IllegalStateError])
def test_a_commit_the_group_refuses_is_dropped_not_retried(monkeypatch: Any,
                                                          refusal: type[Exception]) -> None:
    monkeypatch.setattr(_kafka_commits, "_COMMIT_RETRY_SECONDS", 0.0)

    async def scenario() -> None:
        client = _Committer()
        client.failures = [refusal()]
        _, got = _tracking(client, {T0: _records(T0, 0, 1)})
        await got[0, 0].ack()
        await _spin()
        assert client.attempts == [{T0: 1}]
        assert client.commits == []  # the new owner redelivers from the last commit
        await got[0, 1].ack()
        await _spin()
        assert client.attempts == [{T0: 1}, {T0: 2}]
        assert client.commits == [{T0: 2}]

    _bounded(scenario)


def test_flush_waits_for_the_commit_under_way_and_later_acks_commit_again() -> None:
    async def scenario() -> None:
        client = _Committer()
        client.held = asyncio.Event()
        commits, got = _tracking(client, {T0: _records(T0, 0, 1)})
        await got[0, 0].ack()
        await _spin()
        asyncio.get_running_loop().call_later(0.01, client.held.set)
        await commits.flush(1.0)
        assert client.commits == [{T0: 1}]  # finished before flush returned
        await got[0, 1].ack()  # a new burst after a flush starts a new commit
        await _spin()
        assert client.commits == [{T0: 1}, {T0: 2}]

    _bounded(scenario)


def test_flush_gives_up_on_a_hung_commit_and_commits_the_newer_offsets() -> None:
    async def scenario() -> None:
        client = _Committer()
        client.hang = 1
        commits, got = _tracking(client, {T0: _records(T0, 0, 1, 2)})
        await got[0, 0].ack()
        await _spin()
        assert client.attempts == [{T0: 1}]  # never answers
        await got[0, 1].ack()  # waits behind the hung request
        task = commits._task
        assert task is not None
        await commits.flush(0.05)
        await _spin(2)
        assert task.cancelled()
        assert client.commits == [{T0: 2}]
        await got[0, 2].ack()
        await _spin()
        assert client.commits == [{T0: 2}, {T0: 3}]

    _bounded(scenario)


def test_flush_with_nothing_to_commit_makes_no_request() -> None:
    async def scenario() -> None:
        client = _Committer()
        commits, got = _tracking(client, {T0: _records(T0, 0, 1)})
        await commits.flush(0.05)  # no commit task yet
        await got[0, 1].ack()  # past the open 0: nothing to commit
        await commits.flush(0.05)
        assert client.attempts == []

    _bounded(scenario)


@pytest.mark.parametrize("trouble", ["fails", "hangs"])
def test_flush_drops_a_final_commit_that_fails_or_hangs(trouble: str) -> None:
    async def scenario() -> None:
        client = _Committer()
        if trouble == "fails":
            client.failures = [KafkaError("broker gone")]
        else:
            client.hang = 1
        commits, got = _tracking(None, {T0: _records(T0, 0)})
        await got[0, 0].ack()  # no client: the offset waits
        await _spin()
        commits.client = client
        await commits.flush(0.05)  # returns, does not raise
        assert client.attempts == [{T0: 1}]
        assert client.commits == []

    _bounded(scenario)


def test_detach_flushes_then_forgets_every_partition_and_the_client() -> None:
    async def scenario() -> None:
        client = _Committer()
        client.hang = 1
        commits, got = _tracking(client, {T0: _records(T0, 0, 1, 2, 3)})
        commits.assigned([T1])  # assigned, nothing handed out
        await got[0, 0].ack()
        await _spin()
        await got[0, 1].ack()  # behind the hung request
        await commits.detach(0.05)
        assert client.commits == [{T0: 2}]
        assert commits.client is None
        assert commits.first_unsettled(T0) is None
        assert commits.first_unsettled(T1) is None
        commits.changed.clear()
        await got[0, 2].ack()  # stale: counted, nothing else
        assert commits.changed.is_set()
        await got[0, 3].nack("late", retry=True)
        await _spin()
        assert commits.unsettled == 0
        assert client.commits == [{T0: 2}]
        assert client.seeks == []

    _bounded(scenario)


def test_revocation_commits_the_settled_offsets_of_the_revoked_partitions_only() -> None:
    async def scenario() -> None:
        client = _Committer()
        commits, got = _tracking(client, {T0: _records(T0, 0, 1), T1: _records(T1, 0, 1)})
        await got[0, 0].ack()
        await got[1, 0].ack()
        await commits.revoked([T0])  # before the commit task ran
        assert client.commits == [{T0: 1}]
        assert commits.first_unsettled(T0) is None
        assert commits.first_unsettled(T1) == 1
        await _spin()
        assert client.commits == [{T0: 1}, {T1: 1}]  # the rest by the commit task
        await commits.revoked([T1])  # nothing dirty: no request
        assert len(client.attempts) == 2

    _bounded(scenario)


def test_revocation_survives_a_failed_commit_and_a_partition_it_never_had() -> None:
    async def scenario() -> None:
        client = _Committer()
        client.failures = [KafkaError("not coordinator")]
        commits, got = _tracking(client, {T0: _records(T0, 0, 1)})
        await got[0, 0].ack()
        await commits.revoked([T0, T9])
        assert client.attempts == [{T0: 1}]
        assert commits.first_unsettled(T0) is None
        await got[0, 1].ack()  # no longer ours
        await _spin()
        assert client.attempts == [{T0: 1}]

    _bounded(scenario)


def test_a_consumer_told_to_defer_bodies_leaves_them_unparsed() -> None:
    """`ports.defer_bodies`: records made after it parse when first read, and read the
    same as those parsed at once."""
    declared = (("content-type", b"application/json"),)

    async def scenario() -> None:
        client = _FakeClient(batches=[
            {T0: [_Record("orders", 0, 0, value=b'{"a": 1}', headers=declared)]},
            {T0: [_Record("orders", 0, 1, value=b'{"a": 1}', headers=declared),
                  _Record("orders", 0, 2, value=b'{"a": 1}')]}])
        consumer = _consumer(client)
        [at_once] = await consumer.read_batch(10)
        assert defer_bodies(consumer)
        [deferred, bare] = await consumer.read_batch(10)
        assert at_once.message.unparsed_body() is None
        assert deferred.message.unparsed_body() == b'{"a": 1}'
        # No content type: only parsing tells whether it is JSON, so it is parsed at once.
        assert bare.message.unparsed_body() is None
        assert deferred.message.data == at_once.message.data == bare.message.data == {"a": 1}
        assert not defer_bodies(object())  # a consumer that cannot: nothing happens

    asyncio.run(scenario())


# Per delivered offset (two partitions, 0..5 each): settled before the batch's ack (an
# ack, or a nack for retry: a rewind voids it and the later ones), or left to the batch.
_EARLIER = st.lists(st.tuples(st.sampled_from([0, 1]), st.integers(0, 5),
                              st.sampled_from(["ack", "retry"])), max_size=6)


@given(_EARLIER)
def test_acking_a_batch_in_bulk_leaves_what_acking_each_in_order_leaves(
        earlier: list[tuple[int, int, str]]) -> None:
    """`Commits.ack_bulk` (the route's `ports.ack_all`) against each delivery's own ack:
    the same offsets to commit, slots kept and count of unsettled deliveries."""
    def state(bulk: bool) -> tuple[object, ...]:
        async def main() -> tuple[object, ...]:
            client = _Committer()
            client.held = asyncio.Event()  # nothing committed: `_dirty` is the outcome
            commits, delivered = _tracking(client, {T0: _records(T0, *range(6)),
                                                   T1: _records(T1, *range(6))})
            for partition, offset, how in earlier:
                delivery = delivered.pop((partition, offset), None)
                if delivery is not None:
                    await (delivery.ack() if how == "ack" else delivery.nack("x", retry=True))
            rest = list(delivered.values())
            if bulk:
                await ack_all(rest)
            else:
                for delivery in rest:
                    await delivery.ack()
            return (dict(commits._dirty), commits.unsettled,
                    {tp: [s.offset for s in part.slots] for tp, part in commits._parts.items()},
                    client.seeks)
        return asyncio.run(main())

    assert state(bulk=True) == state(bulk=False)


def test_a_batch_acked_in_bulk_is_one_call_and_one_commit() -> None:
    async def main() -> None:
        client = _Committer()
        commits, delivered = _tracking(client, {T0: _records(T0, 0, 1, 2),
                                               T1: _records(T1, 7)})
        hooks = [d.settle_hook for d in delivered.values()]
        assert all(getattr(h, "bulk", None) is commits for h in hooks)
        await ack_all(list(delivered.values()))
        await _spin()
        assert client.commits == [{T0: 3, T1: 8}]
        assert commits.unsettled == 0
    _bounded(main)


def test_a_delivery_has_every_part_of_a_delivery() -> None:
    """A Kafka delivery writes `Delivery.__init__`'s state itself (one call per record):
    every slot of `Delivery` is set but the hook, which is the delivery itself."""
    commits = Commits()
    [delivery] = commits.deliver({T0: _records(T0, 3)}, RECEIVED)
    for name in Delivery.__slots__:
        if name != "_settle":
            getattr(delivery, name)  # raises AttributeError when left unset
    assert delivery.settle_hook is delivery and delivery.bulk is commits
    assert not delivery.settled and not delivery.abandoned
