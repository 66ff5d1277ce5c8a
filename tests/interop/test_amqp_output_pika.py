"""The gateway's AMQP 1.0 output read by an AMQP 0-9-1 consumer (pika), as RabbitMQ
applications read it. RabbitMQ 3.x hands a 0-9-1 consumer the AMQP 1.0 application
properties only as one encoded binary header (`x-amqp-1.0-app-properties`), so a
binary-mode CloudEvent's attributes are out of its reach there: structured mode (the
whole event in the body) is what such consumers can read, and what this checks."""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pika
import pytest
from interop_gateway import RunningGateway, interop_gateway

from harness.brokers import NatsServer, RabbitMQ, free_port

RUN = uuid.uuid4().hex[:8]
QUEUE = f"interop-out-{RUN}"


@pytest.fixture(scope="module")
def base(rabbitmq: RabbitMQ, nats_server: NatsServer,
         tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, RunningGateway]]:
    port = free_port()
    with interop_gateway(
            tmp_path_factory.mktemp("interop-amqp-out"), nats_server.url,
            routes=[{"from": "interop-http-in", "to": ["interop-amqp-out"],
                     "mode": "structured"}],
            endpoints={"interop-http-in": {"uri": f"http://127.0.0.1:{port}"},
                       "interop-amqp-out": {"uri": rabbitmq.login_url,
                                            "options": {"node": f"/queue/{QUEUE}"}}},
    ) as running:
        yield f"http://127.0.0.1:{port}/interop/{RUN}", running


def _get(rabbitmq: RabbitMQ, timeout: float = 60) -> tuple[Any, bytes]:
    connection = pika.BlockingConnection(pika.ConnectionParameters(
        host=rabbitmq.host, port=rabbitmq.port,
        credentials=pika.PlainCredentials(rabbitmq.user, rabbitmq.password)))
    try:
        channel = connection.channel()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                method, properties, body = channel.basic_get(QUEUE, auto_ack=True)
            except pika.exceptions.ChannelClosedByBroker:  # not declared yet
                channel = connection.channel()
                method = None
            if method is not None:
                return properties, body
            time.sleep(0.1)
        raise AssertionError(f"nothing in {QUEUE} after {timeout:.0f}s")
    finally:
        connection.close()


def test_a_pika_consumer_reads_the_structured_cloudevent(rabbitmq: RabbitMQ,
                                                         base: tuple[str, RunningGateway]
                                                         ) -> None:
    url, _ = base
    done = subprocess.run(["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}",
                           "-H", "Content-Type: application/json",
                           "--data-binary", '{"t": 30}', f"{url}/to-pika"],
                          capture_output=True, text=True, timeout=90)
    assert done.stdout.startswith("2"), (done.stdout, done.stderr)
    properties, body = _get(rabbitmq)
    assert properties.content_type.startswith("application/cloudevents+json")
    assert properties.delivery_mode == 2  # persistent: it outlives a broker restart
    event = json.loads(body)
    assert event["type"] == "com.example.interop.http"
    assert event["subject"] == "to-pika" and event["data"] == {"t": 30}
