"""The Kafka consumer's commit tracking: which delivered offsets are settled, and what to
commit. Adapter machinery, no broker of its own: `adapters/kafka/` hands it the aiokafka
client (anything with `commit(offsets)` and `seek(tp, offset)`, see `CommitClient`).

Per assigned partition, the deliveries not yet committed are kept in offset order; each
is its own settle hook (`_Offset`). The committed offset is one past the highest
*contiguous* settled offset: an ack past an unsettled offset commits nothing yet.
`nack(retry=False)` settles like an ack; `nack(retry=True)` of offset N seeks the partition
back to N and voids N and every later delivery of it (they are delivered again). A revoked
partition, or every partition when the client goes, is forgotten: its deliveries still in
flight settle nothing (the new owner starts from the committed offset).

Settling does no I/O (it runs per message): it moves the partition's commit point, and a
background task commits every partition that moved in one request once the settling burst
yields. A commit that fails is retried with the newest offset of each partition still
assigned; one that the group refuses (a rebalance) is dropped, which is at-least-once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, Protocol

from aiokafka.errors import (  # type: ignore[import-untyped]  # no py.typed
    CommitFailedError,
    IllegalStateError,
    KafkaError,
)

from adapters.kafka.fetch import RateLimitedLog, Undecodable
from adapters.kafka.record import KafkaRecordLike, to_record
from gateway.observability.logs import fields
from gateway.ports import Answer, Delivery, Settle
from gateway.record import NativeMessage

__all__ = ["CommitClient", "Commits"]

# The Kafka adapter's logger: these lines are the consumer's.
log = logging.getLogger("adapters.kafka")

#: Undecodable records, said once a minute per partition.
_warnings = RateLimitedLog(log)
#: Pause between retries of a failed offset commit.
_COMMIT_RETRY_SECONDS = 0.5


class CommitClient(Protocol):
    """What the tracking uses of aiokafka's AIOKafkaConsumer."""

    async def commit(self, offsets: dict[Any, int]) -> None: ...

    def seek(self, tp: Any, offset: int) -> None: ...


class _Partition:
    """What this member tracks of one assigned partition."""

    __slots__ = ("commits", "next", "slots", "tp")

    def __init__(self, commits: Commits, tp: Hashable) -> None:
        self.commits = commits
        self.tp = tp
        # Delivered offsets not yet committed, in offset order; the acked prefix is popped
        # as it forms. A deque, not a dict: popping the front of a dict leaves holes that
        # every later `next(iter())` walks over.
        self.slots: deque[_Offset] = deque()
        self.next: int | None = None  # the offset after the last one handed out


class _Offset(Delivery):
    """One delivered, not yet committed offset: the Delivery and its own settle hook in
    one object (the hook and its bookkeeping were a second object per record, made and
    freed with it: 0.9% of a Kafka -> NATS route's instructions, `bench_instructions
    --whole`)."""

    __slots__ = ("acked", "bulk", "live", "offset", "part")

    #: How many offsets settling it settles (a class attribute: one, read on commit).
    span = 1

    def __init__(self, message: NativeMessage, part: _Partition, offset: int,
                 answer: Answer | None = None, undecodable: str | None = None) -> None:
        # `Delivery.__init__`'s state, written here (one call per record, not two); its
        # hook is this object itself (`settle_hook`), so `_settle` stays unset.
        self.message = message
        self.settled = False
        self.answer = answer
        self._waiting = None
        self.undecodable = undecodable
        self.part = part
        # What acks a settled run of offsets at once (`ports.ack_all`): an attribute, not
        # a property, as `ack_all` reads it per message.
        self.bulk: Commits = part.commits
        self.offset = offset
        self.acked = False
        # False once the offset is no longer ours to settle: revoked, reconnected, or
        # superseded by a rewind (the offset is delivered again as a new delivery).
        self.live = True

    @property
    def settle_hook(self) -> Settle:
        return self

    async def ack(self) -> None:
        self.mark_settled()
        await self(True, "", False)

    async def nack(self, reason: str, retry: bool = True) -> None:
        self.mark_settled()
        await self(False, reason, retry)

    async def __call__(self, ack: bool, reason: str, retry: bool) -> None:
        # No I/O here: the engine settles a whole batch in a burst; the commit runs in the
        # background task, once for the burst.
        part = self.part
        commits = part.commits
        commits.unsettled -= 1
        commits.changed.set()
        if not self.live:
            return
        if ack or not retry:
            self.acked = True
            commits._advance(part)
        else:
            commits._rewind(part, self.offset)


class _Span(_Offset):
    """The delivery of an undecodable run of offsets: settling it settles all of them."""

    __slots__ = ("span",)

    def __init__(self, message: NativeMessage, part: _Partition, offset: int, span: int,
                 undecodable: str) -> None:
        super().__init__(message, part, offset, None, undecodable)
        self.span = span


class Commits:
    """The commit tracking of one consumer, across its connections: `client` is the
    connected aiokafka client (None while there is none); `unsettled` counts the
    deliveries handed out and not settled yet (stale ones included), and `changed` is set
    at every settlement."""

    __slots__ = ("_dirty", "_lock", "_parts", "_task", "answerer", "changed", "client",
                 "parse_bodies", "unsettled")

    def __init__(self) -> None:
        self.client: CommitClient | None = None
        self._parts: dict[Hashable, _Partition] = {}  # per assigned partition
        self._dirty: dict[Hashable, int] = {}  # partition -> offset to commit
        self._task: asyncio.Task[None] | None = None  # the commit loop
        self._lock = asyncio.Lock()  # one commit request at a time
        self.unsettled = 0
        self.changed = asyncio.Event()
        # Request-reply: the answer hook of a record that names a reply topic.
        self.answerer: Callable[[KafkaRecordLike], Answer | None] | None = None
        # False once the route may never read the bodies (`ports.defer_bodies`).
        self.parse_bodies = True

    def deliver(self, fetched: Mapping[Hashable, Sequence[KafkaRecordLike]],
                received_at: str) -> list[Delivery]:
        """Deliveries of a getmany() answer: partition by partition, each in offset order
        (the only order Kafka defines)."""
        out: list[Delivery] = []
        answerer = self.answerer
        parse = self.parse_bodies
        for tp, records in fetched.items():
            part = self._parts.get(tp)
            if part is None:
                part = self._parts[tp] = _Partition(self, tp)
            slots = part.slots
            for record in records:
                if type(record) is Undecodable:
                    out.append(self._undecodable(part, record, received_at))
                    continue
                delivery = _Offset(to_record(record, received_at, parse), part, record.offset,
                                   None if answerer is None else answerer(record))
                slots.append(delivery)
                out.append(delivery)
            last = records[-1]
            part.next = (last.last_offset if type(last) is Undecodable
                         else last.offset) + 1
        self.unsettled += len(out)
        return out

    def _undecodable(self, part: _Partition, record: Undecodable,
                     received_at: str) -> Delivery:
        """The delivery of offsets that did not decode: the route dead-letters it (reason
        `undecodable`), and its ack commits past all of them."""
        delivery = _Span(to_record(record, received_at), part, record.offset, record.span,
                         record.why)
        part.slots.append(delivery)
        where = (f"offset {record.offset}" if record.span == 1
                 else f"offsets {record.offset}-{record.last_offset}")
        _warnings.warning(
            (record.topic, record.partition),
            f"kafka: {record.topic}[{record.partition}] {where} cannot be decoded; "
            "dead-lettered as undecodable, the partition goes on",
            fields(reason="undecodable", error=record.why))
        return delivery

    def ack_bulk(self, slots: Sequence[_Offset]) -> None:
        """Ack each of `slots` as its own ack would, in order (`ports.BulkAcker`): each
        partition's commit point moves once for the run instead of once per slot."""
        self.unsettled -= len(slots)
        self.changed.set()
        moved: list[_Partition] = []
        last: _Partition | None = None
        for slot in slots:
            if not slot.live:
                continue  # no longer ours to settle (as in `_Offset.__call__`)
            slot.acked = True
            part = slot.part
            if part is not last:
                last = part
                if part not in moved:
                    moved.append(part)
        for part in moved:
            self._advance(part)

    def first_unsettled(self, tp: Hashable) -> int | None:
        """The first offset of `tp` this member has not settled: its first delivery still
        open, else the one after the last handed out; None before the first."""
        part = self._parts.get(tp)
        # The first slot is the first unsettled offset: _advance() pops the settled prefix.
        return None if part is None else part.slots[0].offset if part.slots else part.next

    def _advance(self, part: _Partition) -> None:
        """Commit past the acked prefix; slots are in delivery (= offset) order."""
        slots = part.slots
        commit_to: int | None = None
        while slots and slots[0].acked:
            slot = slots.popleft()
            commit_to = slot.offset + slot.span
        if commit_to is None:
            return  # an ack past a gap: nothing contiguous to commit yet
        self._dirty[part.tp] = commit_to
        task = self._task
        if task is None or task.done():
            self._task = asyncio.create_task(self._commit_loop())

    def _rewind(self, part: _Partition, offset: int) -> None:
        # Forget `offset` and everything after it (their settlements become no-ops) and
        # fetch again from there; aiokafka drops the partition's prefetched records.
        slots = part.slots
        while slots and slots[-1].offset >= offset:
            slots.pop().live = False
        part.next = offset
        if self.client is not None:
            self.client.seek(part.tp, offset)

    def _forget(self, part: _Partition) -> None:
        """The partition's deliveries are no longer ours to settle (the new owner starts
        from the committed offset)."""
        for slot in part.slots:
            slot.live = False
        part.slots.clear()

    async def _commit_loop(self) -> None:
        # Started by the first ack of a burst; it runs once the settling task yields, so
        # one request commits every partition the burst advanced. Acks that arrive while a
        # commit is under way make the next one.
        while self._dirty and self.client is not None:
            client = self.client
            batch, self._dirty = self._dirty, {}
            try:
                async with self._lock:
                    await client.commit(batch)
            except (CommitFailedError, IllegalStateError) as exc:
                # The group moved on (rebalance): the new owner redelivers from the last
                # successful commit, which is at-least-once.
                log.warning(  # pragma: no mutate
                    "kafka commit dropped after rebalance",  # pragma: no mutate
                    extra=fields(error=exc),  # pragma: no mutate
                )
            except KafkaError as exc:
                log.warning(  # pragma: no mutate
                    "kafka commit failed, retrying",  # pragma: no mutate
                    extra=fields(error=exc),  # pragma: no mutate
                )
                for tp, offset in batch.items():
                    if tp in self._parts:
                        self._dirty.setdefault(tp, offset)  # a newer offset wins
                await asyncio.sleep(_COMMIT_RETRY_SECONDS)

    async def flush(self, timeout: float) -> None:
        """Let the commit under way finish (at most `timeout`), then commit what is still
        to commit (at most `timeout` again); failures are dropped."""
        task = self._task
        if task is not None and not task.done():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(task), timeout)
        self._task = None
        if task is not None and not task.done():
            task.cancel()
        client = self.client
        if self._dirty and client is not None:
            batch, self._dirty = self._dirty, {}
            with contextlib.suppress(Exception):
                async with asyncio.timeout(timeout), self._lock:
                    await client.commit(batch)

    async def detach(self, timeout: float) -> None:
        """The client goes (reconnect or close): flush the commits, then forget every
        partition."""
        await self.flush(timeout)
        self.client = None
        for part in self._parts.values():
            self._forget(part)
        self._parts.clear()
        self._dirty.clear()

    # -- group membership (aiokafka's rebalance listener) ------------------------------------
    async def revoked(self, revoked: Sequence[Hashable]) -> None:
        # Commit what is settled while this member still owns the partitions.
        batch = {tp: self._dirty.pop(tp) for tp in revoked if tp in self._dirty}
        client = self.client
        if batch and client is not None:
            try:
                async with self._lock:
                    await client.commit(batch)
            except KafkaError as exc:
                log.warning(  # pragma: no mutate
                    "kafka commit on revocation failed",  # pragma: no mutate
                    extra=fields(error=exc),  # pragma: no mutate
                )
        for tp in revoked:
            part = self._parts.pop(tp, None)
            if part is not None:
                self._forget(part)

    def assigned(self, assigned: Sequence[Hashable]) -> None:
        for tp in assigned:
            if tp not in self._parts:
                self._parts[tp] = _Partition(self, tp)
