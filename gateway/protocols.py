"""Protocol names and the per-protocol field tables of the message definitions spec.

One table drives the native record's validation, the definitions validator (option names
and types) and the matcher (how to read a field from a record). Names and types follow
`message-definitions-1.0-rc2`, section "Message Protocols".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

MQTT5 = "MQTT/5.0"
MQTT311 = "MQTT/3.1.1"
AMQP = "AMQP/1.0"
KAFKA = "KAFKA"
NATS = "NATS"
HTTP = "HTTP"

PROTOCOLS: tuple[str, ...] = (MQTT5, MQTT311, AMQP, KAFKA, NATS, HTTP)


def normalize_protocol(name: str | None) -> str | None:
    """Map any accepted spelling to the canonical protocol name, or None when absent.

    Case-insensitive; `MQTT` means 5.0, `AMQP` means 1.0, `HTTP/x` is `HTTP`, `KAFKA/x` and
    `NATS/x` ignore the version, `None` (a pre-rc1 default seen in real catalogs) is absent.
    Unknown names are returned upper-cased so the validator can report them.
    """
    if name is None:
        return None
    text = name.strip()
    upper = text.upper()
    if upper in ("", "NONE"):
        return None
    family, _, version = upper.partition("/")
    if family == "MQTT":
        if version in ("3.1.1", "3.1", "3"):
            return MQTT311
        if version in ("", "5", "5.0"):
            return MQTT5
        return f"MQTT/{version}"
    if family == "AMQP":
        return AMQP if version in ("", "1.0", "1") else f"AMQP/{version}"
    if family in ("HTTP", "HTTPS"):
        return HTTP
    if family == "KAFKA":
        return KAFKA
    if family == "NATS":
        return NATS
    return upper


def is_known_protocol(name: str | None) -> bool:
    return name in PROTOCOLS


FieldKind = Literal["scalar", "list", "map", "section"]


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

    def member_type(self, member: str) -> str | None:
        for name, typ in self.members:
            if name == member:
                return typ
        return None


_AMQP_PROPERTIES = (
    ("message-id", "any"),
    ("user-id", "binary"),
    ("to", "uritemplate"),
    ("subject", "string"),
    ("reply-to", "uritemplate"),
    ("correlation-id", "string"),
    ("content-type", "symbol"),
    ("content-encoding", "symbol"),
    ("absolute-expiry-time", "timestamp"),
    ("creation-time", "timestamp"),
    ("group-id", "string"),
    ("group-sequence", "integer"),
    ("reply-to-group-id", "uritemplate"),
)
_AMQP_HEADER = (
    ("durable", "boolean"),
    ("priority", "integer"),
    ("ttl", "integer"),
    ("first-acquirer", "boolean"),
    ("delivery-count", "integer"),
)

_MQTT_FIELDS = (
    FieldSpec("topic_name", "scalar", "uritemplate"),
    FieldSpec("qos", "scalar", "integer"),
    FieldSpec("retain", "scalar", "boolean"),
)
_MQTT5_ONLY = (
    FieldSpec("payload_format", "scalar", "integer"),
    FieldSpec("message_expiry_interval", "scalar", "integer"),
    FieldSpec("response_topic", "scalar", "uritemplate"),
    FieldSpec("correlation_data", "scalar", "binary"),
    FieldSpec("content_type", "scalar", "symbol"),
    FieldSpec("user_properties", "list", "string"),
)

# Fields a *message definition's* protocoloptions may constrain, per protocol.
DEFINITION_FIELDS: dict[str, tuple[FieldSpec, ...]] = {
    MQTT5: _MQTT_FIELDS + _MQTT5_ONLY,
    MQTT311: _MQTT_FIELDS,
    AMQP: (
        FieldSpec("properties", "section", members=_AMQP_PROPERTIES),
        FieldSpec("application-properties", "section"),
        FieldSpec("message-annotations", "section"),
        FieldSpec("delivery-annotations", "section"),
        FieldSpec("header", "section", members=_AMQP_HEADER),
        FieldSpec("footer", "section"),
    ),
    KAFKA: (
        FieldSpec("topic", "scalar", "string"),
        FieldSpec("partition", "scalar", "integer"),
        FieldSpec("key", "scalar", "string"),
        FieldSpec("key_base64", "scalar", "binary"),
        FieldSpec("headers", "map", "string"),
    ),
    NATS: (
        FieldSpec("subject", "scalar", "uritemplate"),
        FieldSpec("reply-to", "scalar", "uritemplate"),
        FieldSpec("headers", "list", "string"),
    ),
    HTTP: (
        FieldSpec("path", "scalar", "uritemplate"),
        FieldSpec("method", "scalar", "string"),
        FieldSpec("status", "scalar", "string"),
        FieldSpec("headers", "list", "string", case_insensitive_names=True),
        FieldSpec("query", "map", "string"),
    ),
}

# Fields of the *native message record* per protocol (JSON form). Collections of headers
# and user properties are always lists of {name, value} in the record, even where the
# definition spells them as a map (Kafka headers).
RecordFieldType = Literal["string", "integer", "boolean", "pairs", "object", "strmap"]

RECORD_FIELDS: dict[str, dict[str, RecordFieldType]] = {
    MQTT5: {
        "topic_name": "string",
        "qos": "integer",
        "retain": "boolean",
        "payload_format": "integer",
        "message_expiry_interval": "integer",
        "response_topic": "string",
        "correlation_data": "string",
        "content_type": "string",
        "user_properties": "pairs",
    },
    MQTT311: {"topic_name": "string", "qos": "integer", "retain": "boolean"},
    AMQP: {
        "properties": "object",
        "application-properties": "object",
        "message-annotations": "object",
        "delivery-annotations": "object",
        "header": "object",
        "footer": "object",
    },
    KAFKA: {
        "topic": "string",
        "partition": "integer",
        "offset": "integer",
        "key": "string",
        "key_base64": "string",
        "headers": "pairs",
        "timestamp": "integer",
    },
    NATS: {
        "subject": "string",
        "reply-to": "string",
        "headers": "pairs",
        # JetStream delivery identity (gateway extension, used for deterministic ids).
        "stream": "string",
        "sequence": "integer",
    },
    HTTP: {"method": "string", "path": "string", "query": "strmap", "headers": "pairs"},
}


def definition_field(protocol: str, name: str) -> FieldSpec | None:
    for spec in DEFINITION_FIELDS.get(protocol, ()):
        if spec.name == name:
            return spec
    return None


def percent_decoded(protocol: str | None, field: str) -> bool:
    """Whether a field's values are percent-encoded on the wire (HTTP path and query).
    Their templates match the raw text, split on `/` first, and each captured value is
    then decoded: the inverse of RFC 6570 expansion, which encodes `a/b` as `a%2Fb`."""
    return protocol == HTTP and field in ("path", "query")


def token_separator(protocol: str | None, field: str) -> str:
    """What one placeholder of a template on this field never spans: `.` in a NATS subject
    (a token, as the `*` wildcard of the derived subscription), else `/`."""
    return "." if protocol == NATS and field == "subject" else "/"
