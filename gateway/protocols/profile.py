"""The shape of a protocol profile: every fact the gateway needs about one protocol.

A profile is data, not code: the matcher, the envelope, the route, the dead-letter format,
the config checks, the definitions validator, the Spark plan and the adapters all read the
same object instead of each keeping its own `if protocol == ...` chain. The profiles
themselves are in the protocol modules next to this one (`mqtt.py`, `kafka.py` ...).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

FieldKind = Literal["scalar", "list", "map", "section"]
# Fields of the *native message record* (JSON form). Collections of headers and user
# properties are always lists of {name, value} in the record, even where the definition
# spells them as a map (Kafka headers).
RecordFieldType = Literal["string", "integer", "boolean", "pairs", "object", "strmap"]


@dataclass(frozen=True)
class ValueFormat:
    """A syntax a constant value (or entry name) of a definition field must have (HTTP
    method, status, header names)."""

    pattern: str  # a regular expression the whole value must match
    noun: str  # what a valid value is, for the message: "an HTTP method"
    fix: str


@dataclass(frozen=True)
class FieldSpec:
    """One field of a protocol's message model.

    kind:
      scalar  - a single value (`topic_name`, `qos`)
      list    - a list of {name, value} entries, names may repeat (`user_properties`)
      map     - a map of name -> value (`query`, Kafka definition `headers`)
      section - an AMQP section: a map whose entries are declared individually
    """

    name: str
    kind: FieldKind
    type: str = "string"
    # For sections with a fixed set of names (AMQP properties/header): name -> type.
    members: tuple[tuple[str, str], ...] = ()
    case_insensitive_names: bool = False
    value_format: ValueFormat | None = None
    name_format: ValueFormat | None = None  # of entry names (list, map): HTTP header names
    # What one placeholder of a template on the field never spans: `/` (a path or topic
    # segment), `.` in a NATS subject (one token).
    separator: str = "/"

    def member_type(self, member: str) -> str | None:
        for name, typ in self.members:
            if name == member:
                return typ
        return None


@dataclass(frozen=True)
class FieldRef:
    """A place in a record: a field, or one named entry of it (a section member, or a
    header / user property of that name)."""

    field: str
    name: str | None = None


IdentityNeed = Literal["present", "non-empty", "optional"]


@dataclass(frozen=True)
class IdentityPart:
    """One part of a native identity. `present`: the identity needs a value (any, even
    empty); `non-empty`: a non-empty value; `optional`: an absent field counts as ""."""

    ref: FieldRef
    need: IdentityNeed = "present"


@dataclass(frozen=True)
class Identity:
    """What identifies one message across redeliveries; the CloudEvent id is a UUID v5 of
    `prefix:part/part/...` (`gateway/envelope/ids.py`)."""

    prefix: str
    parts: tuple[IdentityPart, ...]


@dataclass(frozen=True)
class Ordering:
    """What names a message's unit of order at the source, for keying the outputs that
    partition by key (`ProtocolProfile.partition_key`, `gateway/runtime/keys.py`): the
    first of `source_key`'s places that holds a text (MQTT topic, NATS subject, Kafka key,
    AMQP group-id, else subject). Empty: the protocol has no unit of order (HTTP's
    requests are independent). The route itself keeps a source's order by sending and
    settling each batch in order (docs/architecture.md)."""

    source_key: tuple[FieldRef, ...] = ()


@dataclass(frozen=True)
class Metadata:
    """Where a protocol carries application metadata (name -> value): the dead-letter
    `xrgw-*` entries, trace context and (for header protocols) the content type go here.

    ignore_case - names are compared ignoring case when read (and when a content type
                  is added: an existing `Content-Type` is kept);
    text_values - any value reads as its text (`as_text`), as header protocols carry
                  every value as text; otherwise only string values count (MQTT user
                  properties and AMQP application properties, whose values are typed).
    """

    field: str
    shape: Literal["pairs", "section"]
    ignore_case: bool = False
    text_values: bool = False


@dataclass(frozen=True)
class Exclusion:
    """Two definition options that must not both be given."""

    first: str
    second: str
    fix: str


@dataclass(frozen=True)
class Spelling:
    """How documents name the protocol: `FAMILY[/VERSION]`, compared upper-case.
    `versions` None accepts any version (`KAFKA/3.5` is KAFKA)."""

    families: tuple[str, ...]
    versions: tuple[str, ...] | None = None


@dataclass(frozen=True)
class UriSchemes:
    """The endpoint URI schemes the gateway connects with. The config check
    (`gateway/config/_addresses.py`) and the adapter both read this one table, so an
    address the config accepts is one the adapter can use.

    schemes     - accepted, in the order the error message lists them;
    tls         - those of `schemes` that connect with TLS;
    unsupported - schemes the spec names that no adapter implements, with why;
    server_list - the URI holds a comma-separated server list (Kafka bootstrap servers);
    listens     - consumers listen on the address, so port 0 (ephemeral) is meaningful.
    """

    schemes: tuple[str, ...]
    example: str
    tls: tuple[str, ...] = ()
    unsupported: Mapping[str, str] = field(default_factory=dict)
    server_list: bool = False
    listens: bool = False

    def problem(self, scheme: str) -> str | None:
        """Why `scheme` (any case) cannot address an endpoint; None when it can."""
        lowered = scheme.lower()
        if lowered in self.schemes:
            return None
        allowed = f"the scheme must be {' or '.join(s + '://' for s in self.schemes)}"
        why = self.unsupported.get(lowered)
        return allowed if why is None else f"{lowered}:// is not supported ({why}); {allowed}"

    def is_tls(self, scheme: str) -> bool:
        return scheme.lower() in self.tls


@dataclass(frozen=True)
class DefinitionRules:
    """What a message definition's `protocoloptions` may say (spec "Message Protocols")."""

    fields: tuple[FieldSpec, ...]
    # (field, section member or None) -> inclusive integer range of a constant
    ranges: Mapping[tuple[str, str | None], tuple[int, int]] = field(default_factory=dict)
    exclusive: tuple[Exclusion, ...] = ()
    # Spellings real catalogs use -> the field name (`topic` -> `topic_name`) ...
    renames: Mapping[str, str] = field(default_factory=dict)
    # ... of which these are the spec's own (model vs prose) and not reported as old.
    quiet_renames: frozenset[str] = frozenset()
    # Keys besides `options` whose entries are flattened into protocoloptions (xrcg
    # nests MQTT options under `properties`).
    nested: tuple[str, ...] = ()


@dataclass(frozen=True)
class EndpointRules:
    """What an endpoint of the protocol may say and where it connects."""

    # The spec's endpoint option names (`gateway/definitions/endpoints.py`).
    options: tuple[str, ...]
    uris: UriSchemes
    aliases: Mapping[str, str] = field(default_factory=dict)  # other name -> option
    option_ranges: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    # Endpoint options every outgoing record gets as a field unless it has its own:
    # (option, record field), e.g. Kafka ("key", "key").
    output_fields: tuple[tuple[str, str], ...] = ()
    # Whether one endpoint may declare usage [subscriber, consumer].
    subscriber_consumer: bool = True


@dataclass(frozen=True)
class RequestReply:
    """How a protocol carries a request and its answer (`routes[].reply: true`).

    `reply_to` and `correlation` are where a request names its reply address and its
    correlation (the defaults, for protocols whose adapters let an endpoint rename them:
    Kafka headers); None where the protocol carries it otherwise (the NATS reply subject
    correlates by itself, an HTTP response belongs to its request)."""

    how: str  # for problems and docs: "a reply subject"
    # Endpoint options that turn it off when set (NATS JetStream: no reply subject).
    not_with: tuple[str, ...] = ()
    # Endpoint options an output must set to receive answers (the reply queue or topic
    # it listens on: AMQP and Kafka have no broker-made inbox the gateway can rely on).
    output_needs: tuple[str, ...] = ()
    reply_to: FieldRef | None = None
    correlation: FieldRef | None = None
    # The record field of an answer's status (HTTP `status`), which a reply definition's
    # `status` fills; None: the protocol has no status. A sender whose protocol has one is
    # told of a failure by it (its adapter answers a status with an RFC 9457 problem);
    # one without is sent a problem CloudEvent when the route asks (`reply_errors`).
    status: str | None = None


@dataclass(frozen=True)
class Redelivery:
    """How the source gives a message again that a consumer nacked with `retry=True` (or
    never settled before its connection went): the broker keeps it until it is acked.
    `how` says it for the docs; `needs` are consumer options without which the source
    keeps nothing (NATS: a `stream`, else core subjects, at most once).

    A profile without one: the source keeps nothing. Where senders wait on the line
    (`UriSchemes.listens`, the HTTP ingress) the nack answers the sender "retry later"
    (503 + Retry-After) and the sender sends it again; elsewhere a nacked message is
    gone. The adapter conformance suite (tests/integration/conformance) checks each."""

    how: str
    needs: tuple[str, ...] = ()


@dataclass(frozen=True)
class Observing:
    """How a route observes a consumer endpoint of the protocol without taking messages
    from its real consumers (`routes[].observe`, `xrgw run --observe`): what the adapter
    does (`how`, for the docs), or why it cannot (`refused`: `validate` says it)."""

    how: str
    refused: str | None = None


@dataclass(frozen=True)
class ProtocolProfile:
    """Everything protocol-specific, for one protocol."""

    name: str  # canonical: "MQTT/5.0", "KAFKA" ...
    # Definitions of one family apply to each other's records (MQTT 3.1.1 and 5.0).
    family: str
    version: str  # the version the adapter speaks ("3.1.1"); "" when it names none
    spelling: Spelling
    definitions: DefinitionRules
    record_fields: Mapping[str, RecordFieldType]
    endpoint: EndpointRules
    # The field that addresses a message (topic, subject, path ...); the index keys on it.
    address: FieldRef | None = None
    # Record fields carried percent-encoded (HTTP path and query), decoded before matching.
    percent_encoded: tuple[str, ...] = ()
    ordering: Ordering = Ordering()
    identity: Identity | None = None
    metadata: Metadata | None = None  # None: no metadata (MQTT 3.1.1)
    content_type: FieldRef | None = None
    # Where an output record's partitioning key goes (Kafka `key`): without a
    # `partitionkey` the route fills it from the source's unit of order, so that the
    # messages of one MQTT topic stay in one partition (`routes[].partitionkey`).
    partition_key: FieldRef | None = None
    # CloudEvents binary mode needs metadata to carry the attributes.
    binary_mode: bool = True
    # One message may carry a batch of CloudEvents (HTTP `cloudevents-batch+json`).
    batches: bool = False
    # Fields a message rendered from a definition gets unless the definition sets them.
    rendered_defaults: Mapping[str, str] = field(default_factory=dict)
    # How a sender waits for an answer and the gateway can give one (`routes[].reply`);
    # None when the protocol has no request-reply.
    request_reply: RequestReply | None = None
    # What a nack(retry=True) leads to at the source; None: the source keeps nothing.
    redelivery: Redelivery | None = None
    # Shadow mode: how an observing route subscribes, or why it cannot.
    observe: Observing = Observing("", "observing is not implemented for this protocol")

    def definition_field(self, name: str) -> FieldSpec | None:
        for spec in self.definitions.fields:
            if spec.name == name:
                return spec
        return None
