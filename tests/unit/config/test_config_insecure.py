"""Insecure settings are loud (issue 29): `tls.insecure` and credentials on a connection
without TLS are configuration warnings (`xrgw validate` prints them, `xrgw run` logs them
once at start); loopback is exempt. AMQP's SASL PLAIN follows the TLS state: in clear
text only to loopback or with `allow_plain_without_tls: true`."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.amqp import AmqpOptions
from gateway.cli import main
from gateway.config import load_config_text
from gateway.daemon import run
from gateway.ports import EndpointSettings
from gateway.spec.problems import Problem

ROOT = Path(__file__).resolve().parents[3]
STORE = ROOT / "config/examples/store.xreg.json"
PASSWORD = "hunter2-clear"


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """`run` and `configure` replace the root logger's handlers: put them back."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def _config(endpoints: str) -> str:
    return (f'definitions: ["{STORE}"]\nroutes:\n  - from: store-mqtt\n'
            f"    to: [events-nats]\ndeadletter: log\nendpoints:\n{endpoints}")


def _warnings(tmp_path: Path, endpoints: str) -> list[Problem]:
    config, problems = load_config_text(_config(endpoints), "gw.yaml", tmp_path, environ={})
    assert config is not None, [str(p) for p in problems]
    return [p for p in problems if not p.is_error and "endpoint '" in p.message]


def test_tls_insecure_is_a_warning(tmp_path: Path) -> None:
    found = _warnings(tmp_path, "  store-mqtt:\n    uri: mqtts://broker.example:8883\n"
                                "    tls: {insecure: true}\n")
    assert [p.path for p in found] == ['$.endpoints["store-mqtt"].tls.insecure']
    assert "verification is off" in found[0].message


@pytest.mark.parametrize("endpoint", [
    "  store-mqtt:\n    uri: mqtt://broker.example:1883\n    username: u\n"
    f"    password: {PASSWORD}\n",
    f"  store-mqtt:\n    uri: mqtt://u:{PASSWORD}@broker.example:1883\n",
    f"  events-nats:\n    uri: nats://{PASSWORD}@nats.example:4222\n",
])
def test_credentials_in_clear_text_are_a_warning(tmp_path: Path, endpoint: str) -> None:
    (found,) = _warnings(tmp_path, endpoint)
    assert "without TLS" in found.message and PASSWORD not in str(found)


@pytest.mark.parametrize("endpoint", [
    "  store-mqtt:\n    uri: mqtts://broker.example:8883\n    username: u\n"
    f"    password: {PASSWORD}\n",
    "  store-mqtt:\n    uri: mqtt://broker.example:1883\n    tls: {}\n    username: u\n"
    f"    password: {PASSWORD}\n",
    f"  store-mqtt:\n    uri: mqtt://u:{PASSWORD}@127.0.0.1:1883\n",  # loopback
    "  store-mqtt:\n    uri: mqtt://broker.example:1883\n",  # no credentials
])
def test_tls_or_loopback_or_no_credentials_is_quiet(tmp_path: Path, endpoint: str) -> None:
    assert _warnings(tmp_path, endpoint) == []


def test_validate_prints_and_run_logs_the_warning_once(
        tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "gw.yaml"
    path.write_text(_config("  store-mqtt:\n    uri: mqtts://broker.example:8883\n"
                            "    tls: {insecure: true}\n"))
    assert main(["validate", "-c", str(path)]) == 0
    assert "verification is off" in capfd.readouterr().out
    assert main(["validate", "--strict", "-c", str(path)]) != 0  # --strict refuses it
    capfd.readouterr()
    # `run` logs configuration warnings before it starts (a port taken stops it after).
    blocker = tmp_path / "admin.yaml"
    blocker.write_text(path.read_text() + "admin: {listen: '256.0.0.1:1'}\n")
    assert run(str(blocker)) != 0
    logged = capfd.readouterr().out  # logs go to stdout, as containers expect
    assert logged.count("verification is off") == 1 and '"level": "warning"' in logged


def test_amqp_plain_follows_the_tls_state() -> None:
    clear = EndpointSettings("amqp://broker.example:5672", username="u", password="p")
    with pytest.raises(ValueError, match="clear text"):
        AmqpOptions.parse(clear)
    allowed = AmqpOptions.parse(EndpointSettings(
        "amqp://broker.example:5672", username="u", password="p",
        options={"allow_plain_without_tls": True}))
    assert allowed.connect_kwargs()["allow_insecure_mechs"] is True
    loopback = AmqpOptions.parse(EndpointSettings("amqp://127.0.0.1:5672", username="u",
                                                  password="p"))
    assert loopback.connect_kwargs()["allow_insecure_mechs"] is True
    secure = AmqpOptions.parse(EndpointSettings("amqps://broker.example:5671", username="u",
                                                password="p"))
    assert secure.plain_in_clear is False
    anonymous = AmqpOptions.parse(EndpointSettings("amqp://broker.example:5672"))
    assert anonymous.connect_kwargs()["allowed_mechs"] == "ANONYMOUS"
