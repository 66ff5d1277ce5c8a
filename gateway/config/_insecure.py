"""Insecure endpoint settings, said out loud: `xrgw validate` warns about them (`--strict`
refuses them) and `xrgw run` logs them once at start, as configuration warnings.

- `tls.insecure: true`: the server is not verified; anyone on the path can pose as it
  and read everything, credentials included.
- credentials on a connection without TLS (a password or token, in the settings or in
  the URI, over `mqtt://`, `nats://`, `amqp://`, `http://`, Kafka without `tls`): whoever
  is on the path reads them, or the session they open. A loopback address is exempt:
  that traffic never leaves the machine (a sidecar's broker on 127.0.0.1).

One rule for every protocol, read from the profile's TLS schemes, as the adapters decide
(`gateway/ports/tls.py`: a TLS scheme or a `tls` block means TLS).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from urllib.parse import urlsplit

from gateway.config._model import EndpointConfig
from gateway.ports.netaddr import is_loopback
from gateway.protocols import find_profile
from gateway.spec.problems import json_path


def insecure_settings(endpoints: Mapping[str, EndpointConfig]
                      ) -> Iterator[tuple[str, str, str]]:
    """(JSON path, message, fix) of each insecure setting."""
    for eid, endpoint in endpoints.items():
        tls = endpoint.tls
        if tls is not None and tls.insecure:
            yield (json_path("endpoints", eid, "tls", "insecure"),
                   f"endpoint '{eid}': TLS server verification is off (tls.insecure): "
                   "anyone on the path can pose as the server and read the traffic, "
                   "credentials included",
                   "give the CA that signed the server as tls.ca_file and remove "
                   "insecure: true")
        exposed = [u for u in endpoint.uris if _clear_text(endpoint, u)]
        if exposed and _has_credentials(endpoint):
            host = urlsplit(exposed[0]).hostname or exposed[0]
            yield (json_path("endpoints", eid),
                   f"endpoint '{eid}': credentials go to {host} over a connection without "
                   "TLS: whoever is on the path can read them",
                   "use the protocol's TLS scheme (mqtts://, amqps://, tls://, https://) "
                   "or a tls block")


def _clear_text(endpoint: EndpointConfig, uri: str) -> bool:
    """Whether `uri` connects without TLS to a host off this machine."""
    if endpoint.tls is not None:
        return False
    prof = find_profile(endpoint.protocol or "")
    parts = urlsplit(uri)
    if prof is not None and prof.endpoint.uris.is_tls(parts.scheme):
        return False
    hosts = ([parts.hostname or ""] if "," not in parts.netloc else
             [h.rsplit(":", 1)[0] for h in parts.netloc.rpartition("@")[2].split(",")])
    return not all(is_loopback(h) for h in hosts if h)


def _has_credentials(endpoint: EndpointConfig) -> bool:
    if endpoint.password is not None:  # password, password_file, a NATS token
        return True
    for uri in endpoint.uris:
        parts = urlsplit(uri)
        if parts.password or parts.username:  # `nats://TOKEN@host` is a token
            return True
    return False


__all__ = ["insecure_settings"]
