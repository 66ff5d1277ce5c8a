"""config/examples: one example deployment per protocol, each a route whose consumer is
that protocol, with its xRegistry documents and definition test cases next to it. Each
config must load with no problem at all, and its test cases must pass."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from gateway.commands.testcases import run_case_file
from gateway.config import load_config

EXAMPLES = Path(__file__).resolve().parents[2] / "config" / "examples"
BY_PROTOCOL = {
    "MQTT/5.0": "mqtt-telemetry",
    "AMQP/1.0": "amqp-orders",
    "KAFKA": "kafka-payments",
    "NATS": "nats-sensors",
    "HTTP": "http-webhooks",
}


@pytest.fixture
def secrets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The examples read passwords from files (`password_file`), as in Kubernetes."""
    for name in ("MQTT", "AMQP"):
        path = tmp_path / f"{name.lower()}-password"
        path.write_text("s3cret\n")
        monkeypatch.setenv(f"XRGW_{name}_PASSWORD_FILE", str(path))


@pytest.mark.parametrize("protocol", sorted(BY_PROTOCOL))
def test_example_config_loads_cleanly(protocol: str, secrets: None) -> None:
    name = BY_PROTOCOL[protocol]
    config, problems = load_config(EXAMPLES / f"{name}.yaml")
    assert config is not None, [str(p) for p in problems]
    assert [str(p) for p in problems] == []  # not even a warning
    (route,) = config.routes
    consumer = config.endpoints[route.source]
    assert consumer.protocol == protocol
    assert route.messages, "the route matches at least one definition"
    assert config.deadletter is not None, "examples dead-letter to a real destination"


def test_example_password_files_are_read(secrets: None) -> None:
    config, _ = load_config(EXAMPLES / "amqp-orders.yaml")
    assert config is not None
    password = config.endpoints["orders-amqp"].password
    assert password is not None and password.reveal() == "s3cret"


@pytest.mark.parametrize("protocol", sorted(BY_PROTOCOL))
def test_example_definition_cases_pass(protocol: str) -> None:
    out = io.StringIO()
    passed, failed = run_case_file(EXAMPLES / f"{BY_PROTOCOL[protocol]}.tests.yaml", out)
    assert failed == 0, out.getvalue()
    assert passed >= 3


def test_every_example_has_config_documents_and_cases() -> None:
    for name in BY_PROTOCOL.values():
        for suffix in (".yaml", ".xreg.json", ".tests.yaml"):
            assert (EXAMPLES / f"{name}{suffix}").is_file()
