"""Proof with producers and consumers nobody here wrote (issue 28): Debian's
mosquitto_pub/mosquitto_sub, python-qpid-proton used directly, pika (AMQP 0-9-1), curl,
librdkafka. Every test here talks to real brokers started by the harness (the broker
fixtures are in tests/conftest.py), so it is marked ``integration`` and ``interop``:
``pytest -m interop`` runs these alone."""

from __future__ import annotations

from pathlib import Path

import pytest

_HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _HERE in item.path.parents:
            item.add_marker(pytest.mark.integration)
            item.add_marker(pytest.mark.interop)
