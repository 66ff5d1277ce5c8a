"""Request-reply clients a real user would run, for tests against a gateway reply route:
a requester that asks and waits for its answer, and a service that answers, for Kafka
(librdkafka through `confluent-kafka`, the Spring Kafka `ReplyingKafkaTemplate` header
convention) and AMQP 1.0 (python-qpid-proton's blocking client, `reply-to` and
`correlation-id`).

Each client runs its protocol's own library on a thread of its own and is used from
asyncio through `asyncio.to_thread` (requesters) or runs in the background (services,
context managers); none uses xrgw code, so a test with them checks the gateway against
what the protocol's ecosystem does, not against itself.

    with KafkaService(bootstrap, "quotes", answer) as service:   # answers on the side
        ...
    requester = KafkaRequester(bootstrap, "quotes.in", "client.replies")
    answer = await asyncio.to_thread(requester.ask, b'{"item": "tea"}')

`Answerer` decides a service's answer from the request body: bytes, or None for "no
answer" (a service that never answers, for timeout tests).
"""

from __future__ import annotations

import contextlib
import struct
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self

from confluent_kafka import (
    Consumer,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from proton import Message
from proton.utils import BlockingConnection, BlockingReceiver, BlockingSender

#: The Spring Kafka header names (`KafkaHeaders`), the gateway's defaults too.
REPLY_TOPIC = "kafka_replyTopic"
CORRELATION_ID = "kafka_correlationId"
REPLY_PARTITION = "kafka_replyPartition"

Answerer = Callable[[bytes], bytes | None]


def echo_quote(body: bytes) -> bytes | None:
    """The usual test service: a JSON quote for the requested item."""
    import json

    asked = json.loads(body) if body else {}
    return json.dumps({"price": 42, "item": asked.get("item")}).encode()


class NoAnswer(TimeoutError):
    """The requester's own deadline passed without an answer."""


# ------------------------------------------------------------------------------- Kafka

def create_topics(bootstrap: str, *names: str, partitions: int = 1) -> None:
    """Create topics (and wait until they exist) with librdkafka's admin client."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(n, num_partitions=partitions,
                                            replication_factor=1) for n in names])
    for future in futures.values():
        future.result(timeout=30)


def _headers(message: Any) -> dict[str, bytes]:
    return {name: value for name, value in (message.headers() or []) if value is not None}


#: Tansu answers a fetch only when its wait is over, even when records came meanwhile:
#: short waits keep a round trip from being a fetch wait (more idle fetches instead).
_QUICK_FETCH = {"fetch.wait.max.ms": 10}


def _assign_at_end(consumer: Consumer, topic: str) -> None:
    """Assign every partition of `topic` at its end as the broker reports it now (the
    high watermark), so that whatever is produced from now on is read."""
    metadata = consumer.list_topics(topic, timeout=30)
    assigned = []
    for partition in sorted(metadata.topics[topic].partitions):
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, partition),
                                                 timeout=30)
        assigned.append(TopicPartition(topic, partition, high))
    consumer.assign(assigned)


@dataclass
class KafkaAnswer:
    """An answer a Kafka requester got (or a request a service saw): its value, headers
    and partition."""

    value: bytes
    headers: dict[str, bytes]
    partition: int = 0


class KafkaRequester:
    """Asks on `request_topic` the way Spring's `ReplyingKafkaTemplate` does: a
    `kafka_replyTopic` header naming `reply_topic` and a 16-byte binary
    `kafka_correlationId`, then reads `reply_topic` (assigned, from its end: no group)
    for the answer carrying that correlation. Not thread-safe: one ask at a time, or
    `ask_many` for concurrent requests."""

    def __init__(self, bootstrap: str, request_topic: str, reply_topic: str,
                 reply_partition: int | None = None) -> None:
        self.request_topic = request_topic
        self.reply_topic = reply_topic
        self.reply_partition = reply_partition
        self._producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
        self._consumer = Consumer({"bootstrap.servers": bootstrap,
                                   "group.id": f"requester-{uuid.uuid4().hex[:8]}",
                                   "enable.auto.commit": False, **_QUICK_FETCH})
        _assign_at_end(self._consumer, reply_topic)
        #: Answers whose correlation this requester did not send (or sent before).
        self.strays: list[KafkaAnswer] = []

    def ask(self, value: bytes, timeout: float = 10.0,
            headers: dict[str, bytes] | None = None) -> KafkaAnswer:
        [answer] = self.ask_many([value], timeout, headers)
        return answer

    def ask_many(self, values: list[bytes], timeout: float = 10.0,
                 headers: dict[str, bytes] | None = None) -> list[KafkaAnswer]:
        """Send every request, then wait for all their answers (in request order)."""
        waiting: dict[bytes, int] = {}
        for index, value in enumerate(values):
            correlation = uuid.uuid4().bytes  # binary, as Spring's CorrelationKey
            waiting[correlation] = index
            sent = {**(headers or {}), REPLY_TOPIC: self.reply_topic.encode(),
                    CORRELATION_ID: correlation}
            if self.reply_partition is not None:
                sent[REPLY_PARTITION] = struct.pack(">i", self.reply_partition)
            self._producer.produce(self.request_topic, value, headers=list(sent.items()))
        if self._producer.flush(timeout) != 0:
            raise TimeoutError("requests not acknowledged by the broker")
        answers: dict[int, KafkaAnswer] = {}
        deadline = time.monotonic() + timeout
        while len(answers) < len(values):
            left = deadline - time.monotonic()
            if left <= 0:
                raise NoAnswer(f"{len(values) - len(answers)} of {len(values)} unanswered "
                               f"after {timeout} s")
            message = self._consumer.poll(min(left, 0.2))
            if message is None or message.error():
                continue
            got = KafkaAnswer(message.value() or b"", _headers(message),
                              message.partition() or 0)
            asked = waiting.get(got.headers.get(CORRELATION_ID, b""))
            if asked is None:
                self.strays.append(got)
            else:
                answers[asked] = got
        return [answers[i] for i in range(len(values))]

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._consumer.close()
        self._producer.flush(5)


class _ServiceThread:
    """A service on a thread of its own: `_open()` connects (its failure is raised by
    `__enter__`), `_serve_until_stopped()` answers until `_stop` is set."""

    name = "service"

    def __init__(self, answer: Answerer, delay: float, correlate: bool) -> None:
        self._answer = answer
        self._delay = delay
        self._correlate = correlate
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        if not self._ready.wait(60):
            raise TimeoutError(f"the {self.name} never got ready")
        if self._error is not None:
            raise self._error
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        try:
            self._open()
        except BaseException as exc:  # reported by __enter__
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        try:
            self._serve_until_stopped()
        finally:
            self._close()

    def _waited(self) -> bool:
        """Wait `delay` before an answer; False when stopped meanwhile (no answer)."""
        return not (self._delay and self._stop.wait(self._delay))

    def _open(self) -> None:
        raise NotImplementedError

    def _serve_until_stopped(self) -> None:
        raise NotImplementedError

    def _close(self) -> None:
        raise NotImplementedError


class KafkaService(_ServiceThread):
    """Answers requests on `request_topic` the way a Spring `@KafkaListener` with
    `@SendTo` does: to the request's `kafka_replyTopic` (and `kafka_replyPartition`, when
    given), with the request's `kafka_correlationId` copied byte for byte. `delay`
    seconds before each answer; `correlate=False` leaves the correlation out (a broken
    service). `requests` lists the (value, headers) of what it saw."""

    name = "kafka-service"

    def __init__(self, bootstrap: str, request_topic: str, answer: Answerer = echo_quote,
                 delay: float = 0.0, correlate: bool = True,
                 content_type: str = "application/json") -> None:
        super().__init__(answer, delay, correlate)
        self._bootstrap = bootstrap
        self._topic = request_topic
        self._content_type = content_type
        self.requests: list[KafkaAnswer] = []

    def _open(self) -> None:
        self._consumer = Consumer({"bootstrap.servers": self._bootstrap,
                                   "group.id": f"service-{uuid.uuid4().hex[:8]}",
                                   "auto.offset.reset": "latest", **_QUICK_FETCH})
        self._producer = Producer({"bootstrap.servers": self._bootstrap, "linger.ms": 0})
        _assign_at_end(self._consumer, self._topic)

    def _close(self) -> None:
        self._consumer.close()

    def _serve_until_stopped(self) -> None:
        consumer, producer = self._consumer, self._producer
        while not self._stop.is_set():
            message = consumer.poll(0.2)
            if message is None or message.error():
                continue
            request = KafkaAnswer(message.value() or b"", _headers(message))
            self.requests.append(request)
            reply = self._answer(request.value)
            reply_topic = request.headers.get(REPLY_TOPIC)
            if reply is None or reply_topic is None:
                continue
            if not self._waited():
                break  # stopped while waiting: a stopped service answers nothing
            headers: list[tuple[str, str | bytes | None]] = [
                ("content-type", self._content_type.encode())]
            correlation = request.headers.get(CORRELATION_ID)
            if self._correlate and correlation is not None:
                headers.append((CORRELATION_ID, correlation))
            partition = request.headers.get(REPLY_PARTITION)
            extra = {} if partition is None else {
                "partition": struct.unpack(">i", partition)[0]}
            producer.produce(reply_topic.decode(), reply, headers=headers, **extra)
            producer.flush(10)


# ------------------------------------------------------------------------------- AMQP 1.0

def amqp_connection(host: str, port: int, user: str = "guest",
                    password: str = "guest") -> BlockingConnection:
    return BlockingConnection(f"{host}:{port}", user=user, password=password,
                              allowed_mechs="PLAIN", timeout=30)


class AmqpRequester:
    """Asks on `address` with `reply-to` set to `reply_address` (a queue it receives
    from) and a fresh string `correlation-id` per request, then waits for the answer
    carrying that correlation-id -- what a Qpid / .NET AMQP client does. One ask at a
    time, or `ask_many`."""

    def __init__(self, host: str, port: int, address: str, reply_address: str,
                 subject: str | None = "quote") -> None:
        self.address = address
        self.reply_address = reply_address
        self.subject = subject
        self._connection = amqp_connection(host, port)
        self._receiver: BlockingReceiver = self._connection.create_receiver(
            reply_address, credit=100)
        self._sender: BlockingSender = self._connection.create_sender(address)
        self.strays: list[Message] = []

    def ask(self, body: bytes, timeout: float = 10.0, *, message_id: str | None = None,
            correlation: bool = True) -> Message:
        [answer] = self.ask_many([body], timeout, message_id=message_id,
                                 correlation=correlation)
        return answer

    def ask_many(self, bodies: list[bytes], timeout: float = 10.0, *,
                 message_id: str | None = None, correlation: bool = True) -> list[Message]:
        """Send every request, then wait for all answers (in request order).
        `correlation=False` sends only a message-id (the answer then carries it as its
        correlation-id, the AMQP convention)."""
        waiting: dict[str, int] = {}
        for index, body in enumerate(bodies):
            ident = message_id or f"req-{uuid.uuid4().hex}"
            key = f"corr-{uuid.uuid4().hex}" if correlation else ident
            waiting[key] = index
            request = Message(body=body, id=ident, reply_to=self.reply_address,
                              subject=self.subject, content_type="application/json",
                              durable=True)
            request.inferred = True  # bytes as a data section
            if correlation:
                request.correlation_id = key
            self._sender.send(request, timeout=timeout)
        answers: dict[int, Message] = {}
        deadline = time.monotonic() + timeout
        while len(answers) < len(bodies):
            left = deadline - time.monotonic()
            if left <= 0:
                raise NoAnswer(f"{len(bodies) - len(answers)} of {len(bodies)} unanswered "
                               f"after {timeout} s")
            try:
                got = self._receiver.receive(timeout=min(left, 0.5))
            except Exception:  # proton's Timeout: nothing came in this slice
                continue
            self._receiver.accept()
            asked = waiting.get(str(got.correlation_id))
            if asked is None:
                self.strays.append(got)
            else:
                answers[asked] = got
        return [answers[i] for i in range(len(bodies))]

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._connection.close()


class AmqpService(_ServiceThread):
    """Answers requests received from `address` to their `reply-to`, with their
    `correlation-id` (their `message-id` when they have none), after `delay` seconds;
    `correlate=False` leaves it out (a broken service). `requests` lists what it saw."""

    name = "amqp-service"

    def __init__(self, host: str, port: int, address: str, answer: Answerer = echo_quote,
                 delay: float = 0.0, correlate: bool = True) -> None:
        super().__init__(answer, delay, correlate)
        self._where = (host, port)
        self._address = address
        self.requests: list[Message] = []

    def _open(self) -> None:
        self._connection = amqp_connection(*self._where)
        self._receiver = self._connection.create_receiver(self._address, credit=10)

    def _close(self) -> None:
        with contextlib.suppress(Exception):
            self._connection.close()

    def _serve_until_stopped(self) -> None:
        receiver = self._receiver
        senders: dict[str, BlockingSender] = {}
        while not self._stop.is_set():
            try:
                request = receiver.receive(timeout=0.2)
            except Exception:  # proton's Timeout: nothing yet
                continue
            receiver.accept()
            self.requests.append(request)
            body = request.body
            reply = self._answer(bytes(body) if isinstance(body, (bytes, memoryview))
                                 else str(body or "").encode())
            reply_to = request.reply_to
            if reply is None or not reply_to:
                continue
            if not self._waited():
                break  # stopped while waiting: a stopped service answers nothing
            answer = Message(body=reply, content_type="application/json")
            answer.inferred = True
            if self._correlate:
                answer.correlation_id = request.correlation_id or request.id
            sender = senders.get(reply_to)
            if sender is None:
                sender = senders[reply_to] = self._connection.create_sender(reply_to)
            sender.send(answer, timeout=10)
