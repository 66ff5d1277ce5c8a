"""Kafka request-reply, the Spring Kafka `ReplyingKafkaTemplate` convention: a request
carries a reply-topic header (`kafka_replyTopic`) and a correlation header
(`kafka_correlationId`), optionally a reply-partition header (`kafka_replyPartition`, a
4-byte big-endian int); the service produces its answer to that topic (and partition)
with the correlation header copied byte for byte. The header names are endpoint options
(`reply_topic_header`, `correlation_header`).

As the output (`KafkaProducer.request`): each request gets the producer's `reply_topic`
and a correlation token; `ReplyReader` reads the reply topic and hands each answer to the
`ReplyTable`. It reads without a consumer group: every partition assigned by hand,
starting at the end as it was when the reader started (before the first request went
out, so no answer can come before it), and no offsets committed -- an answer matters only
to the request waiting in this process now; after a restart nothing waits for the old
ones. Several gateway instances may share one reply topic: each reads every answer and
ignores those whose token it did not issue (`ReplyTable.issued`).

As the source (`AnswerSender`): a consumed request with a reply-topic header gets an
`answer` hook that produces the answer to that topic (and partition) with the request's
correlation header, through a producer of its own opened at the first answer; the source
offset is committed only after that answer (or the dead letter) is settled, as on every
route.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
import time
import uuid
from collections.abc import Sequence
from typing import Any

from aiokafka import (  # type: ignore[import-untyped]  # no py.typed
    AIOKafkaConsumer,
    AIOKafkaProducer,
    TopicPartition,
)
from aiokafka.errors import KafkaError  # type: ignore[import-untyped]

from adapters.kafka.connection import explain, stop_quietly
from adapters.kafka.options import KafkaOptions
from adapters.kafka.record import KafkaRecordLike, to_record, to_send
from gateway.cloudevents import with_extension
from gateway.json.values import JSON
from gateway.ports import CORRELATION_ATTRIBUTE, Answer, ReplyTable, correlation_of
from gateway.protocols import KAFKA_REPLY_PARTITION
from gateway.record import NativeMessage

log = logging.getLogger("adapters.kafka")

#: The reply reader's fetch long-poll. Apache Kafka answers a fetch as soon as records
#: arrive, but some brokers (Tansu) only when the wait is over: an answer's latency is
#: then up to this wait (bench/bench_reply_wire.py: p50 254 ms at aiokafka's 500), at the
#: price of idle fetches on a quiet reply topic (20 a second, each a few bytes).
_REPLY_FETCH_WAIT_MS = 50


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _without(record: NativeMessage, names: Sequence[str]) -> list[JSON]:
    """The record's headers except those named `names`, as record entries."""
    return [{"name": n, "value": v} for n, v in record.pairs("headers") if n not in names]


def requesting(record: NativeMessage, opts: KafkaOptions, reply_topic: str,
               token: str) -> NativeMessage:
    """`record` as a request: the reply-topic and correlation headers (replacing any it
    had), and the `correlationid` extension when it is a binary CloudEvent."""
    record = with_extension(record, CORRELATION_ATTRIBUTE, token)
    names = (opts.reply_topic_header, opts.correlation_header, KAFKA_REPLY_PARTITION)
    headers: list[JSON] = [*_without(record, names),
                           {"name": opts.reply_topic_header, "value": reply_topic},
                           {"name": opts.correlation_header, "value": token}]
    return record.replace_fields({**record.fields, "headers": headers})


def _header(headers: Sequence[tuple[str, bytes | None]], name: str) -> bytes | None:
    for key, value in headers:
        if key == name:
            return value
    return None


class ReplyReader:
    """Reads the reply topic from its end, without a group, and resolves each answer in
    `replies` by its correlation header (or its `correlationid` extension)."""

    def __init__(self, opts: KafkaOptions, replies: ReplyTable, client_id: str) -> None:
        self._opts = opts
        self._replies = replies
        self._client_id = client_id
        self._consumer: Any = None  # AIOKafkaConsumer
        self._task: asyncio.Task[None] | None = None
        self._starting = asyncio.Lock()  # concurrent first requests start one reader
        self.foreign = 0  # answers to another requester sharing the topic

    @property
    def listening(self) -> bool:
        return self._task is not None and not self._task.done()

    async def listen(self, topic: str) -> str | None:
        """Start reading `topic` at its current end; None once positioned (an answer
        produced from now on is read), else why not."""
        async with self._starting:
            if self.listening:
                return None
            return await self._start(topic)

    async def _start(self, topic: str) -> str | None:
        await self.aclose()
        opts = self._opts
        consumer = AIOKafkaConsumer(
            bootstrap_servers=list(opts.bootstrap), group_id=None,
            client_id=f"{self._client_id}-replies", enable_auto_commit=False,
            isolation_level="read_committed", fetch_max_wait_ms=_REPLY_FETCH_WAIT_MS,
            **opts.security)
        try:
            async with asyncio.timeout(opts.connect_timeout):
                await consumer.start()
                partitions = await _partitions_of(consumer, topic)
                assigned = [TopicPartition(topic, p) for p in partitions]
                consumer.assign(assigned)
                await consumer.seek_to_end(*assigned)
                for tp in assigned:  # resolve the end now: answers after it are read
                    await consumer.position(tp)
        except (KafkaError, OSError, TimeoutError, KeyError, LookupError) as exc:
            await stop_quietly(consumer, 1.0)
            return f"cannot read the reply topic {topic}: {await explain(opts, exc)}"
        self._consumer = consumer
        self._task = asyncio.create_task(self._read(consumer), name="xrgw-kafka-replies")
        return None

    async def _read(self, consumer: Any) -> None:
        failing = False  # said once per episode, and when it ends
        while True:
            try:
                fetched = await consumer.getmany(timeout_ms=1000)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # aiokafka reconnects on its own; the requests time out
                if not failing:
                    log.warning("kafka: reading the reply topic %s failed, answers wait "
                                "until it works again: %r", self._opts.reply_topic, exc)
                    failing = True
                await asyncio.sleep(1.0)
                continue
            if failing:
                log.info("kafka: the reply topic %s is read again", self._opts.reply_topic)
                failing = False
            received_at = _now()
            for records in fetched.values():
                for record in records:
                    self._answer(record, received_at)

    def _answer(self, record: KafkaRecordLike, received_at: str) -> None:
        raw = _header(record.headers, self._opts.correlation_header)
        try:
            token = None if raw is None else raw.decode("utf-8")
        except UnicodeDecodeError:
            token = ""  # not one of ours (ours are ASCII)
        if token is not None and not self._replies.issued(token):
            self.foreign += 1  # another requester's answer on a shared topic
            return
        answer = to_record(record, received_at)
        self._replies.resolve(token or correlation_of(answer), answer)

    async def aclose(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            await stop_quietly(consumer, 2.0)


async def _partitions_of(consumer: Any, topic: str) -> list[int]:
    """The topic's partitions, once its metadata came (UnknownTopicOrPartitionError, a
    KafkaError, when it does not exist)."""
    # aiokafka's public partitions_for_topic does not wait for the metadata.
    partitions = await consumer._client._wait_on_metadata(topic)
    return sorted(partitions)


class AnswerSender:
    """The answers of a Kafka source's requests: produced to each request's reply topic
    with its correlation header, through a producer opened at the first answer."""

    def __init__(self, opts: KafkaOptions, client_id: str) -> None:
        self._opts = opts
        self._client_id = client_id
        self._producer: Any = None  # AIOKafkaProducer
        self._starting = asyncio.Lock()

    def answerer(self, record: KafkaRecordLike) -> Answer | None:
        """The answer hook of a consumed record: None unless it names a reply topic."""
        headers = record.headers
        if not headers:
            return None
        topic = _header(headers, self._opts.reply_topic_header)
        if not topic:
            return None
        try:
            reply_topic = topic.decode("utf-8")
        except UnicodeDecodeError:
            return None
        correlation = _header(headers, self._opts.correlation_header)
        raw_partition = _header(headers, KAFKA_REPLY_PARTITION)
        partition = (struct.unpack(">i", raw_partition)[0]
                     if raw_partition is not None and len(raw_partition) == 4 else None)

        async def answer(reply: NativeMessage | None, why: str) -> None:
            # No answer -> nothing is sent: the requester's own timeout tells it.
            if reply is not None:
                await self._send(reply, reply_topic, partition, correlation)

        return answer

    async def _send(self, reply: NativeMessage, topic: str, partition: int | None,
                    correlation: bytes | None) -> None:
        opts = self._opts
        names = (opts.reply_topic_header, opts.correlation_header, KAFKA_REPLY_PARTITION)
        fields: dict[str, JSON] = {name: value for name, value in reply.fields.items()
                                   if name in ("key", "key_base64")}
        fields["headers"] = _without(reply, names)
        args = to_send(reply.replace_fields(fields), topic, ())
        headers = list(args.headers)
        if correlation is not None:
            headers.append((opts.correlation_header, correlation))
        producer = await self._started()
        async with asyncio.timeout(opts.publish_timeout):
            await producer.send_and_wait(topic, args.value, args.key, partition,
                                         headers=headers)

    async def _started(self) -> Any:
        async with self._starting:
            if self._producer is None:
                opts = self._opts
                producer = AIOKafkaProducer(
                    bootstrap_servers=list(opts.bootstrap),
                    client_id=f"{self._client_id}-answers-{uuid.uuid4().hex[:6]}",
                    acks=opts.acks, request_timeout_ms=int(opts.publish_timeout * 1000),
                    **opts.security)
                try:
                    async with asyncio.timeout(opts.connect_timeout):
                        await producer.start()
                except BaseException:
                    await stop_quietly(producer, 1.0)
                    raise
                self._producer = producer
            return self._producer

    async def aclose(self) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            with contextlib.suppress(Exception):
                await stop_quietly(producer, 2.0)
