"""The typed, checked gateway configuration handed to the daemon.

Everything is resolved: endpoint addresses and credentials are final (overrides applied,
`${VAR}` substituted, secret files read), protocol options are merged, and each endpoint
carries its message definitions, so the daemon does not go back to the raw YAML or the
catalog to assemble a route. Durations are float seconds. Where the engine or the adapters
take a value as it is configured, the config holds their type (`RetryPolicy`,
`TlsSettings`) instead of a look-alike to be copied field by field.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from gateway.definitions.model import Catalog, Endpoint, MessageDefinition, Usage
from gateway.definitions.sources import RegistryAccess
from gateway.json.values import JSON
from gateway.policies.readiness import ReadinessPolicy
from gateway.policies.reply import ReplyErrors
from gateway.policies.retry import RetryPolicy
from gateway.policies.schema import SchemaPolicy
from gateway.ports import TlsSettings, connection_repr
from gateway.ports.netaddr import is_loopback
from gateway.spec.secret import Secret

Mode = Literal["binary", "structured"]
Deliver = Literal["cloudevent", "native"]
Ambiguity = Literal["first", "deadletter"]
LogLevel = Literal["debug", "info", "warning", "error"]
LogFormat = Literal["json", "text"]


@dataclass(frozen=True)
class DefinitionSource:
    """A file or directory path (made absolute), or a registry URL polled every `poll`."""

    location: str
    poll: float | None = None
    headers: Mapping[str, Secret] = field(default_factory=dict)
    ca_file: str | None = None  # verifies an https registry (None: the system CAs)

    def access(self) -> RegistryAccess:
        """Headers (revealed) and CA file for the definitions loader."""
        return RegistryAccess({k: v.reveal() for k, v in self.headers.items()}, self.ca_file)

    @property
    def is_registry(self) -> bool:
        return self.location.lower().startswith(("http://", "https://"))


@dataclass(frozen=True)
class RouteConfig:
    index: int  # position in `routes`, for problems and metrics labels
    source: str  # `from`: consumer endpoint id
    targets: tuple[str, ...]  # `to`: producer endpoint ids
    mode: Mode = "binary"
    messagegroups: tuple[str, ...] = ()  # group ids actually matched (default resolved)
    deliver: Deliver = "cloudevent"
    ambiguity: Ambiguity = "first"
    partitionkey: str = "source"
    inflight: int = 4096
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    stall_after: float = 30.0  # trouble lasting this long is a stall (runtime/stalls.py)
    # Request-reply (`reply: true`): how long a request waits for its answer; None: off.
    reply_timeout: float | None = None
    # The definitions an answer must conform to (`reply_definitions`; empty: any answer)
    # and what a sender without a status is told when none does (`reply_errors`).
    reply_messages: tuple[MessageDefinition, ...] = field(default=(), repr=False)
    reply_errors: ReplyErrors = "none"
    schema: SchemaPolicy = "tiebreak"  # see gateway.schemas.enforce
    # The definitions the route matches: its groups' messages, plus the consumer's inline
    # messages when `messagegroups` was not given.
    messages: tuple[MessageDefinition, ...] = field(default=(), repr=False)
    observe: bool = False  # shadow mode: publish and dead-letter nothing
    redact: tuple[str, ...] = ()  # field paths the report's samples never show


@dataclass(frozen=True)
class EndpointConfig:
    endpoint_id: str
    protocol: str | None
    usage: tuple[Usage, ...]
    # Addresses in preference order. Kafka: one `kafka://h:p[,h:p]` URI per address object;
    # `bootstrap_servers` holds the preferred one's host:port list.
    uris: tuple[str, ...]
    bootstrap_servers: tuple[str, ...] = ()
    username: str | None = None
    password: Secret | None = None
    client_id: str | None = None
    tls: TlsSettings | None = None
    # The endpoint's protocoloptions (without `endpoints`) overlaid by the override options.
    options: Mapping[str, JSON] = field(default_factory=dict)
    envelope_options: Mapping[str, JSON] = field(default_factory=dict)
    messages: tuple[MessageDefinition, ...] = ()
    definition: Endpoint | None = field(default=None, compare=False)

    @property
    def uri(self) -> str:
        """The preferred address."""
        return self.uris[0] if self.uris else ""

    def __repr__(self) -> str:
        # Hand-written: URIs may embed a password, and messages/definition are noise.
        connection = connection_repr(self.uris, self.username, self.password,
                                     self.client_id, self.tls)
        return (f"EndpointConfig({self.endpoint_id!r}, protocol={self.protocol!r}, "
                f"usage={self.usage!r}, "
                f"{connection}, "
                f"options={self.options!r}, messages={len(self.messages)})")


@dataclass(frozen=True)
class AdminConfig:
    host: str = "127.0.0.1"
    port: int = 9464
    # A second listener with only /healthz and /readyz (`admin.health_listen`): kubelet
    # HTTP probes reach the pod address, while `listen` may stay on loopback.
    health: tuple[str, int] | None = None
    # What /readyz requires (`admin.readiness`, see gateway/observability/readiness.py).
    readiness: ReadinessPolicy = "all"
    # The sample-bearing pages (/conformance, /): `auto`, `listen` or `off`
    # (`admin.pages`), their own listener (`admin.pages_listen`), and the bearer token
    # they require (read from `admin.token_file`).
    pages: str = "auto"
    pages_listen: tuple[str, int] = ("127.0.0.1", 9466)
    token: Secret | None = None

    def pages_address(self) -> tuple[str, int] | Literal["listen"] | None:
        """Where the pages are served: on `listen`, on their own listener, or nowhere."""
        if self.pages == "off":
            return None
        if self.pages == "listen" or is_loopback(self.host):
            return "listen"
        return self.pages_listen

    @property
    def listen(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


@dataclass(frozen=True)
class LogConfig:
    level: LogLevel = "info"
    format: LogFormat = "json"


@dataclass(frozen=True)
class ShutdownConfig:
    grace: float = 30.0


@dataclass(frozen=True)
class GatewayConfig:
    file: str
    definitions: tuple[DefinitionSource, ...]
    routes: tuple[RouteConfig, ...]
    deadletter: str | None  # producer endpoint id; None means `deadletter: log`
    admin: AdminConfig = field(default_factory=AdminConfig)
    log: LogConfig = field(default_factory=LogConfig)
    shutdown: ShutdownConfig = field(default_factory=ShutdownConfig)
    # Every endpoint a route or the dead letter uses, and every overridden one, by id.
    endpoints: Mapping[str, EndpointConfig] = field(default_factory=dict)
    catalog: Catalog = field(default_factory=Catalog, repr=False, compare=False)

