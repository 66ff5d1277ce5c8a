"""The AMQP 1.0 adapter's option spec: names, types, defaults, and the xRegistry endpoint
options it does not implement. `adapters/amqp/` reads its options through it; the
config loader validates endpoints with it; docs/configuration.md shows it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import unquote, urlsplit

from proton import SSLDomain

from adapters.amqp.terminus import transient_queue_warning
from gateway.ports import EndpointSettings, TlsSettings
from gateway.ports.netaddr import is_loopback
from gateway.ports.options import (
    Field,
    Option,
    OptionSpec,
    Unsupported,
    count,
    extend,
    seconds,
)
from gateway.ports.schemes import check_scheme
from gateway.ports.tls import client_context, wants_tls
from gateway.protocols import AMQP, profile

log = logging.getLogger("adapters.amqp")

_AT_LEAST_ONCE = ("xrgw always links at-least-once (sender unsettled, receiver settles "
                  "first); other settle modes would lose or duplicate messages silently")
OPTIONS = OptionSpec(
    protocol="AMQP/1.0",
    options=(
        Option(Field("node", "str",
                     "consumer: source address (required); producer: target of records "
                     "without properties.to. RabbitMQ 3.x: /queue/q, /exchange/x/key, "
                     "/topic/key; RabbitMQ 4.x: /queues/q (default: the URI's path)",
                     example="/queue/orders"), xregistry=True, aliases=("address",)),
        Option(Field("durable", "bool",
                     "producer: header.durable of records without one (xrgw defaults to "
                     "true; the spec's default is false)", default=True),
               side="producer", xregistry=True),
        Option(Field("terminus-durability", "enum",
                     "durability of the link's terminus (consumer: source, producer: "
                     "target). RabbitMQ 3.x declares the queue of a /queue/NAME address "
                     "from it: durable for configuration or unsettled-state, transient "
                     "(erased by a broker restart) for none, and refuses an attach whose "
                     "durability differs from an existing queue's. auto: configuration for "
                     "a /queue/ address, none otherwise (a durable terminus on /exchange/ or "
                     "/topic/ makes RabbitMQ leave a durable queue behind at every attach); "
                     "an existing transient /queue/ is attached as it is, with a warning",
                     default="auto",
                     choices=("auto", "none", "configuration", "unsettled-state")),
               xregistry=True),
        Option(Field("expiry-policy", "enum",
                     "when the broker may forget the link's terminus (AMQP 1.0 3.5.6; "
                     "RabbitMQ 3.x ignores it)", default="session-end",
                     choices=("link-detach", "session-end", "connection-close", "never")),
               xregistry=True),
        count("max_in_flight", 1000, "consumer: link credit = unsettled deliveries at most",
              high=1_000_000),
        Option(Field("nack_outcome", "enum",
                     "consumer, nack(retry=True): released, or modified (delivery-failed: "
                     "counts the attempt; not RabbitMQ 3.x)", default="released",
                     choices=("released", "modified")), side="consumer"),
        seconds("heartbeat", 30, "seconds of idle time before the peer is presumed dead"),
        seconds("connect_timeout", 10, "seconds for TCP + SASL + open + attach"),
        seconds("publish_timeout", 10, "producer: seconds to wait for the broker's "
                 "disposition", "producer"),
        seconds("reconnect_max", 10, "producer: longest backoff between reconnect attempts",
                 "producer"),
        Option(Field("reply_address", "str",
                     "producer, request-reply (`routes[].reply`): the node the services "
                     "answer to, sent as each request's reply-to; the producer receives from "
                     "it (one per gateway instance: a queue shares its messages among its "
                     "receivers). /queue/NAME is declared (transient unless "
                     "terminus-durability says otherwise), /amq/queue/NAME must exist",
                     example="/queue/quotes-replies"), side="producer"),
        Option(Field("allow_plain_without_tls", "bool",
                     "SASL PLAIN (a user name and password) over amqp:// to a host other "
                     "than loopback sends the password in clear text and is refused unless "
                     "this is true; use amqps:// or a tls block instead", default=False)),
    ),
    unsupported=(
        Unsupported("link-properties", "xrgw sends no link properties yet"),
        Unsupported("connection-properties", "xrgw sends no connection properties yet"),
        Unsupported("distribution-mode", "xrgw consumes with the broker's default "
                    "distribution mode (move); copy is not offered yet", side="consumer"),
        Unsupported("capabilities", "xrgw asks for no link capabilities"),
        Unsupported("source-filters", "xrgw attaches no source filters; the message "
                    "definitions select messages", side="consumer"),
        Unsupported("dynamic", "xrgw attaches to a named node (node), not a dynamic one"),
        Unsupported("timeout", "use connect_timeout and publish_timeout"),
        Unsupported("sender-settle-mode", _AT_LEAST_ONCE),
        Unsupported("receiver-settle-mode", _AT_LEAST_ONCE),
    ),
)


@OPTIONS.typed
@dataclass(frozen=True)
class AmqpValues:
    """The options as read (`OPTIONS.read_into`), one field per option of the spec."""

    node: str | None
    durable: bool
    terminus_durability: str
    expiry_policy: str
    max_in_flight: int
    nack_outcome: Literal["modified", "released"]
    heartbeat: float
    connect_timeout: float
    publish_timeout: float
    reconnect_max: float
    reply_address: str | None
    allow_plain_without_tls: bool



_URIS = profile(AMQP).endpoint.uris


@dataclass(frozen=True)
class AmqpOptions(AmqpValues):
    """The adapter's settings: the options as read, and what it derives from them and
    from the endpoint's address and credentials."""

    url: str
    user: str | None
    password: str | None = field(repr=False)
    tls: TlsSettings | None  # set: connect with TLS (amqps)
    # SASL PLAIN may go over a connection without TLS (loopback, or allow_plain_without_tls)
    plain_in_clear: bool

    def warn_transient_queue(self) -> None:
        """One log line when the options make RabbitMQ 3.x declare a transient queue."""
        warning = transient_queue_warning(self.terminus_durability, self.node)
        if warning is not None:
            log.warning(warning)

    @classmethod
    def parse(cls, settings: EndpointSettings) -> AmqpOptions:
        """Read the options (`adapters/amqp/options.py`); raises ValueError naming the
        bad one."""
        url = urlsplit(settings.uri)
        check_scheme(url.scheme, _URIS)
        secure = wants_tls(url.scheme, _URIS, settings.tls)
        if secure:
            client_context(settings.tls)  # check the files here, not on the proton thread
        opts = OPTIONS.read_into(AmqpValues, settings.options)
        node = opts.node
        if node is not None and not node:
            raise ValueError("node: expected an address string, got ''")
        user = settings.username or (unquote(url.username) if url.username else None)
        password = settings.password or (unquote(url.password) if url.password else None)
        scheme, port = ("amqps", 5671) if secure else ("amqp", 5672)
        plain_in_clear = not secure and bool(user) and (
            opts.allow_plain_without_tls or is_loopback(url.hostname or ""))
        if user and not secure and not plain_in_clear:
            raise ValueError(
                f"SASL PLAIN over amqp:// would send the password to {url.hostname} in "
                "clear text: use amqps:// (or a tls block), or set the option "
                "allow_plain_without_tls: true")
        return extend(
            cls, opts,
            url=f"{scheme}://{url.hostname or '127.0.0.1'}:{url.port or port}",
            user=user,
            password=password,
            tls=(settings.tls or TlsSettings()) if secure else None,
            plain_in_clear=plain_in_clear,
        )

    def connect_kwargs(self) -> dict[str, Any]:
        """Container.connect() arguments (call on the proton thread: builds SSLDomain)."""
        kwargs: dict[str, Any] = {"url": self.url, "reconnect": False}
        if self.tls is not None:
            kwargs["ssl_domain"] = _ssl_domain(self.tls)
        if self.heartbeat > 0:
            kwargs["heartbeat"] = self.heartbeat
        if self.user:
            kwargs.update(user=self.user, password=self.password or "")
            # Proton refuses PLAIN without TLS unless told: only where parse allowed it.
            kwargs.update(allowed_mechs="PLAIN", allow_insecure_mechs=self.plain_in_clear)
        else:
            kwargs["allowed_mechs"] = "ANONYMOUS"
        return kwargs


def _ssl_domain(tls: TlsSettings) -> SSLDomain:
    domain = SSLDomain(SSLDomain.MODE_CLIENT)
    if tls.ca_file:
        domain.set_trusted_ca_db(tls.ca_file)
    if tls.insecure:
        domain.set_peer_authentication(SSLDomain.ANONYMOUS_PEER)
    elif tls.ca_file:
        domain.set_peer_authentication(SSLDomain.VERIFY_PEER_NAME, tls.ca_file)
    else:
        domain.set_peer_authentication(SSLDomain.VERIFY_PEER_NAME)  # system CAs
    if tls.cert_file:
        domain.set_credentials(tls.cert_file, tls.key_file or tls.cert_file, None)
    return domain
