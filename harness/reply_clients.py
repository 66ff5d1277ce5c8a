"""Request-reply clients of each protocol, for the reply matrix test and the reply bench:
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
paho-mqtt), not the gateway's adapters. The gateway's own side of each protocol (the
source consumer, the output producer) is built here too, so that a test or bench reads
everything protocol-specific from one `ReplyClients` (`clients_for(protocol)`).
"""

from __future__ import annotations

import asyncio
import json
import threading
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
from paho.mqtt.enums import CallbackAPIVersion, MQTTProtocolVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from adapters.http import HttpConsumer, HttpProducer
from adapters.mqtt import MqttConsumer, MqttProducer
from adapters.nats import NatsConsumer, NatsProducer
from gateway.json.values import JSON, JSONObject
from gateway.ports import Consumer, EndpointSettings, Producer
from gateway.protocols import HTTP, MQTT5, NATS
from harness.brokers import free_port

#: What a service does with a request.
ECHO, SILENT, LATE = "echo", "silent", "late"


def request_body(behaviour: str, n: int) -> bytes:
    """A request the service handles as `behaviour` (echo, silent, late)."""
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
    answer = json.dumps({"echo": n}).encode()
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
                       HTTP output's request is closed at the timeout instead.
    """

    protocol: str
    broker: str | None
    requester: Requester
    serve: Serve
    address: Callable[[str], str]
    request_options: Callable[[str], JSONObject]
    service_address: Callable[[str], str]
    source: Callable[[str, str], Consumer]
    output: Callable[[str, str], tuple[Producer, dict[str, JSON]]]
    timeout_status: int | None
    late_reaches_gateway: bool


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

    runner = web.ServerRunner(web.Server(handle))
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    service.url = f"http://127.0.0.1:{port}"
    try:
        yield service
    finally:
        await runner.cleanup()


def _http_source(url: str, uid: str) -> Consumer:
    return HttpConsumer(EndpointSettings("http://127.0.0.1:0",
                                         options={"settle_timeout": 60}))


def _http_output(url: str, address: str) -> tuple[Producer, dict[str, JSON]]:
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


def _nats_source(url: str, uid: str) -> Consumer:
    return NatsConsumer(EndpointSettings(url, options={"subjects": [f"rr.{uid}.ask"]}))


def _nats_output(url: str, address: str) -> tuple[Producer, dict[str, JSON]]:
    return NatsProducer(EndpointSettings(url)), {"subject": address}


NATS_CLIENTS = ReplyClients(
    protocol=NATS, broker="nats_server", requester=nats_requester, serve=nats_service,
    address=lambda uid: f"rr.{uid}.ask",
    request_options=lambda uid: {"subject": {"value": f"rr.{uid}.ask"}},
    service_address=lambda uid: f"svc.{uid}",
    source=_nats_source, output=_nats_output,
    timeout_status=None, late_reaches_gateway=True)


# ---------------------------------------------------------------------- MQTT 5

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


class MqttRequester:
    """An MQTT 5 requester (paho-mqtt): one response topic, each request with its own
    correlation data; answers handed to the waiting request by it."""

    def __init__(self, url: str) -> None:
        self.uid = uuid.uuid4().hex[:12]
        self.response_topic = f"rr-client/{self.uid}/answers"
        self._client = _paho(url, f"req-{self.uid}")
        self._waiting: dict[str, tuple[asyncio.AbstractEventLoop, asyncio.Future[Answer]]] = {}
        self._lock = threading.Lock()
        self._client.on_message = self._on_message

    def _on_message(self, _client: Any, _userdata: Any, msg: Any) -> None:
        data = getattr(msg.properties, "CorrelationData", None)
        correlation = None if data is None else bytes(data).decode("utf-8", "replace")
        with self._lock:
            waiting = self._waiting.pop(correlation or "", None)
        if waiting is not None:
            loop, future = waiting
            answer = Answer(bytes(msg.payload), correlation=correlation)
            loop.call_soon_threadsafe(
                lambda: None if future.done() else future.set_result(answer))

    async def start(self) -> None:
        await _subscribed(self._client, self.response_topic)

    async def ask(self, address: str, body: bytes, timeout: float) -> Answer | None:
        correlation = uuid.uuid4().hex
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Answer] = loop.create_future()
        with self._lock:
            self._waiting[correlation] = (loop, future)
        props = Properties(PacketTypes.PUBLISH)  # type: ignore[no-untyped-call]
        props.ResponseTopic = self.response_topic
        props.CorrelationData = correlation.encode()
        props.ContentType = "application/json"
        self._client.publish(address, body, qos=1, properties=props)
        try:
            return await asyncio.wait_for(future, timeout)
        except TimeoutError:
            return None
        finally:
            with self._lock:
                self._waiting.pop(correlation, None)

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

        def send() -> None:
            client.publish(response_topic, answer, qos=1, properties=props)

        if delay:
            timer = threading.Timer(delay, send)
            timers.append(timer)
            timer.start()
        else:
            send()

    client.on_message = on_message
    try:
        await _subscribed(client, address)
        yield service
    finally:
        for timer in timers:
            timer.cancel()
        client.disconnect()
        client.loop_stop()


def _mqtt5_source(url: str, uid: str) -> Consumer:
    return MqttConsumer(EndpointSettings(url, client_id=f"gw-{uid}",
                                         options={"filters": [f"rr/{uid}/ask"]}))


def _mqtt5_output(url: str, address: str) -> tuple[Producer, dict[str, JSON]]:
    return MqttProducer(EndpointSettings(url)), {"topic_name": address}


MQTT5_CLIENTS = ReplyClients(
    protocol=MQTT5, broker="mosquitto", requester=mqtt5_requester, serve=mqtt5_service,
    address=lambda uid: f"rr/{uid}/ask",
    request_options=lambda uid: {"topic_name": f"rr/{uid}/ask"},
    service_address=lambda uid: f"svc/{uid}",
    source=_mqtt5_source, output=_mqtt5_output,
    timeout_status=None, late_reaches_gateway=True)


# ---------------------------------------------------------------------- lookup

#: The protocols with clients here. AMQP and Kafka add theirs when their request-reply
#: lands (their conventions: reply-to + correlation-id; reply-topic + correlation headers).
CLIENTS: tuple[ReplyClients, ...] = (HTTP_CLIENTS, NATS_CLIENTS, MQTT5_CLIENTS)


def clients_for(protocol: str) -> ReplyClients | None:
    return next((c for c in CLIENTS if c.protocol == protocol), None)


__all__ = ["CLIENTS", "ECHO", "LATE", "SILENT", "Answer", "MqttRequester", "ReplyClients",
           "Service", "clients_for", "echo_of", "request_body"]
