"""`validate --connect` reaches every server an endpoint names, at the port it would."""

from __future__ import annotations

from adapters._preflight import addresses
from gateway.config import EndpointConfig, for_adapter
from gateway.ports import AdapterEndpoint
from gateway.protocols import HTTP, KAFKA, MQTT5, profile


def _endpoint(protocol: str, *uris: str) -> AdapterEndpoint:
    return for_adapter(EndpointConfig("e", protocol, ("producer",), uris))


def test_every_bootstrap_server_and_the_default_ports() -> None:
    assert addresses(profile(KAFKA), _endpoint(KAFKA, "kafka://a:9093,b")) == [
        ("kafka", "a", 9093), ("kafka", "b", 9092)]
    assert addresses(profile(MQTT5), _endpoint(MQTT5, "mqtts://broker")) == [
        ("mqtts", "broker", 8883)]
    assert addresses(profile(HTTP), _endpoint(HTTP, "https://hooks.example/in")) == [
        ("https", "hooks.example", 443)]


def test_an_ephemeral_listener_port_stays_zero() -> None:
    assert addresses(profile(HTTP), _endpoint(HTTP, "http://127.0.0.1:0")) == [
        ("http", "127.0.0.1", 0)]
