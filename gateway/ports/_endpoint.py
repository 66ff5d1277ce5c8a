"""What the core hands the adapter factory for one endpoint: the endpoint as the config
resolved it, and the address templates of the message definitions read from it.

An adapter never reads the configuration nor the definitions itself: the core builds an
`AdapterEndpoint` (`gateway.config.for_adapter`) and the adapter derives its settings
from it (a consumer's topic filters, subjects, paths, node).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from gateway.json.values import JSON
from gateway.ports._settings import TlsSettings
from gateway.spec.secret import Secret, redact_uri


@dataclass(frozen=True)
class AddressTemplate:
    """One address of a message definition (the profile's address field: MQTT topic, NATS
    subject, Kafka topic, HTTP path), as written, and split into the levels a broker
    matches one at a time (`separator`), a level holding a placeholder as None. `levels`
    is None when the text is not a template that parses."""

    text: str
    levels: tuple[str | None, ...] | None = None
    separator: str = "/"

    @property
    def fixed(self) -> bool:
        """An address without placeholders: a topic or path to read as it is."""
        return "{" not in self.text

    def wildcard_filter(self, single: str) -> str | None:
        """The broker subscription filter: each level with a placeholder becomes the
        one-level wildcard `single` (MQTT `+`, NATS `*`); None when it does not parse."""
        if self.levels is None:
            return None
        return self.separator.join(single if level is None else level
                                   for level in self.levels)


def connection_repr(uris: Sequence[str], username: str | None, password: Secret | None,
                    client_id: str | None, tls: TlsSettings | None) -> str:
    """Where and how an endpoint connects, for its hand-written repr: a URI may embed a
    password, so each is shown redacted (a `Secret` shows itself as `***`)."""
    shown = ", ".join(redact_uri(u) for u in uris)
    return (f"uris=[{shown}], username={username!r}, password={password!r}, "
            f"client_id={client_id!r}, tls={tls!r}")


@dataclass(frozen=True)
class AdapterEndpoint:
    """One configured endpoint, as the adapter factory receives it: the endpoint's
    protocoloptions overlaid by the deployment's overrides (`options`), where and how to
    connect, and the address templates of the messages read from it (`addresses`: empty
    for a producer)."""

    endpoint_id: str
    protocol: str | None
    # Addresses in preference order; Kafka: `bootstrap_servers` of the preferred one.
    uris: tuple[str, ...] = ()
    bootstrap_servers: tuple[str, ...] = ()
    username: str | None = None
    password: Secret | None = None
    client_id: str | None = None
    tls: TlsSettings | None = None
    options: Mapping[str, JSON] = field(default_factory=dict)
    addresses: tuple[AddressTemplate, ...] = ()

    @property
    def uri(self) -> str:
        """The preferred address."""
        return self.uris[0] if self.uris else ""

    def __repr__(self) -> str:
        connection = connection_repr(self.uris, self.username, self.password,
                                     self.client_id, self.tls)
        return (f"AdapterEndpoint({self.endpoint_id!r}, protocol={self.protocol!r}, "
                f"{connection}, "
                f"options={dict(self.options)!r}, addresses={len(self.addresses)})")
