"""Every test collected under ``tests/integration`` is marked ``integration``, so
``pytest -m "not integration"`` runs the unit tests alone. The broker fixtures
(``mosquitto``, ``nats_server``, ``rabbitmq``, ``tansu``) are in ``tests/conftest.py``,
shared with ``tests/interop``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

_HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark everything in this directory as an integration test."""
    for item in items:
        if _HERE in item.path.parents:
            item.add_marker(pytest.mark.integration)
