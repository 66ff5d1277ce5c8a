"""Request-reply clients of each protocol, for the reply matrix test and the reply bench
(`harness/reply_clients.py` holds the blocking Kafka and AMQP clients the pair tests of
those two protocols use one by one; these are the same protocols' clients in the one
async shape every protocol shares here):
a *requester* (a sender that waits for its answer, as an application would: an HTTP
client, a NATS request, an MQTT 5 publish with a response topic and correlation data)
and a *service* (answers each request, or stays silent, or answers too late).

Every protocol offers the same shapes (`ReplyClients`):

    async with clients.requester(target) as ask:        # target: broker URL, or the
        answer = await ask(address, body, timeout)      # gateway's HTTP ingress URL
    async with clients.serve(broker_url, address, late_by) as service:
        service.url, service.seen                       # where the gateway sends to

A request body says what the service does with it (`request_body`): `echo` answers
`{"echo": n}` at once, `silent` never answers, `late` answers after `late_by` seconds.
An answer is `Answer` (body, HTTP status, MQTT correlation data); no answer within the
requester's timeout is None.

The clients are the libraries a user's application would use (aiohttp, nats-py,
paho-mqtt, librdkafka through confluent-kafka with Spring Kafka's reply headers,
python-qpid-proton with `reply-to` / `correlation-id`), not the gateway's adapters. The
gateway's own side of each protocol (the source consumer, the output producer) is built
here too, so that a test or bench reads everything protocol-specific from one
`ReplyClients` (`clients_for(protocol)`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import queue
import threading
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import nats
import paho.mqtt.client as paho
from aiohttp import web
from confluent_kafka import Consumer as KafkaClientConsumer
from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka import Producer as KafkaClientProducer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from paho.mqtt.enums import CallbackAPIVersion, MQTTProtocolVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from proton import Message
from proton.utils import BlockingConnection

from adapters.amqp import AmqpConsumer, AmqpProducer
from adapters.http import HttpConsumer, HttpProducer
from adapters.kafka import KafkaConsumer, KafkaProducer
from adapters.mqtt import MqttConsumer, MqttProducer
from adapters.nats import NatsConsumer, NatsProducer
from gateway import ports
from gateway.json.values import JSON, JSONObject
from gateway.ports import EndpointSettings
from gateway.protocols import AMQP, HTTP, KAFKA, MQTT5, NATS
from harness.brokers import free_port

#: What a service does with a request (`odd`: answers at once, `{"odd": n}`, an answer
#: of another shape than the echo's).
ECHO, SILENT, LATE, ODD = "echo", "silent", "late", "odd"


def request_body(behaviour: str, n: int) -> bytes:
    """A request the service handles as `behaviour` (echo, silent, late, odd)."""
    return json.dumps({"do": behaviour, "n": n}).encode()


def echo_of(body: bytes) -> bytes:
    """What the service answers to `body`: `{"echo": n}`."""
    return json.dumps({"echo": json.loads(body)["n"]}).encode()


def _decide(body: bytes, late_by: float) -> tuple[bytes, float] | None:
    """The service's answer to `body` and after how long; None: no answer."""
    try:
        asked = json.loads(body)
        behaviour, n = asked["do"], asked["n"]
    except (ValueError, KeyError, TypeError):
        # A CloudEvent the gateway sent structured, or any other body: echo it whole.
        return body, 0.0
    if behaviour == SILENT:
        return None
    answer = json.dumps({"odd" if behaviour == ODD else "echo": n}).encode()
    return answer, (late_by if behaviour == LATE else 0.0)


@dataclass(frozen=True)
class Answer:
    body: bytes
    status: int | None = None  # HTTP only
    correlation: str | None = None  # MQTT 5 correlation data, as it came back


@dataclass
class Service:
    url: str  # where the gateway's output sends requests (the broker, or the HTTP server)
    seen: list[bytes] = field(default_factory=list)  # request bodies received


Ask = Callable[[str, bytes, float], Awaitable[Answer | None]]
Requester = Callable[[str], AbstractAsyncContextManager[Ask]]
Serve = Callable[[str, str, float], AbstractAsyncContextManager[Service]]


@dataclass(frozen=True)
class ReplyClients:
    """Everything protocol-specific a request-reply test or bench needs of one protocol.

    broker           - the pytest fixture starting its broker (None: no broker, HTTP);
    address          - uid -> the address a requester asks on (topic, subject, path);
    request_options  - uid -> the protocoloptions of the request's definition;
    service_address  - uid -> where the gateway's output sends the request;
    source           - (broker URL, uid) -> the gateway's consumer of the requests;
    output           - (service URL, service address) -> the gateway's producer and the
                       fields its records get;
    timeout_status   - what a sender gets when no answer came: an HTTP status, or None
                       (nothing: its own timeout tells it);
    late_reaches_gateway - whether an answer after `reply_timeout` still comes back to
                       the gateway (a reply address), where it is counted as late; an
                       HTTP output's request is closed at the timeout instead;
    url_attribute    - the broker fixture's attribute the clients connect to;
    prepare          - (broker URL, uid) -> what must exist first (Kafka topics).
    """

    protocol: str
    broker: str | None
    requester: Requester
    serve: Serve
    address: Callable[[str], str]
    request_options: Callable[[str], JSONObject]
    service_address: Callable[[str], str]
    source: Callable[[str, str], ports.Consumer]
    output: Callable[[str, str], tuple[ports.Producer, dict[str, JSON]]]
    timeout_status: int | None
    late_reaches_gateway: bool
    url_attribute: str = "url"
    prepare: Callable[[str, str], Awaitable[None]] | None = None


# ---------------------------------------------------------------------- HTTP

@asynccontextmanager
async def http_requester(target: str) -> AsyncIterator[Ask]:
    """POSTs to `target` + path; the response is the answer (any status)."""
    async with aiohttp.ClientSession() as session:
        async def ask(address: str, body: bytes, timeout: float) -> Answer | None:
            try:
                async with session.post(
                        f"{target}{address}", data=body,
                        headers={"Content-Type": "application/json"},
                        timeout=aiohttp.ClientTimeout(total=timeout)) as response:
                    return Answer(await response.read(), response.status)
            except TimeoutError:
                return None
        yield ask


@asynccontextmanager
async def http_service(url: str, address: str, late_by: float) -> AsyncIterator[Service]:
    """An HTTP server answering 200 with the echo (`url`, `address` unused: it listens
    on a port of its own, given as `Service.url`)."""
    service = Service("")

    async def handle(request: web.BaseRequest) -> web.StreamResponse:
        body = await request.read()
        service.seen.append(body)
        decided = _decide(body, late_by)
        if decided is None:
            await asyncio.sleep(3600)  # until the gateway gives up on it
            raise web.HTTPGatewayTimeout()
        answer, delay = decided
        if delay:
            await asyncio.sleep(delay)
        return web.Response(body=answer, content_type="application/json")

    # The silent request's handler never ends on its own: the server's shutdown waits
    # for it no longer than this (aiohttp's default is 60 s, per test).
    runner = web.ServerRunner(web.Server(handle), shutdown_timeout=0.5)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    service.url = f"http://127.0.0.1:{port}"
    try:
        yield service
    finally:
        await runner.cleanup()


def _http_source(url: str, uid: str) -> ports.Consumer:
    return HttpConsumer(EndpointSettings("http://127.0.0.1:0",
                                         options={"settle_timeout": 60}))


def _http_output(url: str, address: str) -> tuple[ports.Producer, dict[str, JSON]]:
    return HttpProducer(EndpointSettings(url)), {"path": address}


HTTP_CLIENTS = ReplyClients(
    protocol=HTTP, broker=None, requester=http_requester, serve=http_service,
    address=lambda uid: f"/rr/{uid}/ask",
    request_options=lambda uid: {"path": {"value": f"/rr/{uid}/ask"}},
    service_address=lambda uid: f"/svc/{uid}",
    source=_http_source, output=_http_output,
    timeout_status=504, late_reaches_gateway=False)


# ---------------------------------------------------------------------- NATS

@asynccontextmanager
async def nats_requester(target: str) -> AsyncIterator[Ask]:
    """Core NATS requests (nats-py: a reply subject on its own inbox)."""
    nc = await nats.connect(target)
    try:
        async def ask(address: str, body: bytes, timeout: float) -> Answer | None:
            try:
                msg = await nc.request(address, body, timeout=timeout,
                                       headers={"Content-Type": "application/json"})
            except nats.errors.TimeoutError:
                return None
            return Answer(msg.data)
        yield ask
    finally:
        await nc.close()


@asynccontextmanager
async def nats_service(url: str, address: str, late_by: float) -> AsyncIterator[Service]:
    """Answers requests on subject `address` to their reply subject."""
    nc = await nats.connect(url)
    service = Service(url)
    later: set[asyncio.Task[None]] = set()

    async def reply(subject: str, answer: bytes, delay: float) -> None:
        await asyncio.sleep(delay)
        await nc.publish(subject, answer, headers={"Content-Type": "application/json"})

    async def on_request(msg: Any) -> None:
        service.seen.append(msg.data)
        decided = _decide(msg.data, late_by)
        if decided is None or not msg.reply:
            return
        answer, delay = decided
        if not delay:
            await nc.publish(msg.reply, answer, headers={"Content-Type": "application/json"})
            return
        task = asyncio.create_task(reply(msg.reply, answer, delay))
        later.add(task)
        task.add_done_callback(later.discard)

    await nc.subscribe(address, cb=on_request)
    await nc.flush()
    try:
        yield service
    finally:
        for task in later:
            task.cancel()
        await nc.close()


def _nats_source(url: str, uid: str) -> ports.Consumer:
    return NatsConsumer(EndpointSettings(url, options={"subjects": [f"rr.{uid}.ask"]}))


def _nats_output(url: str, address: str) -> tuple[ports.Producer, dict[str, JSON]]:
    return NatsProducer(EndpointSettings(url)), {"subject": address}


NATS_CLIENTS = ReplyClients(
    protocol=NATS, broker="nats_server", requester=nats_requester, serve=nats_service,
    address=lambda uid: f"rr.{uid}.ask",
    request_options=lambda uid: {"subject": {"value": f"rr.{uid}.ask"}},
    service_address=lambda uid: f"svc.{uid}",
    source=_nats_source, output=_nats_output,
    timeout_status=None, late_reaches_gateway=True)


# ---------------------------------------------------------------------- MQTT 5

def _after(delay: float, send: Callable[[], object], timers: list[threading.Timer]) -> None:
    """`send` now, or after `delay` seconds on a timer thread (kept, to cancel)."""
    if not delay:
        send()
        return
    timer = threading.Timer(delay, send)
    timers.append(timer)
    timer.start()


def _paho(url: str, client_id: str) -> paho.Client:
    where = urlsplit(url)
    client = paho.Client(CallbackAPIVersion.VERSION2, client_id=client_id,
                         protocol=MQTTProtocolVersion.MQTTv5)
    client.connect(where.hostname or "127.0.0.1", where.port or 1883)
    return client


async def _subscribed(client: paho.Client, topic: str) -> None:
    """Subscribe `topic` (QoS 1) and wait for the SUBACK; starts the network thread."""
    done = threading.Event()
    client.on_subscribe = lambda *_: done.set()
    client.loop_start()
    client.subscribe(topic, qos=1)
    if not await asyncio.to_thread(done.wait, 30):
        raise TimeoutError(f"no SUBACK for {topic}")


class _Pending:
    """Requests waiting for their answer, by correlation; answers come from a client's
    own network thread (paho, librdkafka, proton) and are handed to the event loop."""

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._waiting: dict[str | bytes, asyncio.Future[Answer]] = {}
        self._lock = threading.Lock()

    def answered(self, correlation: str | bytes, answer: Answer) -> None:
        """From any thread: `answer` carries `correlation`."""
        with self._lock:
            future = self._waiting.pop(correlation, None)
        if future is not None:
            self._loop.call_soon_threadsafe(
                lambda: None if future.done() else future.set_result(answer))

    async def ask(self, correlation: str | bytes, send: Callable[[], object],
                  timeout: float) -> Answer | None:
        """`send` the request, then its answer, or None after `timeout` seconds."""
        future: asyncio.Future[Answer] = self._loop.create_future()
        with self._lock:
            self._waiting[correlation] = future
        try:
            send()
            return await asyncio.wait_for(future, timeout)
        except TimeoutError:
            return None
        finally:
            with self._lock:
                self._waiting.pop(correlation, None)


class MqttRequester:
    """An MQTT 5 requester (paho-mqtt): one response topic, each request with its own
    correlation data; answers handed to the waiting request by it."""

    def __init__(self, url: str) -> None:
        self.uid = uuid.uuid4().hex[:12]
        self.response_topic = f"rr-client/{self.uid}/answers"
        self._client = _paho(url, f"req-{self.uid}")
        self._pending: _Pending | None = None
        self._client.on_message = self._on_message

    def _on_message(self, _client: Any, _userdata: Any, msg: Any) -> None:
        data = getattr(msg.properties, "CorrelationData", None)
        if data is not None and self._pending is not None:
            correlation = bytes(data).decode("utf-8", "replace")
            self._pending.answered(correlation, Answer(bytes(msg.payload),
                                                       correlation=correlation))

    async def start(self) -> None:
        self._pending = _Pending()
        await _subscribed(self._client, self.response_topic)

    async def ask(self, address: str, body: bytes, timeout: float) -> Answer | None:
        assert self._pending is not None, "start() first"
        correlation = uuid.uuid4().hex
        props = Properties(PacketTypes.PUBLISH)  # type: ignore[no-untyped-call]
        props.ResponseTopic = self.response_topic
        props.CorrelationData = correlation.encode()
        props.ContentType = "application/json"
        return await self._pending.ask(
            correlation, lambda: self._client.publish(address, body, qos=1, properties=props),
            timeout)

    def close(self) -> None:
        self._client.disconnect()
        self._client.loop_stop()


@asynccontextmanager
async def mqtt5_requester(target: str) -> AsyncIterator[Ask]:
    requester = MqttRequester(target)
    try:
        await requester.start()
        yield requester.ask
    finally:
        requester.close()


@asynccontextmanager
async def mqtt5_service(url: str, address: str, late_by: float) -> AsyncIterator[Service]:
    """Answers MQTT 5 requests on `address` to their response topic, with their
    correlation data (paho-mqtt)."""
    service = Service(url)
    client = _paho(url, f"svc-{uuid.uuid4().hex[:12]}")
    timers: list[threading.Timer] = []

    def on_message(_client: Any, _userdata: Any, msg: Any) -> None:
        body = bytes(msg.payload)
        service.seen.append(body)
        response_topic = getattr(msg.properties, "ResponseTopic", None)
        decided = _decide(body, late_by)
        if decided is None or not response_topic:
            return
        answer, delay = decided
        props = Properties(PacketTypes.PUBLISH)  # type: ignore[no-untyped-call]
        props.ContentType = "application/json"
        correlation = getattr(msg.properties, "CorrelationData", None)
        if correlation is not None:
            props.CorrelationData = correlation

        _after(delay, lambda: client.publish(response_topic, answer, qos=1,
                                             properties=props), timers)

    client.on_message = on_message
    try:
        await _subscribed(client, address)
        yield service
    finally:
        for timer in timers:
            timer.cancel()
        client.disconnect()
        client.loop_stop()


def _mqtt5_source(url: str, uid: str) -> ports.Consumer:
    return MqttConsumer(EndpointSettings(url, client_id=f"gw-{uid}",
                                         options={"filters": [f"rr/{uid}/ask"]}))


def _mqtt5_output(url: str, address: str) -> tuple[ports.Producer, dict[str, JSON]]:
    return MqttProducer(EndpointSettings(url)), {"topic_name": address}


MQTT5_CLIENTS = ReplyClients(
    protocol=MQTT5, broker="mosquitto", requester=mqtt5_requester, serve=mqtt5_service,
    address=lambda uid: f"rr/{uid}/ask",
    request_options=lambda uid: {"topic_name": f"rr/{uid}/ask"},
    service_address=lambda uid: f"svc/{uid}",
    source=_mqtt5_source, output=_mqtt5_output,
    timeout_status=None, late_reaches_gateway=True)


# ---------------------------------------------------------------------- Kafka
# Spring Kafka's ReplyingKafkaTemplate convention: the request names its reply topic in
# the `kafka_replyTopic` header and carries a `kafka_correlationId` the answer copies.

KAFKA_REPLY_TOPIC, KAFKA_CORRELATION = "kafka_replyTopic", "kafka_correlationId"


def _bootstrap(url: str) -> str:
    return urlsplit(url).netloc


def _create_topics(url: str, *names: str) -> None:
    admin = AdminClient({"bootstrap.servers": _bootstrap(url)})
    futures = admin.create_topics([NewTopic(n, num_partitions=1, replication_factor=1)
                                   for n in names])
    for future in futures.values():
        try:
            future.result(timeout=30)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise


def _kafka_reader(url: str, topic: str) -> KafkaClientConsumer:
    """A librdkafka consumer assigned to `topic` at its current end (no group): at the
    high watermark read from the broker, so nothing sent from now on is missed."""
    reader = KafkaClientConsumer({"bootstrap.servers": _bootstrap(url),
                                  "group.id": f"rr-{uuid.uuid4().hex[:8]}",
                                  "enable.auto.commit": False})
    partitions = sorted(reader.list_topics(topic, timeout=30).topics[topic].partitions)
    ends = [reader.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
            for p in partitions]
    reader.assign([TopicPartition(topic, p, end[1]) for p, end in zip(partitions, ends,
                                                                     strict=True)])
    return reader


def _kafka_headers(message: Any) -> dict[str, bytes]:
    return {name: value for name, value in (message.headers() or []) if value is not None}


class _Polling:
    """A thread polling a blocking client until `stop`."""

    def __init__(self, poll: Callable[[], None]) -> None:
        self.stop = threading.Event()
        self._poll = poll
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            self._poll()

    def close(self) -> None:
        self.stop.set()
        self._thread.join(30)


@asynccontextmanager
async def kafka_requester(target: str) -> AsyncIterator[Ask]:
    """Produces requests with the reply-topic and correlation headers (librdkafka), reads
    its own reply topic for the answers."""
    reply_topic = f"rr-client-{uuid.uuid4().hex[:10]}"
    await asyncio.to_thread(_create_topics, target, reply_topic)
    reader = await asyncio.to_thread(_kafka_reader, target, reply_topic)
    producer = KafkaClientProducer({"bootstrap.servers": _bootstrap(target), "linger.ms": 0})
    pending = _Pending()

    def poll() -> None:
        message = reader.poll(0.1)
        if message is None or message.error():
            return
        pending.answered(_kafka_headers(message).get(KAFKA_CORRELATION, b""),
                         Answer(message.value() or b""))

    polling = _Polling(poll)

    async def ask(address: str, body: bytes, timeout: float) -> Answer | None:
        correlation = uuid.uuid4().bytes  # binary, as Spring's CorrelationKey
        answer = await pending.ask(correlation, lambda: producer.produce(
            address, body, headers=[(KAFKA_REPLY_TOPIC, reply_topic.encode()),
                                    (KAFKA_CORRELATION, correlation),
                                    ("content-type", b"application/json")]), timeout)
        return answer

    try:
        yield ask
    finally:
        await asyncio.to_thread(polling.close)
        await asyncio.to_thread(reader.close)


@asynccontextmanager
async def kafka_service(url: str, address: str, late_by: float) -> AsyncIterator[Service]:
    """Answers requests on topic `address` to their reply topic with their correlation
    header copied (a Spring `@KafkaListener` with `@SendTo`)."""
    service = Service(url)
    reader = await asyncio.to_thread(_kafka_reader, url, address)
    producer = KafkaClientProducer({"bootstrap.servers": _bootstrap(url), "linger.ms": 0})
    timers: list[threading.Timer] = []

    def poll() -> None:
        message = reader.poll(0.1)
        if message is None or message.error():
            return
        body, headers = message.value() or b"", _kafka_headers(message)
        service.seen.append(body)
        decided = _decide(body, late_by)
        reply_topic = headers.get(KAFKA_REPLY_TOPIC)
        if decided is None or reply_topic is None:
            return
        answer, delay = decided
        sent: list[tuple[str, str | bytes | None]] = [("content-type", b"application/json")]
        if KAFKA_CORRELATION in headers:
            sent.append((KAFKA_CORRELATION, headers[KAFKA_CORRELATION]))

        def send() -> None:
            producer.produce(reply_topic.decode(), answer, headers=sent)
            producer.flush(10)

        _after(delay, send, timers)

    polling = _Polling(poll)
    try:
        yield service
    finally:
        for timer in timers:
            timer.cancel()
        await asyncio.to_thread(polling.close)
        await asyncio.to_thread(reader.close)


async def _kafka_prepare(url: str, uid: str) -> None:
    await asyncio.to_thread(_create_topics, url, f"rr-{uid}", f"svc-{uid}",
                            f"svc-{uid}-replies")


def _kafka_source(url: str, uid: str) -> ports.Consumer:
    return KafkaConsumer(EndpointSettings(url, options={
        "topics": [f"rr-{uid}"], "consumergroup": f"gw-{uid}", "autooffsetreset": "earliest"}))


def _kafka_output(url: str, address: str) -> tuple[ports.Producer, dict[str, JSON]]:
    return KafkaProducer(EndpointSettings(url, options={
        "topic": address, "reply_topic": f"{address}-replies"})), {"topic": address}


KAFKA_CLIENTS = ReplyClients(
    protocol=KAFKA, broker="tansu", requester=kafka_requester, serve=kafka_service,
    address=lambda uid: f"rr-{uid}",
    request_options=lambda uid: {"topic": f"rr-{uid}"},
    service_address=lambda uid: f"svc-{uid}",
    source=_kafka_source, output=_kafka_output,
    timeout_status=None, late_reaches_gateway=True, prepare=_kafka_prepare)


# ---------------------------------------------------------------------- AMQP 1.0
# The message format's own fields: `reply-to` names the answer's node, the answer
# carries the request's `correlation-id` (its `message-id` when it has none).

def _amqp_connection(url: str) -> BlockingConnection:
    where = urlsplit(url)
    return BlockingConnection(f"{where.hostname}:{where.port}", user=where.username,
                              password=where.password, allowed_mechs="PLAIN", timeout=30)


class _AmqpLoop:
    """One proton blocking connection, used from one thread only (proton is not
    thread-safe): sends what is queued, receives on `receive_from`, hands each received
    message to `on_message`."""

    def __init__(self, url: str, receive_from: str,
                 on_message: Callable[[Message], None]) -> None:
        self._outgoing: queue.Queue[tuple[float, str, Message]] = queue.Queue()
        self._later: list[tuple[float, str, Message]] = []
        self._on_message = on_message
        self._ready = threading.Event()
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self._url, self._address = url, receive_from
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()
        if not self._ready.wait(60) or self._error is not None:
            raise RuntimeError(f"AMQP client not attached to {self._address}: {self._error}")

    def send(self, address: str, message: Message, delay: float = 0.0) -> None:
        self._outgoing.put((time.monotonic() + delay, address, message))

    def _run(self) -> None:
        try:
            connection = _amqp_connection(self._url)
            receiver = connection.create_receiver(self._address, credit=100)
        except BaseException as exc:  # reported by start()
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        senders: dict[str, Any] = {}
        try:
            while not self._stop.is_set():
                while not self._outgoing.empty():
                    self._later.append(self._outgoing.get_nowait())
                now = time.monotonic()
                for item in [i for i in self._later if i[0] <= now]:
                    self._later.remove(item)
                    sender = senders.get(item[1])
                    if sender is None:
                        sender = senders[item[1]] = connection.create_sender(item[1])
                    sender.send(item[2], timeout=10)
                try:
                    message = receiver.receive(timeout=0.02)
                except Exception:  # proton's Timeout: nothing in this slice
                    continue
                receiver.accept()
                self._on_message(message)
        finally:
            with contextlib.suppress(Exception):
                connection.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(30)


def _amqp_body(message: Message) -> bytes:
    body = message.body
    if isinstance(body, (bytes, memoryview)):
        return bytes(body)
    return str(body or "").encode()


def _amqp_message(body: bytes, **properties: Any) -> Message:
    message = Message(body=body, content_type="application/json", **properties)
    message.inferred = True  # bytes as a data section
    return message


#: The subject every AMQP request carries (what the request definition matches).
AMQP_SUBJECT = "rr"


@asynccontextmanager
async def amqp_requester(target: str) -> AsyncIterator[Ask]:
    """Sends requests with `reply-to` (a queue of its own) and a `correlation-id`
    (python-qpid-proton), and waits for the answer carrying it."""
    reply_to = f"/queue/rr-client-{uuid.uuid4().hex[:10]}"
    pending = _Pending()

    def on_message(message: Message) -> None:
        pending.answered(str(message.correlation_id), Answer(_amqp_body(message)))

    client = _AmqpLoop(target, reply_to, on_message)
    await asyncio.to_thread(client.start)

    async def ask(address: str, body: bytes, timeout: float) -> Answer | None:
        correlation = f"corr-{uuid.uuid4().hex}"
        request = _amqp_message(body, id=f"req-{uuid.uuid4().hex}", reply_to=reply_to,
                                correlation_id=correlation, subject=AMQP_SUBJECT)
        return await pending.ask(correlation, lambda: client.send(address, request), timeout)

    try:
        yield ask
    finally:
        await asyncio.to_thread(client.close)


@asynccontextmanager
async def amqp_service(url: str, address: str, late_by: float) -> AsyncIterator[Service]:
    """Answers requests from node `address` to their `reply-to`, with their
    `correlation-id` (else their `message-id`)."""
    service = Service(url)

    def on_message(message: Message) -> None:
        body = _amqp_body(message)
        service.seen.append(body)
        decided = _decide(body, late_by)
        if decided is None or not message.reply_to:
            return
        answer, delay = decided
        client.send(message.reply_to, _amqp_message(
            answer, correlation_id=message.correlation_id or message.id), delay)

    client = _AmqpLoop(url, address, on_message)
    await asyncio.to_thread(client.start)
    try:
        yield service
    finally:
        await asyncio.to_thread(client.close)


def _amqp_source(url: str, uid: str) -> ports.Consumer:
    return AmqpConsumer(EndpointSettings(url, options={
        "node": f"/queue/rr-{uid}", "terminus-durability": "none"}))


def _amqp_output(url: str, address: str) -> tuple[ports.Producer, dict[str, JSON]]:
    return AmqpProducer(EndpointSettings(url, options={
        "node": address, "reply_address": f"{address}-replies",
        "terminus-durability": "none"})), {}


AMQP_CLIENTS = ReplyClients(
    protocol=AMQP, broker="rabbitmq", requester=amqp_requester, serve=amqp_service,
    address=lambda uid: f"/queue/rr-{uid}",
    request_options=lambda uid: {"properties": {"subject": {"value": AMQP_SUBJECT}}},
    service_address=lambda uid: f"/queue/svc-{uid}",
    source=_amqp_source, output=_amqp_output,
    timeout_status=None, late_reaches_gateway=True, url_attribute="login_url")


# ---------------------------------------------------------------------- lookup

#: The protocols with clients here (a test takes those whose profile can carry
#: request-reply: `ProtocolProfile.request_reply`).
CLIENTS: tuple[ReplyClients, ...] = (HTTP_CLIENTS, NATS_CLIENTS, MQTT5_CLIENTS,
                                     KAFKA_CLIENTS, AMQP_CLIENTS)


def clients_for(protocol: str) -> ReplyClients | None:
    return next((c for c in CLIENTS if c.protocol == protocol), None)

