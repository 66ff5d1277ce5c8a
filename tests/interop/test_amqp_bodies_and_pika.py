"""AMQP 1.0 messages of every body kind, sent with python-qpid-proton directly (not the
gateway's adapter): a data section, amqp-value (text, map, number, richer AMQP types,
null) and amqp-sequence; and the RabbitMQ queue fed by an AMQP 0-9-1 publisher (pika),
which is what most RabbitMQ users have. Each is converted, or dead-lettered with a
reason; the route goes on."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pika
import pytest
from interop_gateway import RunningGateway, ce_data, interop_gateway, reason
from proton import Link, Message, Terminus, symbol, timestamp
from proton.reactor import LinkOption
from proton.utils import BlockingConnection

from harness.brokers import NatsServer, RabbitMQ

RUN = uuid.uuid4().hex[:8]
QUEUE = f"interop-{RUN}"


class DurableQueue(LinkOption):
    """What a publisher to a `/queue/<name>` address must ask for once the queue is
    durable (RabbitMQ 3.x refuses a link whose durability differs from the queue's)."""

    def apply(self, link: Link) -> None:
        link.target.durability = Terminus.CONFIGURATION


@pytest.fixture(scope="module")
def gateway(rabbitmq: RabbitMQ, nats_server: NatsServer,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningGateway]:
    with interop_gateway(
            tmp_path_factory.mktemp("interop-amqp"), nats_server.url,
            routes=[{"from": "interop-amqp-in", "to": ["interop-nats-out"]}],
            endpoints={"interop-amqp-in": {"uri": rabbitmq.login_url,
                                           "options": {"node": f"/queue/{QUEUE}"}}},
    ) as running:
        yield running


def proton_send(rabbitmq: RabbitMQ, *messages: Message) -> None:
    conn = BlockingConnection(rabbitmq.login_url, timeout=30, allowed_mechs="PLAIN")
    try:
        sender = conn.create_sender(f"/queue/{QUEUE}", options=DurableQueue())
        for message in messages:
            sender.send(message)  # blocks until RabbitMQ accepted it
    finally:
        conn.close()


def _message(device: str, body: Any, *, inferred: bool = False,
             content_type: str | None = None) -> Message:
    msg = Message(body=body, inferred=inferred, durable=True,
                  properties={"run": RUN, "device": device})
    if content_type:
        msg.content_type = content_type
    return msg


# (device, body, inferred, content type, the event's data as the NATS binary-mode body)
PROTON_CASES: list[tuple[str, Any, bool, str | None, Any]] = [
    ("data-json", b'{"t": 21.5}', True, "application/json", {"t": 21.5}),
    ("data-json-untyped", b'{"t": 22}', True, None, {"t": 22}),
    ("data-binary", bytes(range(256)), True, "application/octet-stream", bytes(range(256))),
    ("value-text", "21.5 degrees", False, "text/plain", b"21.5 degrees"),
    ("value-map", {"t": 23, "unit": "C"}, False, None, {"t": 23, "unit": "C"}),
    ("value-number", 42, False, None, 42),
    ("value-binary", b"\x00\x01raw", False, None, b"\x00\x01raw"),
    ("value-rich", {"at": timestamp(1_700_000_000_000), "id": uuid.UUID(int=7),
                    "kind": symbol("reading"), "raw": b"\x01\x02"}, False, None,
     {"at": "2023-11-14T22:13:20.000Z", "id": "00000000-0000-0000-0000-000000000007",
      "kind": "reading", "raw": "AQI="}),
    ("sequence", [1, 2, 3], True, None, [1, 2, 3]),
    ("value-null", None, False, None, b""),
]


@pytest.mark.parametrize(("device", "body", "inferred", "content_type", "expected"),
                         PROTON_CASES, ids=[c[0] for c in PROTON_CASES])
def test_proton_bodies(rabbitmq: RabbitMQ, gateway: RunningGateway, device: str, body: Any,
                       inferred: bool, content_type: str | None, expected: Any) -> None:
    proton_send(rabbitmq, _message(device, body, inferred=inferred,
                                   content_type=content_type))
    kind, msg = gateway.outcome(device, lambda m: False)
    assert kind == "event"
    assert msg.headers["ce-type"] == "com.example.interop.amqp"
    assert (msg.data if isinstance(expected, bytes) else ce_data(msg)) == expected


def test_application_properties_that_are_not_strings(rabbitmq: RabbitMQ,
                                                    gateway: RunningGateway) -> None:
    """AMQP application properties are typed: a number where the definition has a
    placeholder is captured as its text."""
    marker = f"typed-{RUN}".encode()
    msg = Message(body=marker, inferred=True, durable=True,
                  properties={"run": RUN, "device": 7, "extra": uuid.UUID(int=1)})
    proton_send(rabbitmq, msg)
    kind, out = gateway.outcome("7", lambda m: m.data == marker)
    assert kind == "event" and out.data == marker


def test_a_proton_message_without_the_properties_is_dead_lettered(
        rabbitmq: RabbitMQ, gateway: RunningGateway) -> None:
    marker = f"no-properties-{RUN}".encode()
    msg = Message(body=marker, inferred=True, durable=True)
    proton_send(rabbitmq, msg)
    kind, dead = gateway.outcome("never", lambda m: m.data == marker)
    assert kind == "dead" and reason(dead) == "unmatched"


def _pika(rabbitmq: RabbitMQ) -> pika.BlockingConnection:
    return pika.BlockingConnection(pika.ConnectionParameters(
        host=rabbitmq.host, port=rabbitmq.port,
        credentials=pika.PlainCredentials(rabbitmq.user, rabbitmq.password)))


def pika_publish(rabbitmq: RabbitMQ, routing_key: str, body: bytes, headers: dict[str, Any],
                 content_type: str | None = None) -> None:
    """As a RabbitMQ application publishes: the queue declared durable (it is, already:
    the gateway declared it) and bound to a topic exchange, a persistent message through
    the exchange, publisher confirms. RabbitMQ 3.x gives an AMQP 1.0 consumer the routing
    key as `properties.subject` and drops the 0-9-1 headers (4.x maps them to
    application properties), so the definitions match the routing key."""
    connection = _pika(rabbitmq)
    try:
        channel = connection.channel()
        channel.confirm_delivery()
        channel.queue_declare(QUEUE, durable=True)
        channel.queue_bind(QUEUE, "amq.topic", routing_key=f"interop.{RUN}.#")
        channel.basic_publish(
            exchange="amq.topic", routing_key=routing_key, body=body, mandatory=True,
            properties=pika.BasicProperties(content_type=content_type, delivery_mode=2,
                                            headers=headers,
                                            message_id=f"pika-{uuid.uuid4().hex[:8]}"))
    finally:
        connection.close()


# (device, body, content type, extra headers, the event's data)
PIKA_CASES: list[tuple[str, bytes, str | None, dict[str, Any], Any]] = [
    ("pika-json", b'{"t": 19}', "application/json", {}, {"t": 19}),
    ("pika-json-untyped", b'{"t": 20}', None, {}, {"t": 20}),
    ("pika-text", b"hello", "text/plain", {}, b"hello"),
    ("pika-binary", bytes(range(255, -1, -1)), None, {}, bytes(range(255, -1, -1))),
    ("pika-rich-headers", b'{"t": 18}', "application/json",
     {"count": 3, "ok": True, "nested": {"a": 1}, "list": [1, "x"]},
     {"t": 18}),
]


@pytest.mark.parametrize(("device", "body", "content_type", "extra", "expected"),
                         PIKA_CASES, ids=[c[0] for c in PIKA_CASES])
def test_pika_publisher(rabbitmq: RabbitMQ, gateway: RunningGateway, device: str,
                        body: bytes, content_type: str | None, extra: dict[str, Any],
                        expected: Any) -> None:
    pika_publish(rabbitmq, f"interop.{RUN}.{device}", body, {"device": device, **extra},
                 content_type)
    kind, msg = gateway.outcome(device, lambda m: False)
    assert kind == "event"
    assert (msg.data if isinstance(expected, bytes) else ce_data(msg)) == expected


def test_a_pika_message_with_an_unknown_routing_key_is_dead_lettered(
        rabbitmq: RabbitMQ, gateway: RunningGateway) -> None:
    marker = json.dumps({"marker": f"pika-unknown-key-{RUN}"}).encode()
    pika_publish(rabbitmq, f"interop.{RUN}", marker, {}, "application/json")  # no device
    kind, dead = gateway.outcome("never", lambda m: m.data == marker)
    assert kind == "dead" and reason(dead) == "unmatched"


def test_the_route_goes_on_after_every_case(rabbitmq: RabbitMQ, gateway: RunningGateway) -> None:
    proton_send(rabbitmq, _message("after", b'{"after": true}', inferred=True))
    kind, _ = gateway.outcome("after", lambda m: False)
    assert kind == "event"
