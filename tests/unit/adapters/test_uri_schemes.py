"""One URI scheme list per protocol (`ProtocolProfile.endpoint.uris`): the config check
(`gateway/config/_addresses.check_uri`) and each adapter accept exactly the same schemes,
a TLS scheme of the profile makes the adapter connect with TLS, and a scheme the spec
names but no adapter implements is refused saying why.

Before the profiles, `config/_addresses.py` refused MQTT `tcp://`/`ssl://` that the MQTT
adapter took, and the adapters took scheme-less addresses the config refused.
"""

from __future__ import annotations

import pytest

from adapters.amqp import AmqpOptions
from adapters.http import HttpOptions
from adapters.mqtt import MqttOptions
from adapters.nats import NatsOptions
from adapters.registry import ADAPTERS
from gateway.config._addresses import check_uri
from gateway.ports import EndpointSettings
from gateway.protocols import AMQP, HTTP, KAFKA, MQTT5, MQTT311, NATS, PROFILES, profile

# Every scheme any profile accepts or names, in both cases, and some no one does.
CANDIDATES = sorted(
    {s for p in PROFILES for s in (*p.endpoint.uris.schemes, *p.endpoint.uris.unsupported)}
    | {"MQTTS", "SSL", "Kafka", "foo", "amqp+ws", ""})


def _uri(scheme: str) -> str:
    return f"{scheme}://h:1234" if scheme else "//h:1234"  # no scheme at all


def _adapter_accepts(protocol: str, uri: str) -> bool:
    """Whether the protocol's adapter takes `uri` (building a producer parses it)."""
    try:
        ADAPTERS[profile(protocol).family].producer(EndpointSettings(uri))
    except ValueError as exc:
        assert "unsupported scheme" in str(exc), exc  # refused for its scheme, nothing else
        return False
    return True


@pytest.mark.parametrize("protocol", [p.name for p in PROFILES])
def test_config_check_and_adapter_accept_the_same_schemes(protocol: str) -> None:
    by_config = {s for s in CANDIDATES if check_uri(_uri(s), protocol) is None}
    by_adapter = {s for s in CANDIDATES if _adapter_accepts(protocol, _uri(s))}
    assert by_config == by_adapter
    assert {s.lower() for s in by_config} == set(profile(protocol).endpoint.uris.schemes)


@pytest.mark.parametrize(("protocol", "accepted"), [
    (MQTT5, {"mqtt", "mqtts", "tcp", "ssl"}),
    (MQTT311, {"mqtt", "mqtts", "tcp", "ssl"}),
    (AMQP, {"amqp", "amqps"}),
    (KAFKA, {"kafka"}),
    (NATS, {"nats", "tls"}),
    (HTTP, {"http", "https"}),
])
def test_the_schemes_per_protocol(protocol: str, accepted: set[str]) -> None:
    assert set(profile(protocol).endpoint.uris.schemes) == accepted


@pytest.mark.parametrize(("protocol", "scheme", "why"), [
    (MQTT5, "wss", "MQTT over websockets is not implemented"),
    (MQTT311, "ws", "MQTT over websockets is not implemented"),
    (NATS, "ws", "NATS over websockets is not implemented"),
    (KAFKA, "SSL", "a Kafka listener name, not an address scheme"),
    (KAFKA, "PLAINTEXT", "a Kafka listener name, not an address scheme"),
])
def test_schemes_the_spec_names_but_no_adapter_implements_say_why(
        protocol: str, scheme: str, why: str) -> None:
    issue = check_uri(f"{scheme}://h:1234", protocol)
    assert issue is not None and why in issue[0], issue
    with pytest.raises(ValueError, match=why):
        ADAPTERS[profile(protocol).family].producer(EndpointSettings(f"{scheme}://h:1234"))


def test_a_refused_uri_never_shows_its_password() -> None:
    issue = check_uri("wss://u:uri-secret@h:1", MQTT5)
    assert issue is not None and "uri-secret" not in " ".join(issue)


@pytest.mark.parametrize(("uri", "tls"), [
    ("mqtt://h:1", False), ("tcp://h:1", False), ("mqtts://h:1", True), ("ssl://h:1", True),
])
def test_mqtt_tls_follows_the_profile(uri: str, tls: bool) -> None:
    assert (MqttOptions.parse(EndpointSettings(uri)).tls is not None) is tls
    assert profile(MQTT5).endpoint.uris.is_tls(uri.partition(":")[0]) is tls


@pytest.mark.parametrize(("uri", "tls"), [("nats://h:1", False), ("tls://h:1", True)])
def test_nats_tls_follows_the_profile(uri: str, tls: bool) -> None:
    assert (NatsOptions.parse(EndpointSettings(uri)).tls is not None) is tls


def test_nats_refuses_mixed_plain_and_tls_servers() -> None:
    with pytest.raises(ValueError, match="mixes tls:// and nats://"):
        NatsOptions.parse(EndpointSettings("tls://a:1,nats://b:2"))


@pytest.mark.parametrize(("uri", "tls"), [("amqp://h:1", False), ("amqps://h:1", True)])
def test_amqp_tls_follows_the_profile(uri: str, tls: bool) -> None:
    assert (AmqpOptions.parse(EndpointSettings(uri)).tls is not None) is tls


@pytest.mark.parametrize(("uri", "scheme"), [("http://h:1", "http"), ("https://h:1", "https")])
def test_http_tls_follows_the_profile(uri: str, scheme: str) -> None:
    assert HttpOptions.parse(EndpointSettings(uri)).scheme == scheme
