"""The MQTT adapter's option spec (3.1.1 and 5.0): names, types, defaults, and the
xRegistry endpoint options it does not implement. `adapters/mqtt/` reads its options
through it; the config loader validates endpoints with it; docs/configuration.md shows it.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

from paho.mqtt.subscribeoptions import SubscribeOptions

from gateway.ports import EndpointSettings
from gateway.ports.options import (
    Field,
    Option,
    OptionSpec,
    Unsupported,
    count,
    extend,
    one_or_many,
    seconds,
)
from gateway.ports.schemes import check_scheme
from gateway.ports.tls import client_context, wants_tls
from gateway.protocols import MQTT5, profile


def _qos(value: object) -> tuple[str, str] | None:
    if isinstance(value, int) and value not in (0, 1, 2):
        return f"QoS must be 0, 1 or 2, not {value}", "write qos: 0, 1 or 2"
    return None


def _retain_handling(value: object) -> tuple[str, str] | None:
    if isinstance(value, int) and value not in (0, 1, 2):
        return (f"retain handling must be 0, 1 or 2, not {value}",
                "0: send retained messages at subscribe, 1: only for a new subscription, "
                "2: never")
    return None


#: The MQTT protocol's largest packet: a 4-byte remaining length (268,435,455) plus the
#: fixed header's 5 bytes.
MAX_PACKET_SIZE = 268_435_460

OPTIONS = OptionSpec(
    protocol="MQTT",
    options=(
        Option(Field("topic", "str",
                     "producer: topic of records without a topic_name; consumer: subscribed "
                     "when neither topicfilter nor the definitions give a filter",
                     example="devices/alerts"), xregistry=True),
        Option(one_or_many("topicfilter",
                           "consumer: topic filters to subscribe to (default: derived from "
                           "the definitions' topic_name templates, {x} -> +)", "filter",
                           example="store/+/sales"),
               side="consumer", xregistry=True, aliases=("filters",)),
        Option(Field("qos", "int",
                     "consumer: subscription QoS; producer: QoS of records without a qos "
                     "(xrgw defaults to 1, at-least-once; the spec's default is 0)",
                     default=1, check=_qos), xregistry=True),
        Option(Field("retain", "bool", "producer: retain flag of records without a retain",
                     default=False), side="producer", xregistry=True),
        Option(Field("cleanstart", "bool",
                     "consumer: start a clean session (MQTT 3.1.1: clean session). Off by "
                     "default: the broker keeps the session and redelivers unacknowledged "
                     "messages after a restart; on, messages sent while the gateway is away "
                     "are lost to it. MQTT 3.1.1 with a shared subscription: on by default "
                     "(a 3.1.1 session never expires, and the broker keeps queueing a dead "
                     "member's share into it)", default=False),
               side="consumer", xregistry=True, aliases=("cleansession",)),
        Option(Field("sessionexpiryinterval", "int",
                     "consumer, 5.0: seconds the broker keeps the session after a disconnect. "
                     "With a shared subscription the default is 0: the session ends with the "
                     "connection, so the broker stops giving a dead member new messages and "
                     "(where it can) hands its unacknowledged ones to the others; set it "
                     "only when each replica comes back under its own client id "
                     "(docs/deployment.md, Scaling)", default=86400),
               side="consumer", xregistry=True, aliases=("session_expiry",)),
        Option(Field("sharedsubscriptiongroup", "str",
                     "consumer: subscribe as $share/<group>/<filter> so that several "
                     "gateways share the messages"), side="consumer", xregistry=True),
        Option(Field("retainaspublished", "bool",
                     "consumer, 5.0: keep the retain flag of forwarded messages as published "
                     "(off: the broker clears it on live messages)", default=False),
               side="consumer", xregistry=True),
        Option(Field("retainhandling", "int",
                     "consumer, 5.0: retained messages at subscribe: 0 always, 1 only for a "
                     "new subscription, 2 never", default=0, check=_retain_handling),
               side="consumer", xregistry=True),
        Option(Field("protocol", "enum", "the MQTT version, from the endpoint's protocol",
                     default="5.0", choices=("5.0", "3.1.1")), derived=True),
        seconds("keepalive", 30, "seconds between keepalive pings"),
        count("max_in_flight", 1000,
              "consumer: unsettled deliveries (5.0: also the Receive Maximum)", high=65535),
        seconds("connect_timeout", 10, "seconds for TCP connect + CONNACK"),
        seconds("publish_timeout", 10, "producer: seconds to wait for PUBACK/PUBCOMP",
                 "producer"),
        seconds("reconnect_max", 10, "producer: longest backoff between reconnect attempts",
                 "producer"),
        count("max_packet_size", MAX_PACKET_SIZE,
              "producer: the largest PUBLISH packet the broker takes, in bytes; a larger "
              "message is dead-lettered as too-large before it is sent. An MQTT 5 broker's "
              "own Maximum Packet Size (CONNACK) lowers it; set it for a 3.1.1 broker with a "
              "limit (mosquitto's message_size_limit), which cannot say so",
              side="producer", high=MAX_PACKET_SIZE),
    ),
    unsupported=(
        Unsupported("willtopic", "xrgw publishes no will message (a will is rendered from a "
                    "message definition, willmessage, which the gateway does not do yet)"),
        Unsupported("willmessage", "xrgw publishes no will message"),
        Unsupported("nolocal", "xrgw subscribes and publishes on separate connections, so "
                    "none of its own messages can come back on a subscription",
                    side="consumer"),
    ),
)


@OPTIONS.typed
@dataclass(frozen=True)
class MqttValues:
    """The options as read (`OPTIONS.read_into`), one field per option of the spec."""

    topic: str | None
    topicfilter: str | list[str] | None
    qos: int
    retain: bool
    cleanstart: bool
    sessionexpiryinterval: int
    sharedsubscriptiongroup: str | None
    retainaspublished: bool
    retainhandling: int
    protocol: str
    keepalive: float
    max_in_flight: int
    connect_timeout: float
    publish_timeout: float
    reconnect_max: float
    max_packet_size: int



_URIS = profile(MQTT5).endpoint.uris  # 3.1.1 has the same


@dataclass(frozen=True)
class MqttOptions(MqttValues):
    """The adapter's settings: the options as read (`sessionexpiryinterval` and
    `cleanstart` as the shared-subscription rule below leaves them), and what it derives
    from them and from the endpoint's address."""

    host: str
    port: int
    tls: ssl.SSLContext | None
    v5: bool
    filters: tuple[str, ...]

    @classmethod
    def parse(cls, settings: EndpointSettings) -> MqttOptions:
        """Read the options (`adapters/mqtt/options.py`); raises ValueError naming the bad
        one."""
        url = urlsplit(settings.uri)
        check_scheme(url.scheme, _URIS)
        secure = wants_tls(url.scheme, _URIS, settings.tls)
        opts = OPTIONS.read_into(MqttValues, settings.options)
        raw_filters = opts.topicfilter or ()
        filters = (raw_filters,) if isinstance(raw_filters, str) else tuple(raw_filters)
        v5 = opts.protocol != "3.1.1"
        session_expiry, clean_start = _session(
            opts, OPTIONS.canonical(settings.options), filters, v5)
        return extend(
            cls, opts,
            host=url.hostname or "127.0.0.1",
            port=url.port or (8883 if secure else 1883),
            tls=client_context(settings.tls) if secure else None,
            v5=v5,
            filters=filters,
            sessionexpiryinterval=session_expiry,
            cleanstart=clean_start,
        )

    def subscriptions(self) -> list[tuple[str, Any]]:
        """SUBSCRIBE entries: MQTT 5 carries the subscription options, 3.1.1 the QoS only."""
        if not self.v5:
            return [(f, self.qos) for f in self.filters]
        return [(f, SubscribeOptions(qos=self.qos, retainAsPublished=self.retainaspublished,
                                     retainHandling=self.retainhandling))
                for f in self.filters]


def _session(opts: MqttValues, written: dict[str, object],
             filters: tuple[str, ...], v5: bool) -> tuple[int, bool]:
    """(session expiry, clean start) of a consumer. On a shared subscription the session
    ends with the connection unless the operator chose otherwise: a broker keeps giving
    a disconnected member's session its share of new messages (mosquitto 2.0 does, for
    the session's whole expiry), and hands a dead member's unacknowledged ones to the
    others only when its session ends, if at all (the MQTT 5 spec's SHOULD). With a
    persistent session and a replica that never comes back under the same client id (a
    Deployment's new pod), those messages wait the whole expiry and are then dropped.
    MQTT 3.1.1 has no expiry: a clean session is the only session that ends."""
    expiry = opts.sessionexpiryinterval
    clean = opts.cleanstart
    shared = bool(opts.sharedsubscriptiongroup) or any(
        f.startswith("$share/") for f in filters)
    if shared and "sessionexpiryinterval" not in written:
        expiry = 0
    if shared and not v5 and "cleanstart" not in written:
        clean = True
    return expiry, clean


def link_security(settings: EndpointSettings, opts: MqttOptions) -> dict[str, Any]:
    """PahoLink keyword arguments: TLS context and credentials."""
    url = urlsplit(settings.uri)
    username = settings.username or (unquote(url.username) if url.username else None)
    password = settings.password or (unquote(url.password) if url.password else None)
    return {"tls": opts.tls, "username": username, "password": password}
