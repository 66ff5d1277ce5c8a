"""The Kafka sink: records packed per partition (murmur2 like the Java client) and sent
pipelined; each record's outcome comes from its partition's produce answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import random
import uuid
from collections.abc import Sequence
from typing import Any

from aiokafka import (  # type: ignore[import-untyped]  # no py.typed
    AIOKafkaProducer,
)
from aiokafka.errors import (  # type: ignore[import-untyped]
    CorruptRecordException,
    InvalidTopicError,
    KafkaError,
    MessageSizeTooLargeError,
    RecordListTooLargeError,
    RecordTooLargeError,
    TopicAuthorizationFailedError,
    UnsupportedForMessageFormatError,
)
from aiokafka.partitioner import murmur2  # type: ignore[import-untyped]
from aiokafka.record.default_records import (  # type: ignore[import-untyped]
    DefaultRecordBatchBuilder,
)

from adapters.kafka.connection import explain, stop_quietly
from adapters.kafka.options import OPTIONS, KafkaOptions
from adapters.kafka.record import SendArgs, to_send
from adapters.kafka.reply import ReplyReader, requesting
from gateway.ports import (
    Confirmation,
    EndpointSettings,
    NotConnected,
    Outcome,
    ReplyTable,
    confirmed,
)
from gateway.ports.reconnect import ReconnectGate
from gateway.record import NativeMessage

#: `linger_ms` for a route whose senders each wait for their message (`for_waiting_senders`),
#: unless the endpoint sets it: long enough for one burst of their requests to share a
#: produce request. HTTP -> Kafka, 32 senders (bench/README.md, "twelfth round"): 2 ms
#: took the gateway from 0.85x to 1.09x a plain bridge's throughput with the Kafka
#: broker's CPU per message unchanged; 0 ms did as well for throughput but cost the broker
#: half as much again (a produce request per read).
WAITING_SENDERS_LINGER_MS = 2

#: Errors that are a verdict on the record itself: sending it again cannot succeed.
_VERDICTS: tuple[type[BaseException], ...] = (
    CorruptRecordException,
    InvalidTopicError,
    MessageSizeTooLargeError,
    RecordListTooLargeError,
    RecordTooLargeError,
    TopicAuthorizationFailedError,
    UnsupportedForMessageFormatError,
    # Raised by aiokafka's argument checks (e.g. a partition the topic does not have).
    AssertionError,
    TypeError,
    ValueError,
)

#: How often at most a producer moves its deadline on while a batch makes progress.
_RENEW_SECONDS = 1.0

#: How many keys' hashes a producer keeps (all are forgotten when it is full).
_HASHES_KEPT = 4096

#: A record's size as aiokafka counts it against max_request_size.
_estimate_size = DefaultRecordBatchBuilder.estimate_size_in_bytes

#: A pending send: the future of the aiokafka batch that holds the record, or the
#: Outcome it already has.
_Pending = asyncio.Future[Any] | Outcome

#: Placeholder of a record while its batch is being filled.
_UNSENT = Outcome.failed("not sent")


async def _partitions(client: Any, topic: str) -> tuple[list[int], list[int]]:
    """The topic's partitions, all and available, in id order (the partitioner indexes
    them by key hash, as the Java client does), after waiting for its metadata."""
    every = sorted(await client.partitions_for(topic))
    available = sorted(client._metadata.available_partitions_for_topic(topic) or ())
    return every, available


class _Renewal:
    """Moves a deadline on while there is progress, so that a wait of a whole batch is
    bounded per step (a hang), not in total (a long batch). The deadline is renewed at most
    once per _RENEW_SECONDS: a step costs a clock read, not a timer."""

    __slots__ = ("_budget", "_deadline", "_loop", "_renewed")

    def __init__(self, deadline: asyncio.Timeout, budget: float) -> None:
        self._deadline = deadline
        self._budget = budget
        self._loop = asyncio.get_running_loop()
        self._renewed = self._loop.time()

    def progress(self) -> None:
        now = self._loop.time()
        if now - self._renewed > _RENEW_SECONDS:
            self._deadline.reschedule(now + self._budget)
            self._renewed = now


class _Partitioner:
    """The partition of a record without one, as aiokafka's DefaultPartitioner picks it
    (the Java client's murmur2 of the key; a random available partition for a record
    without a key); `_send_all` asks it, since records go to aiokafka in batches already
    placed. It remembers the hashes of recent keys: murmur2 is pure Python, about as
    costly as the rest of a send, and a route keys its records by the source's unit of
    order (few keys, many records)."""

    __slots__ = ("_hashes",)

    def __init__(self) -> None:
        self._hashes: dict[bytes, int] = {}

    def __call__(self, key: bytes | None, all_partitions: list[int],
                 available: list[int]) -> int:
        if key is None:
            return random.choice(available or all_partitions)
        hashed = self._hashes.get(key)
        if hashed is None:
            if len(self._hashes) >= _HASHES_KEPT:
                self._hashes.clear()
            hashed = self._hashes[key] = murmur2(key) & 0x7FFFFFFF
        return all_partitions[hashed % len(all_partitions)]


class KafkaProducer:
    """Sends records with acks=all and reports each as delivered once the broker has.

    `submit()` packs the records into per-partition record batches of up to
    `max_batch_size` bytes, queues them with aiokafka and returns at once; aiokafka has one
    produce request per broker under way, so consecutive submits share requests and keep
    their order. `linger_ms` (5 by default) lets small submits share a request; 0 costs
    more produce requests (measured: AMQP -> Kafka sink broker 27 -> 47 us per message)
    and, since the MQTT source acknowledges its reads at once, no longer lowers the
    latency (bench/bench_latency.py at 500/s: p50 10.9-11.3 ms with 0, 9.4-9.6 with 5).
    The Confirmation awaits the batches' futures.

    A send that fails for a reason other than the record itself fails the rest of its
    batch without trying them, and the Confirmation that sees such a failure drops the
    client; the next `submit()` reconnects, at most once per backoff interval (doubling up
    to `reconnect_max`), and meanwhile fails fast with a retryable Outcome.
    """

    def __init__(self, settings: EndpointSettings) -> None:
        self._opts = KafkaOptions.parse(settings)
        # How long a batch waits for more records: the endpoint's `linger_ms`, or the
        # default for the route's kind of senders (`for_waiting_senders`).
        self._linger_ms = self._opts.linger_ms
        self._linger_given = "linger_ms" in OPTIONS.canonical(settings.options)
        self.client_id = settings.client_id or f"xrgw-pub-{uuid.uuid4().hex[:12]}"
        self._client: Any = None  # AIOKafkaProducer
        self._partitioner = _Partitioner()
        # Per (topic, partition): the batch queued last and its future (_send_group).
        self._open: dict[tuple[str, int], tuple[Any, asyncio.Future[Any]]] = {}
        self._gate = ReconnectGate(self._opts.reconnect_max)
        # Submits take turns: one that waits for room in aiokafka's batches must not be
        # overtaken by a later one (order of records across submits).
        self._turn = asyncio.Lock()
        # A hung send or acknowledgement is cut off no sooner than one second after
        # aiokafka's own timeout (request_timeout_ms) would have reported it.
        self._budget = self._opts.publish_timeout + 1 + _RENEW_SECONDS
        # Request-reply: answers come on `reply_topic`, correlated by the correlation
        # header (adapters/kafka/reply.py).
        self.replies = ReplyTable()
        self._reply_reader = ReplyReader(self._opts, self.replies, self.client_id)

    @property
    def connected(self) -> bool:
        return self._client is not None

    @property
    def linger_ms(self) -> int:
        """How long a partition's batch waits for more records (from the next connection
        on, when changed)."""
        return self._linger_ms

    def for_waiting_senders(self) -> None:
        """The route's senders each wait for their message (`ports.Lingers`): linger only
        as long as one burst of theirs takes to arrive, unless the endpoint says."""
        if not self._linger_given:
            self._linger_ms = WAITING_SENDERS_LINGER_MS

    @property
    def max_message_bytes(self) -> int | None:
        """aiokafka's `max_request_size`: a record (key, value, headers and the batch's
        overhead) larger than this is never sent (the broker's `message.max.bytes` may be
        lower: its MESSAGE_TOO_LARGE is a too-large refusal as well)."""
        client = self._client
        return None if client is None else int(client._max_request_size)

    async def connect(self) -> None:
        await self._gate.connect(self._connect)

    async def _connect(self) -> None:
        await self._drop_client()
        opts = self._opts
        client = AIOKafkaProducer(
            bootstrap_servers=list(opts.bootstrap),
            client_id=self.client_id,
            acks=opts.acks,
            enable_idempotence=opts.enable_idempotence,
            linger_ms=self._linger_ms,
            max_batch_size=opts.max_batch_size,
            compression_type=opts.codec,
            # Bounds metadata waits and unanswered produce requests: no hang when the
            # broker is gone.
            request_timeout_ms=int(opts.publish_timeout * 1000),
            **opts.security,
        )
        try:
            async with asyncio.timeout(opts.connect_timeout):
                await client.start()
        except (KafkaError, OSError, TimeoutError, KeyError) as exc:
            await stop_quietly(client, 1.0)
            raise NotConnected(
                f"cannot reach {','.join(opts.bootstrap)}: {await explain(opts, exc)}"
            ) from None
        self._client = client

    async def submit(self, messages: Sequence[NativeMessage]) -> Confirmation:
        async with self._turn:
            if self._client is None:
                reason = await self._try_reconnect()
                if reason is not None:
                    return confirmed([Outcome.failed(reason) for _ in messages])
            client = self._client
            pending = await self._send_all(client, messages)
        return self._confirm(client, pending)

    async def request(self, messages: Sequence[NativeMessage], timeout: float) -> Confirmation:
        """Kafka request-reply (Spring's ReplyingKafkaTemplate convention): each record
        is produced with the reply-topic header naming `reply_topic` and a correlation
        token in the correlation header (a binary CloudEvent also as its `correlationid`
        extension); the Confirmation resolves when every answer came or `timeout`
        passed. A record the broker did not acknowledge fails as on `submit`."""
        reply_topic = self._opts.reply_topic
        if not reply_topic:
            return confirmed([Outcome.failed("request-reply needs the endpoint's "
                                             "reply_topic", retryable=False)
                              for _ in messages])
        why = await self._reply_reader.listen(reply_topic)
        if why is not None:
            return confirmed([Outcome.failed(why) for _ in messages])
        return await self.replies.send(
            messages, lambda record, token: requesting(record, self._opts, reply_topic, token),
            self.submit, timeout)

    async def _send_all(self, client: Any, messages: Sequence[NativeMessage]) -> list[_Pending]:
        """The records, packed per partition into aiokafka record batches and queued in
        order; each record's item is its batch's future (or its own Outcome when it
        cannot be sent). Batches, not one `send()` per record: `send()` costs ~26 us of
        CPU per record, this whole path 7.5-9 us (bench/bench_kafka_producer.py); the
        checks `send()` makes per record, size and partition, are made here too."""
        pending: list[_Pending] = []
        groups: dict[tuple[str, int], list[tuple[int, SendArgs]]] = {}
        partitions: dict[str, tuple[list[int], list[int]]] = {}  # topic: (all, available)
        topic, headers = self._opts.topic, self._opts.record_headers
        most = client._max_request_size  # aiokafka's max_request_size (no public getter)
        failure: Outcome | None = None  # of the link: the rest is not attempted
        try:
            async with asyncio.timeout(self._budget) as deadline:
                renewal = _Renewal(deadline, self._budget)
                for index, record in enumerate(messages):
                    try:
                        args = to_send(record, topic, headers)
                        size = _estimate_size(args.key, args.value, args.headers)
                        if size > most:
                            raise MessageSizeTooLargeError(
                                f"the record is {size} bytes, over max_request_size {most}")
                        known = partitions.get(args.topic)
                        if known is None:
                            known = partitions[args.topic] = await _partitions(client,
                                                                                args.topic)
                        partition = self._partition(args, *known)
                    except Exception as exc:  # aiokafka raises more than KafkaError
                        outcome = (Outcome.failed(str(exc), retryable=False)
                                   if isinstance(exc, ValueError) else _failure(exc))
                        pending.append(outcome)
                        if outcome.retryable:
                            failure = outcome
                            break
                        continue
                    pending.append(_UNSENT)
                    groups.setdefault((args.topic, partition), []).append((index, args))
                for (to_topic, partition), members in groups.items():
                    await self._send_group(client, to_topic, partition, members, pending)
                    renewal.progress()
        except Exception as exc:  # the deadline, or aiokafka refusing a batch
            failure = _failure(exc)
        if failure is not None:
            skipped = Outcome.failed(f"not attempted: {failure.reason}")
            pending += [skipped] * (len(messages) - len(pending))
            pending = [failure if item is _UNSENT else item for item in pending]
        return pending

    def _partition(self, args: SendArgs, all_partitions: list[int],
                   available: list[int]) -> int:
        if args.partition is None:
            return self._partitioner(args.key, all_partitions, available)
        if args.partition not in all_partitions:
            raise ValueError(f"partition {args.partition} does not exist in topic "
                             f"{args.topic}")
        return args.partition

    async def _send_group(self, client: Any, topic: str, partition: int,
                          members: list[tuple[int, SendArgs]], pending: list[_Pending]) -> None:
        """Queue one partition's records; a batch's future stands for each of its records.

        Records first join the batch this producer queued last for the partition while
        aiokafka has not taken it yet (a produce request for the broker is under way): so
        small submits share requests as they did with `send()`. aiokafka closes a batch
        when it builds the request; `append` then answers None and a new batch is queued
        (`send_batch` waits while the partition already has one waiting)."""
        key = (topic, partition)
        # `future` is set while `batch` is one aiokafka holds; None while it is new.
        batch, future = self._open.get(key, (None, None))
        if future is not None and future.done():  # sent, or failed before it was sent
            batch = future = None
        new: list[int] = []  # members in the new batch, queued when it is full or at the end
        for index, args in members:
            if batch is None or batch.append(timestamp=args.timestamp_ms, key=args.key,
                                             value=args.value, headers=args.headers) is None:
                if new:
                    future = await client.send_batch(batch, topic, partition=partition)
                    for queued in new:
                        pending[queued] = future
                batch, future, new = client.create_batch(), None, []
                # An empty batch takes any record, even one over max_batch_size.
                batch.append(timestamp=args.timestamp_ms, key=args.key, value=args.value,
                             headers=args.headers)
            if future is None:
                new.append(index)
            else:
                pending[index] = future  # joined the batch aiokafka holds
        if new:
            future = await client.send_batch(batch, topic, partition=partition)
            for queued in new:
                pending[queued] = future
        if batch is not None and future is not None and self._open.get(key) != (batch, future):
            self._open[key] = (batch, future)
            # Not kept once sent: its buffer can be up to max_batch_size.
            future.add_done_callback(functools.partial(self._sent, key, batch))

    def _sent(self, key: tuple[str, int], batch: Any, _: asyncio.Future[Any]) -> None:
        if self._open.get(key, (None,))[0] is batch:
            del self._open[key]

    async def _confirm(self, client: Any, pending: list[_Pending]) -> list[Outcome]:
        outcomes = await self._outcomes(pending)
        if self._client is client and any(not o.delivered and o.retryable for o in outcomes):
            await self._drop_client()  # reconnect (with backoff) on the next submit
        return outcomes

    async def _outcomes(self, pending: list[_Pending]) -> list[Outcome]:
        # aiokafka resolves the futures of a whole batch together, so this waits once per
        # produce request, not per record; a future that is done costs no wait.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self._budget) as deadline:
                renewal = _Renewal(deadline, self._budget)
                for item in pending:
                    if not isinstance(item, Outcome) and not item.done():
                        # wait(), not await: a cancelled future must not look like our
                        # own cancellation (the deadline).
                        await asyncio.wait((item,))
                        renewal.progress()
        # Past the deadline, the futures still pending report the timeout.
        return [_outcome(item) for item in pending]

    async def _try_reconnect(self) -> str | None:
        return await self._gate.try_reconnect(lambda: self._client is not None, self._connect)

    async def _drop_client(self) -> None:
        client, self._client = self._client, None
        self._open.clear()
        if client is not None:
            # Nothing is lost by a short timeout: unsent records were reported failed.
            await stop_quietly(client, 2.0)

    async def aclose(self) -> None:
        await self._reply_reader.aclose()
        self.replies.abandon("producer closed")
        await self._drop_client()


def _outcome(item: _Pending) -> Outcome:
    """The Outcome of one send: its own, or its future's."""
    if isinstance(item, Outcome):
        return item
    if not item.done():
        return _failure(TimeoutError())
    if item.cancelled():
        return Outcome.failed("kafka: send cancelled (producer closed)")
    exc = item.exception()
    return Outcome.ok() if exc is None else _failure(exc)

#: Refusals of a record for its size (by aiokafka before sending, or by the broker).
_TOO_LARGE: tuple[type[BaseException], ...] = (
    MessageSizeTooLargeError, RecordListTooLargeError, RecordTooLargeError)


def _failure(exc: BaseException) -> Outcome:
    if isinstance(exc, TimeoutError):
        return Outcome.failed("no acknowledgement from the broker in time")
    if isinstance(exc, _TOO_LARGE):
        return Outcome.refused_as_too_large(f"kafka: {exc!r}")
    return Outcome.failed(f"kafka: {exc!r}", retryable=not isinstance(exc, _VERDICTS))
