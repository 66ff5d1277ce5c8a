"""The Kafka adapter's option spec: names, types, defaults, and the xRegistry endpoint
options it does not implement. `adapters/kafka/` reads its options through it; the
config loader validates endpoints with it; docs/configuration.md shows it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from aiokafka import codec  # type: ignore[import-untyped]  # no py.typed

from gateway.ports import EndpointSettings
from gateway.ports.options import (
    Check,
    Field,
    Option,
    OptionSpec,
    Unsupported,
    count,
    extend,
    int_range,
    milliseconds,
    one_or_many,
    seconds,
)
from gateway.ports.schemes import check_scheme
from gateway.ports.tls import client_context
from gateway.protocols import KAFKA, KAFKA_CORRELATION_ID, KAFKA_REPLY_TOPIC, profile


def _acks(value: object) -> tuple[str, str] | None:
    if isinstance(value, int) and value not in (-1, 0, 1):
        return (f"acks must be -1 (all in-sync replicas), 0 or 1, not {value}",
                "write acks: -1, 0 or 1")
    return None


#: Kafka's compression codecs and whether this installation can write them (cramjam, a
#: dependency, brings snappy, lz4 and zstd; every codec is also readable).
CODECS = {"none": codec.has_gzip, "gzip": codec.has_gzip, "snappy": codec.has_snappy,
          "lz4": codec.has_lz4, "zstd": codec.has_zstd}
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


def _one_of(choices: tuple[str, ...]) -> Check:
    """Kafka's own settings are case-insensitive: `scram-sha-512` is SCRAM-SHA-512."""
    def check(value: object) -> tuple[str, str] | None:
        if isinstance(value, str) and value.upper() not in choices:
            return (f"'{value}' is not one of {', '.join(choices)}",
                    f"write one of: {', '.join(choices)}")
        return None
    return check


OPTIONS = OptionSpec(
    protocol="KAFKA",
    options=(
        Option(Field("topic", "str",
                     "producer: topic of records without a topic; consumer: subscribed when "
                     "`topics` is absent", example="orders"), xregistry=True),
        Option(one_or_many("topics", "consumer: topics to subscribe to (default: `topic`, "
                           "else the definitions' constant topics)", "topic"),
               side="consumer"),
        Option(Field("consumergroup", "str",
                     "consumer: group id (default xrgw-<endpoint id>)"),
               side="consumer", xregistry=True),
        Option(Field("autooffsetreset", "enum",
                     "consumer: where a group without a committed offset starts",
                     default="earliest", choices=("earliest", "latest")),
               side="consumer", xregistry=True),
        Option(Field("isolation_level", "enum",
                     "consumer: read_committed: records of aborted transactions never "
                     "become events and those of open ones wait for the commit (brokers "
                     "that report aborts: Apache Kafka does, Tansu does not); "
                     "read_uncommitted: every record as soon as it is written",
                     default="read_committed",
                     choices=("read_committed", "read_uncommitted")),
               side="consumer"),
        Option(Field("observeoffset", "enum",
                     "consumer, shadow mode (`routes[].observe`): where the observing "
                     "route's own consumer group starts",
                     default="latest", choices=("earliest", "latest")),
               side="consumer"),
        Option(Field("acks", "union",
                     "producer: acknowledgements the broker gives before a record counts as "
                     "delivered: -1 or all: all in-sync replicas, 1 the leader, 0 none "
                     "(delivered on send; a lost record is not noticed)", default="all",
                     variants=(Field("acks", "int", "-1, 0 or 1", check=_acks),
                               Field("acks", "enum", "all", choices=("all",)))),
               side="producer", xregistry=True),
        Option(Field("key", "str", "producer: key of records without a key"),
               side="producer", xregistry=True),
        Option(Field("partition", "int", "producer: partition of records without a partition",
                     check=int_range(0, example=0)), side="producer", xregistry=True),
        Option(Field("headers", "map",
                     "producer: headers added to every record (a record's own header of the "
                     "same name wins)", item=Field("value", "str", "header value")),
               side="producer", xregistry=True),
        # As large as the route's default window: the route reads a quarter of it per
        # batch and keeps several batches in flight, and at 64 a Kafka source moved half
        # as much (batches of 64, the next read waiting for the last one's commit).
        count("max_in_flight", 4096, "consumer: unsettled deliveries (a crash redelivers "
              "from the first unsettled one)"),
        milliseconds("session_timeout_ms", 10000, "consumer: group session timeout; also "
                     "how long a fetch may go unanswered (at least 5 s) before the source "
                     "counts as not connected", "consumer"),
        milliseconds("heartbeat_interval_ms", 3000, "consumer: group heartbeat interval",
                     "consumer"),
        Option(Field("enable_idempotence", "bool",
                     "producer: idempotent producer (Tansu 0.6 answers InitProducerId with "
                     "UnknownError, hence off)", default=False), side="producer"),
        seconds("connect_timeout", 10, "seconds for bootstrap on connect; a consumer also "
                 "waits up to 3 x the session timeout for its group assignment"),
        seconds("publish_timeout", 10, "producer: seconds to wait for the broker's ack",
                 "producer"),
        milliseconds("linger_ms", 5,
                     "producer: milliseconds a partition's batch waits for more records "
                     "before it is sent. The default 5 lets small submits (an AMQP source "
                     "at moderate rates) share produce requests; 0 sends at once, for more "
                     "produce requests (Kafka broker CPU). Unset, a route whose senders "
                     "each wait for their message (an HTTP source, request-reply) waits "
                     "2: the wait adds to each of their round trips (bench/README.md)",
                     "producer", low=0),
        count("max_batch_size", 1048576,
              "producer: bytes of records per partition in one produce request; stay at or "
              "below the broker's message.max.bytes (Kafka's default: 1 MiB + 12)",
              side="producer"),
        Option(Field("compression_type", "enum",
                     "producer: how record batches are compressed. Consumers read every "
                     "codec whatever this says; zstd needs Kafka 2.1+ brokers and clients",
                     default="none", choices=tuple(CODECS)), side="producer"),
        seconds("reconnect_max", 10, "producer: longest backoff between reconnects",
                 "producer"),
        Option(Field("reply_topic", "str",
                     "producer, request-reply (`routes[].reply`): the topic the services "
                     "answer to, named in each request's reply-topic header; the producer "
                     "reads it from its end, without a consumer group (docs/request-reply.md)",
                     example="quotes.replies"), side="producer"),
        Option(Field("reply_topic_header", "str",
                     "request-reply: the header naming the reply topic (Spring Kafka's "
                     "KafkaHeaders.REPLY_TOPIC)", default=KAFKA_REPLY_TOPIC)),
        Option(Field("correlation_header", "str",
                     "request-reply: the header correlating an answer with its request, "
                     "copied byte for byte into the answer (Spring Kafka's "
                     "KafkaHeaders.CORRELATION_ID)", default=KAFKA_CORRELATION_ID)),
        Option(Field("sasl_mechanism", "str", "with a username: the SASL mechanism, "
                     "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (any case)", default="PLAIN",
                     check=_one_of(MECHANISMS))),
        Option(Field("security_protocol", "str",
                     "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL (any case); derived from the "
                     "tls block and username; if given, must agree",
                     check=_one_of(SECURITY_PROTOCOLS))),
    ),
    unsupported=(
        Unsupported("keyserializer", "xrgw sends a record's key bytes as they are; how the "
                    "key is written is the message definition's business"),
        Unsupported("valueserializer", "xrgw sends the rendered payload bytes as they are; "
                    "the definition's datacontenttype and schema describe them"),
        Unsupported("enableautocommit", "xrgw commits an offset only after the message was "
                    "delivered or dead-lettered (at-least-once); auto commit would lose "
                    "messages on a crash", side="consumer"),
    ),
)


@OPTIONS.typed
@dataclass(frozen=True)
class KafkaValues:
    """The options as read (`OPTIONS.read_into`), one field per option of the spec."""

    topic: str | None
    topics: str | list[str] | None
    consumergroup: str | None
    autooffsetreset: str
    isolation_level: str
    observeoffset: str
    acks: int | str
    key: str | None
    partition: int | None
    headers: dict[str, str] | None
    max_in_flight: int
    session_timeout_ms: int
    heartbeat_interval_ms: int
    enable_idempotence: bool
    connect_timeout: float
    publish_timeout: float
    linger_ms: int
    max_batch_size: int
    compression_type: str
    reconnect_max: float
    reply_topic: str | None
    reply_topic_header: str
    correlation_header: str
    sasl_mechanism: str
    security_protocol: str | None



_URIS = profile(KAFKA).endpoint.uris


@dataclass(frozen=True)
class KafkaOptions(KafkaValues):
    """The adapter's settings: the options as read (`acks` with -1 as "all"), and what
    it derives from them and from the endpoint's address and credentials."""

    bootstrap: tuple[str, ...]
    subscribed: tuple[str, ...]  # `topics` as a tuple
    codec: str | None  # `compression_type` as aiokafka spells it: None, gzip, snappy, ...
    # `headers` as every record gets them unless it has one of the same name
    record_headers: tuple[tuple[str, bytes], ...]
    # aiokafka's security arguments (security_protocol, ssl_context, sasl_*); the password
    # is in there, so it stays out of the repr.
    security: Mapping[str, Any] = field(repr=False)

    @classmethod
    def parse(cls, settings: EndpointSettings) -> KafkaOptions:
        """Read the options (`adapters/kafka/options.py`); raises ValueError naming the
        bad one."""
        opts = OPTIONS.read_into(KafkaValues, settings.options)
        topics = opts.topics or ()
        return extend(
            cls, opts,
            bootstrap=_bootstrap(settings.uri),
            subscribed=(topics,) if isinstance(topics, str) else tuple(topics),
            acks="all" if opts.acks in (-1, "all") else opts.acks,
            codec=_compression(opts.compression_type),
            record_headers=tuple((name, value.encode()) for name, value in
                                 (opts.headers or {}).items()),
            security=_security(settings, opts),
        )

    @property
    def sasl(self) -> bool:
        return str(self.security.get("security_protocol", "")).startswith("SASL")


def _compression(name: str) -> str | None:
    """aiokafka's compression_type for the option; refused when its codec is missing
    (cramjam, a dependency, brings snappy, lz4 and zstd)."""
    if name == "none":
        return None
    if not CODECS[name]():
        raise ValueError(f"compression_type: {name} needs the cramjam package, which is "
                         "not installed")
    return name


def _security(settings: EndpointSettings, opts: KafkaValues) -> dict[str, Any]:
    """aiokafka keyword arguments for TLS and SASL (empty: plaintext, anonymous)."""
    tls = settings.tls is not None
    sasl = bool(settings.username)
    derived = ("SASL_" if sasl else "") + ("SSL" if tls else "PLAINTEXT")
    protocol = (opts.security_protocol or derived).upper()
    if protocol not in SECURITY_PROTOCOLS:
        raise ValueError(f"security_protocol: expected one of {', '.join(SECURITY_PROTOCOLS)}, "
                         f"got {protocol!r}")
    if protocol.startswith("SASL") and not sasl:
        raise ValueError(f"security_protocol: {protocol} needs a username and password")
    if sasl and not protocol.startswith("SASL"):
        raise ValueError(f"security_protocol: {protocol} sends no credentials; "
                         "drop it (derived from username and tls) or use a SASL_ protocol")
    if protocol.endswith("PLAINTEXT") and tls:
        raise ValueError(f"security_protocol: {protocol} contradicts the tls settings")
    out: dict[str, Any] = {"security_protocol": protocol}
    if protocol.endswith("SSL"):
        out["ssl_context"] = client_context(settings.tls)
    if sasl:
        mechanism = (opts.sasl_mechanism or "PLAIN").upper()
        if mechanism not in MECHANISMS:
            raise ValueError(f"sasl_mechanism: expected one of {', '.join(MECHANISMS)}, "
                             f"got {mechanism!r}")
        if mechanism == "PLAIN" and protocol == "SASL_PLAINTEXT":
            raise ValueError("sasl_mechanism: PLAIN without TLS sends the password in clear "
                             "text; add a tls block or use SCRAM-SHA-256/512")
        out.update(sasl_mechanism=mechanism, sasl_plain_username=settings.username,
                   sasl_plain_password=settings.password or "")
    return out


def _bootstrap(uri: str) -> tuple[str, ...]:
    # Not urlsplit: a comma-separated host list has no valid port for it.
    scheme, sep, rest = uri.partition("://")
    if not sep:
        scheme, rest = "", uri
    check_scheme(scheme, _URIS)
    netloc = rest.split("/", 1)[0]
    if "@" in netloc:
        raise ValueError("uri: put credentials into username/password (or *_file), "
                         "not into the Kafka URI")
    servers = tuple(s.strip() for s in netloc.split(",") if s.strip())
    if not servers:
        raise ValueError("uri: expected kafka://HOST:PORT[,HOST:PORT...]")
    return tuple(s if ":" in s.rsplit("]", 1)[-1] else f"{s}:9092" for s in servers)
