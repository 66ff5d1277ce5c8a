"""Endpoint addresses: which URI schemes fit which protocol, and reading the addresses of
an override `uri` or of a definition's `protocoloptions.endpoints`.

The schemes are the protocol profile's (`ProtocolProfile.endpoint.uris`), the same table
the adapters read, so an address this check accepts is one the adapter connects with.
The table is strict on purpose (no bare `host:port`, no Kafka listener names as schemes):
the scheme is how the gateway picks TLS or plain, and a guess there either fails late at
connect time or, worse, sends credentials in clear text.
"""

from __future__ import annotations

import urllib.parse

from gateway.definitions.model import Endpoint
from gateway.protocols import PROFILES, find_profile
from gateway.spec.secret import redact_uri

Issue = tuple[str, str]


def check_uri(uri: str, protocol: str | None) -> Issue | None:
    """(what is wrong, fix) when `uri` cannot address an endpoint of `protocol`."""
    shown = redact_uri(uri)
    scheme = uri.partition("://")[0].lower() if "://" in uri else ""
    prof = find_profile(protocol)
    if prof is None:
        return None  # an unknown protocol is reported by the definitions validator
    uris = prof.endpoint.uris
    fix = f"write e.g. uri: {uris.example}"
    problem = uris.problem(scheme)
    if problem is not None:
        return f"'{shown}' does not fit protocol {protocol}: {problem}", fix
    if uris.server_list:
        return None if server_list(uri, prof.name) else (
            f"'{shown}' is not {scheme}://HOST:PORT[,HOST:PORT]", fix)
    try:
        parts = urllib.parse.urlsplit(uri)
        # Port 0 asks for an ephemeral port: meaningful for a listener (HTTP ingress).
        port_ok = parts.port is None or parts.port > 0 or (uris.listens and parts.port == 0)
    except ValueError:
        port_ok = False
        parts = urllib.parse.SplitResult("", "", "", "", "")
    if not parts.hostname or not port_ok:
        return (f"'{shown}' has no valid host and port", fix)
    return None


def accepted_forms() -> str:
    """Every accepted scheme once, for the docs: `mqtt://, mqtts://, ..., kafka://HOST:PORT
    [,HOST:PORT], ...` (MQTT 3.1.1 and 5.0 share theirs)."""
    forms: dict[str, None] = {}
    for prof in PROFILES:
        uris = prof.endpoint.uris
        tail = "HOST:PORT[,HOST:PORT]" if uris.server_list else ""
        forms.update((f"{scheme}://{tail}", None) for scheme in uris.schemes)
    return ", ".join(forms)


def server_list(uri: str, protocol: str | None) -> tuple[str, ...]:
    """The servers of a protocol whose URI lists them (`kafka://h1:9092,h2:9092` ->
    ("h1:9092", "h2:9092")); () for other protocols and when malformed."""
    prof = find_profile(protocol)
    if prof is None or not prof.endpoint.uris.server_list:
        return ()
    scheme, sep, rest = uri.partition("://")
    if not sep or prof.endpoint.uris.problem(scheme) is not None or not rest:
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
            bootstrap = bootstrap or server_list(uri, endpoint.protocol)
    return tuple(uris), bootstrap

