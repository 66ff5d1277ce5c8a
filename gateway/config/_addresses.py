"""Endpoint addresses: which URI schemes fit which protocol, and reading the addresses of
an override `uri` or of a definition's `protocoloptions.endpoints`.

The scheme table is strict on purpose (no `tcp://` for MQTT, no bare `host:port` for
Kafka): the scheme is how the gateway picks TLS or plain, and a guess there either fails
late at connect time or, worse, sends credentials in clear text.
"""

from __future__ import annotations

import urllib.parse

from gateway.config._secret import redact_uri
from gateway.definitions.model import Endpoint
from gateway.protocols import AMQP, HTTP, KAFKA, MQTT5, MQTT311, NATS

SCHEMES: dict[str, tuple[str, ...]] = {
    MQTT5: ("mqtt", "mqtts"),
    MQTT311: ("mqtt", "mqtts"),
    AMQP: ("amqp", "amqps"),
    NATS: ("nats", "tls"),
    KAFKA: ("kafka",),
    HTTP: ("http", "https"),
}
_EXAMPLES = {
    MQTT5: "mqtt://host:1883", MQTT311: "mqtt://host:1883", AMQP: "amqp://host:5672",
    NATS: "nats://host:4222", KAFKA: "kafka://host1:9092,host2:9092",
    HTTP: "https://host/path",
}
Issue = tuple[str, str]


def check_uri(uri: str, protocol: str | None) -> Issue | None:
    """(what is wrong, fix) when `uri` cannot address an endpoint of `protocol`."""
    shown = redact_uri(uri)
    scheme = uri.partition("://")[0].lower() if "://" in uri else ""
    allowed = SCHEMES.get(protocol or "")
    if allowed is None:
        return None  # an unknown protocol is reported by the definitions validator
    example = _EXAMPLES[protocol or ""]
    if scheme not in allowed:
        return (f"'{shown}' does not fit protocol {protocol}: the scheme must be "
                f"{' or '.join(s + '://' for s in allowed)}", f"write e.g. uri: {example}")
    if protocol == KAFKA:
        return None if kafka_servers(uri) else (
            f"'{shown}' is not kafka://HOST:PORT[,HOST:PORT]", f"write e.g. uri: {example}")
    try:
        parts = urllib.parse.urlsplit(uri)
        # Port 0 asks for an ephemeral port: meaningful for a listener (HTTP ingress).
        port_ok = parts.port is None or parts.port > 0 or (protocol == HTTP and parts.port == 0)
    except ValueError:
        port_ok = False
        parts = urllib.parse.SplitResult("", "", "", "", "")
    if not parts.hostname or not port_ok:
        return (f"'{shown}' has no valid host and port", f"write e.g. uri: {example}")
    return None


def kafka_servers(uri: str) -> tuple[str, ...]:
    """`kafka://h1:9092,h2:9092` -> ("h1:9092", "h2:9092"); () when malformed."""
    scheme, sep, rest = uri.partition("://")
    if not sep or scheme.lower() != "kafka" or not rest:
        return ()
    servers = tuple(s.strip() for s in rest.rstrip("/").split(","))
    for server in servers:
        host, colon, port = server.rpartition(":")
        if not colon or not host or not port.isdigit() or not 0 < int(port) <= 65535:
            return ()
    return servers


def definition_addresses(endpoint: Endpoint) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(URIs, preferred Kafka bootstrap servers) from `protocoloptions.endpoints`."""
    raw = endpoint.protocol_options.get("endpoints")
    uris: list[str] = []
    bootstrap: tuple[str, ...] = ()
    for item in raw if isinstance(raw, list) else []:
        if not isinstance(item, dict):
            continue
        servers = item.get("bootstrap.servers")
        if isinstance(servers, list) and servers:
            names = tuple(str(s) for s in servers)
            bootstrap = bootstrap or names
            uris.append("kafka://" + ",".join(names))
        elif isinstance(item.get("uri"), str):
            uri = str(item["uri"])
            uris.append(uri)
            if endpoint.protocol == KAFKA and not bootstrap:
                bootstrap = kafka_servers(uri)
    return tuple(uris), bootstrap
