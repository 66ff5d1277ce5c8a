"""The adapters under test and where each one's messages travel: one `Subject` per
adapter and mode, the environment the conformance cases run in (the Benthos
`stream_test_definitions` idea: one suite, a table of environments).

A subject knows only how to give a case a fresh *lane*: a consumer endpoint and a
producer endpoint (`gateway.config.EndpointConfig`, as the configuration would give them)
that meet on a new topic / queue / subject / path of its broker, and the address fields a
record sent there carries. What the adapter can do (redelivery, request-reply, a size
limit, order) the cases read from its protocol profile and from the ports the adapter
implements, never from this table.

Adapters are built by the installed adapter factory (the `xrgw.adapters` entry point,
`gateway.daemon.load_factory`), exactly as `xrgw run` builds them.

`Network` puts the harness's TCP fault proxy between the adapters and their broker
(`harness/faults/proxy.py`): a case resets every connection instead of killing the
broker (Tansu loses everything on a restart). Kafka's metadata sends clients to the
advertised address, so a faulty Kafka lane gets a Tansu of its own that advertises its
proxy (`Subject.own_broker`).
"""

from __future__ import annotations

import contextlib
import socket
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import nats
from nats.js.api import StreamConfig

from gateway.config import EndpointConfig, for_adapter
from gateway.daemon import AdapterFactory, load_factory
from gateway.json.values import JSON
from gateway.ports import Consumer, Producer
from gateway.protocols import AMQP, HTTP, KAFKA, MQTT5, MQTT311, NATS, ProtocolProfile, profile
from harness.brokers import Broker, Tansu, free_port
from harness.faults.proxy import FaultProxy
from harness.faults.readers import create_topics


def uid() -> str:
    return uuid.uuid4().hex[:10]


class Network:
    """The way from the adapters to a port: direct; through one fault proxy per port
    (`faulty`), which `reset()` breaks; or nowhere (`dead`): every port dialled is
    closed and every port to listen on is taken."""

    def __init__(self, faulty: bool = False, dead: bool = False) -> None:
        self.faulty = faulty
        self.dead = dead
        self.proxies: dict[int, FaultProxy] = {}
        self._taken: list[socket.socket] = []

    def port(self, upstream: int) -> int:
        """The port to dial for `upstream` (the same proxy for the same upstream)."""
        if self.dead:
            return free_port()  # nothing listens there
        if not self.faulty:
            return upstream
        proxy = self.proxies.get(upstream)
        if proxy is None:
            proxy = self.proxies[upstream] = FaultProxy(upstream).start()
        return proxy.port

    def listen_port(self) -> int:
        """A port for a consumer that listens (HTTP ingress): free, or (`dead`) taken."""
        if not self.dead:
            return free_port()
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        self._taken.append(sock)
        return int(sock.getsockname()[1])

    def url(self, url: str, upstream: int) -> str:
        """`url` with its port replaced by the one to dial."""
        parts = urlsplit(url)
        host = parts.netloc.rsplit(":", 1)[0]
        return urlunsplit(parts._replace(netloc=f"{host}:{self.port(upstream)}"))

    @property
    def accepted(self) -> int:
        """Connections the proxies accepted so far (a reconnect is a new one)."""
        return sum(proxy.accepted for proxy in self.proxies.values())

    def reset(self) -> int:
        """Reset (RST) every connection through the proxies; how many were open."""
        return sum(proxy.reset() for proxy in self.proxies.values())

    def close(self) -> None:
        for proxy in self.proxies.values():
            proxy.stop()
        self.proxies.clear()
        for sock in self._taken:
            sock.close()
        self._taken.clear()


@dataclass
class Lane:
    """Where one case's messages go: the endpoints of both ends and the address fields
    of a record sent on it."""

    consumer: EndpointConfig
    producer: EndpointConfig
    fields: dict[str, JSON]
    factory: AdapterFactory = field(default_factory=load_factory)

    def open_consumer(self) -> Consumer:
        return self.factory.consumer(for_adapter(self.consumer))

    def open_producer(self) -> Producer:
        return self.factory.producer(for_adapter(self.producer))


#: Makes a lane on a broker (None: the adapter needs none, HTTP), through `network`.
LaneMaker = Callable[[Any, Network, dict[str, JSON]], Awaitable[Lane]]


@dataclass(frozen=True)
class Subject:
    """One adapter (in one mode) and how to give it a lane."""

    id: str
    protocol: str
    #: The session broker fixture (tests/conftest.py); None: no broker (HTTP).
    broker: str | None
    lane: LaneMaker
    #: A faulty lane needs a broker of its own behind the proxy (Kafka: metadata names
    #: the advertised address, which must be the proxy's).
    own_broker: Callable[[Network, Path], contextlib.AbstractContextManager[Any]] | None = None
    #: Writes, straight to the broker, a message the consumer cannot decode between
    #: two good ones (n=0 and n=2); None where the protocol carries any bytes as a body.
    poison: Callable[[Any, Lane], Awaitable[None]] | None = None
    #: The receiver's own size limit where the producer declares none (`SizeLimited`):
    #: HTTP ingress `max_body_bytes`, set by the lane.
    receiver_limit: int | None = None

    @property
    def profile(self) -> ProtocolProfile:
        return profile(self.protocol)

    def __str__(self) -> str:
        return self.id


def _endpoint(role: str, protocol: str, uri: str, options: dict[str, JSON],
              client_id: str | None = None) -> EndpointConfig:
    return EndpointConfig(f"conf-{role}-{uid()}", protocol, (role,), (uri,),  # type: ignore[arg-type]
                          client_id=client_id, options=options)


def _both(protocol: str, uri: str, consumer: dict[str, JSON], producer: dict[str, JSON],
          fields: dict[str, JSON], client_id: str | None = None) -> Lane:
    return Lane(_endpoint("consumer", protocol, uri, consumer, client_id),
                _endpoint("producer", protocol, uri, producer), fields)


# ---------------------------------------------------------------------------- MQTT

#: The producer's packet limit (the broker announces none): a poison case sends a
#: message just over it, not over MQTT's 256 MB.
MQTT_MAX_PACKET = 100_000

def _mqtt(protocol: str) -> LaneMaker:
    async def lane(broker: Broker, network: Network, extra: dict[str, JSON]) -> Lane:
        topic = f"conf/{uid()}"
        uri = network.url(broker.url, broker.port)
        fast: dict[str, JSON] = {"connect_timeout": 3, "keepalive": 5}
        return _both(protocol, uri,
                     {"topic": topic, "qos": 1, **fast, **extra},
                     {"topic": topic, "reconnect_max": 0.5, "publish_timeout": 3,
                      "max_packet_size": MQTT_MAX_PACKET, **fast},
                     {"topic_name": topic, "qos": 1},
                     client_id=f"conf-{uid()}")  # a session of its own that survives
    return lane


# ---------------------------------------------------------------------------- AMQP

async def _amqp(broker: Broker, network: Network, extra: dict[str, JSON]) -> Lane:
    node = f"/queue/conf-{uid()}"
    uri = network.url(broker.url, broker.port)
    fast: dict[str, JSON] = {"connect_timeout": 3, "heartbeat": 5}
    # reply_address: where the producer's requests are answered (request-reply)
    return _both(AMQP, uri, {"node": node, **fast, **extra},
                 {"node": node, "reconnect_max": 0.5, "publish_timeout": 3,
                  "reply_address": f"{node}-replies",
                  **fast}, {})


# ---------------------------------------------------------------------------- Kafka

async def _kafka(broker: Tansu, network: Network, extra: dict[str, JSON]) -> Lane:
    topic = f"conf-{uid()}"
    await create_topics(broker, topic, f"{topic}-replies")
    uri = f"kafka://127.0.0.1:{network.port(broker.port)}"
    # Tansu holds the first JoinGroup answer for session_timeout/2.
    group: dict[str, JSON] = {"session_timeout_ms": 3000, "heartbeat_interval_ms": 500}
    return _both(KAFKA, uri, {"topic": topic, "connect_timeout": 5, **group, **extra},
                 {"topic": topic, "connect_timeout": 3, "publish_timeout": 3,
                  "reconnect_max": 0.5, "reply_topic": f"{topic}-replies"},
                 {"topic": topic, "key": "k"})


@contextlib.contextmanager
def _tansu_behind(network: Network, tmp: Path) -> Iterator[Tansu]:
    """A Tansu of this case alone, listening behind the network's proxy and advertising
    it: every Kafka client goes through the proxy after bootstrap too."""
    port = free_port()
    proxied = network.port(port)
    with Tansu(port=port, data_dir=tmp / "tansu", advertised_port=proxied) as broker:
        yield broker


async def _kafka_poison(broker: Tansu, lane: Lane) -> None:
    """n=0, a record batch whose CRC does not match (a byte flipped after it was built,
    as a broken disk or a buggy client leaves it), n=2: the consumer hands the batch over
    as `undecodable` and the good records around it as usual."""
    from aiokafka import AIOKafkaProducer  # type: ignore[import-untyped]

    topic = str(lane.fields["topic"])
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers)
    await producer.start()
    try:
        await producer.send_and_wait(topic, b'{"n": 0}', key=b"k")
        batch = producer.create_batch()
        batch.append(key=b"k", value=b'{"n": 1}', timestamp=None, headers=[])
        raw = batch._build()  # what send_batch sends (guarded: test_library_privates)
        raw[-1] ^= 0xFF
        await (await producer.send_batch(batch, topic, partition=0))
        await producer.send_and_wait(topic, b'{"n": 2}', key=b"k")
    finally:
        await producer.stop()


# ---------------------------------------------------------------------------- NATS

async def _nats_core(broker: Broker, network: Network, extra: dict[str, JSON]) -> Lane:
    subject = f"conf.{uid()}"
    uri = network.url(broker.url, broker.port)
    fast: dict[str, JSON] = {"connect_timeout": 3, "reconnect_wait": 0.2}
    return _both(NATS, uri, {"subject": subject, **fast, **extra},
                 {"subject": subject, "publish_timeout": 3, "reconnect_max": 0.5, **fast},
                 {"subject": subject})


async def _nats_jetstream(broker: Broker, network: Network, extra: dict[str, JSON]) -> Lane:
    stream = f"CONF_{uid()}"
    subject = f"{stream.lower()}.x"
    nc = await nats.connect(broker.url)
    try:
        await nc.jetstream().add_stream(StreamConfig(name=stream, subjects=[subject]))
    finally:
        await nc.close()
    uri = network.url(broker.url, broker.port)
    fast: dict[str, JSON] = {"connect_timeout": 3, "reconnect_wait": 0.2}
    return _both(NATS, uri,
                 {"stream": stream, "durable": "conf", "subjectfilter": [subject], **fast,
                  **extra},
                 {"subject": subject, "jetstream": True, "publish_timeout": 3,
                  "reconnect_max": 0.5, **fast},
                 {"subject": subject})


# ---------------------------------------------------------------------------- HTTP

HTTP_MAX_BODY = 64 * 1024


async def _http(broker: None, network: Network, extra: dict[str, JSON]) -> Lane:
    """The ingress listens on a port of its own; the egress sends to it (through the
    network: a faulty lane resets the egress's kept-alive connections)."""
    port = network.listen_port()
    path = f"/conf/{uid()}"
    return Lane(
        _endpoint("consumer", HTTP, f"http://127.0.0.1:{port}",
                  {"max_body_bytes": HTTP_MAX_BODY, "settle_timeout": 20, "retry_after": 1,
                   **extra}),
        _endpoint("producer", HTTP, f"http://127.0.0.1:{network.port(port)}",
                  {"timeout": 10}),
        {"path": path, "method": "POST"})


SUBJECTS: tuple[Subject, ...] = (
    Subject("mqtt5", MQTT5, "mosquitto", _mqtt(MQTT5)),
    Subject("mqtt311", MQTT311, "mosquitto", _mqtt(MQTT311)),
    Subject("amqp", AMQP, "rabbitmq", _amqp),
    Subject("kafka", KAFKA, "tansu", _kafka, own_broker=_tansu_behind, poison=_kafka_poison),
    Subject("nats-core", NATS, "nats_server", _nats_core),
    Subject("nats-jetstream", NATS, "nats_server", _nats_jetstream),
    Subject("http", HTTP, None, _http, receiver_limit=HTTP_MAX_BODY),
)


@contextlib.asynccontextmanager
async def closing(*adapters: Consumer | Producer) -> AsyncIterator[None]:
    """Close the adapters however the case ends."""
    try:
        yield
    finally:
        for adapter in adapters:
            with contextlib.suppress(Exception):
                await adapter.aclose()
